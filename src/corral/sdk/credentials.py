"""The local login file, `$CORRAL_HOME/credentials.json` (mode 0600), that clients use.

The first start of a server writes the platform admin's credential there, so the CLI on
the same machine works with no step of its own; `corral login` replaces it. It holds a
bearer token and/or an access key pair, the project they are for and the server's URL.

The file is the clients' (the CLI reads it, a script with the SDK may), so its format
lives with the client, which imports nothing of the server: the server writes it once as
a client would, and depends on the client's format rather than the CLI on the server.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from typing import Any


@dataclasses.dataclass
class Login:
    project_id: str
    user: str = ""
    url: str | None = None
    token: str | None = None
    access_key: str | None = None
    secret_key: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


def read(path: pathlib.Path) -> Login | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not data.get("project_id"):
        return None
    fields = {f.name for f in dataclasses.fields(Login)}
    return Login(**{k: v for k, v in data.items() if k in fields})


def write(path: pathlib.Path, login: Login) -> None:
    """Atomically, never readable by others, not even for a moment."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(login.to_json(), fh, indent=2)
        fh.write("\n")
    os.replace(tmp, path)
