"""What the API needs from the running platform, handed in by the server at start-up."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Request

from corral import secretbox
from corral import settings as settings_mod
from corral.scheduler import catalog as catalog_mod
from corral.store import db


@dataclasses.dataclass
class Context:
    store: db.Store
    catalog: catalog_mod.Catalog
    settings: settings_mod.Settings
    default_project_id: str
    #: seals and opens stored secret keys (None only where nothing verifies signatures)
    box: secretbox.SecretBox | None = None
    wake: Callable[[], None] = lambda: None
    clock: Callable[[], float] = time.time

    def now(self) -> int:
        return int(self.clock() * 1000)


def get_context(request: Request) -> Context:
    ctx: Context = request.app.state.context
    return ctx


Ctx = Annotated[Context, Depends(get_context)]
