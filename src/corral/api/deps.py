"""What the API needs from the running platform, handed in by the server at start-up."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Request

from corral import settings as settings_mod
from corral.scheduler import catalog as catalog_mod
from corral.scheduler import submit
from corral.storage import objects
from corral.store import db


@dataclasses.dataclass
class Context:
    store: db.Store
    catalog: catalog_mod.Catalog
    settings: settings_mod.Settings
    default_project_id: str
    #: the object stores s3:// URLs resolve to (versions and models: issue 6)
    stores: objects.Stores | None = None
    wake: Callable[[], None] = lambda: None
    clock: Callable[[], float] = time.time

    def now(self) -> int:
        return int(self.clock() * 1000)

    @property
    def places(self) -> submit.Places:
        return submit.Places(runs_dir=self.settings.runs_dir, stores=self.stores,
                             model_channel=self.settings.model_channel)


def get_context(request: Request) -> Context:
    ctx: Context = request.app.state.context
    return ctx


Ctx = Annotated[Context, Depends(get_context)]
