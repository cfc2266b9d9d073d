"""What every `corral` command gets as click's context object: the settings, and a client
made on first use. A module of its own so that the commands and the entry point
(`main.py`, which imports every command) both import it, and not each other."""

from __future__ import annotations

import dataclasses

import rich.console

from corral import settings as settings_mod
from corral.cli import lookup, render
from corral.sdk import client, credentials


@dataclasses.dataclass
class State:
    """What every command gets: the settings, and a client made on first use."""

    settings: settings_mod.Settings
    api: client.Client | None = None
    out: rich.console.Console = dataclasses.field(default_factory=render.console)

    def connect(self) -> client.Client:
        """A client for the server, with the credential of the current login if any."""
        if self.api is None:
            login = self.login()
            if login is None:
                self.api = client.Client(self.settings.url)
            else:
                self.api = client.Client(self.url(login), login.project_id, token=login.token,
                                         access_key=login.access_key,
                                         secret_key=login.secret_key)
        return self.api

    def login(self) -> credentials.Login | None:
        return credentials.read(self.settings.credentials_file)

    def url(self, login: credentials.Login | None) -> str:
        """--url or CORRAL_URL when given, else the login's server, else the default."""
        if "url" in self.settings.model_fields_set or login is None or not login.url:
            return self.settings.url
        return login.url

    def job_id(self, ref: str, *, family: bool = False) -> str:
        """The id of the job that `ref` (an id or a name) stands for; see `lookup`."""
        return lookup.job_id(self.connect(), ref, family=family)
