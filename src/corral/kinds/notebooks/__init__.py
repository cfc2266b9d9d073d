"""Notebooks: JupyterLab on the platform's resources, behind its login, stopping by itself.

A notebook (`domain/notebooks.py`) runs each session as a training job it owns
(`kinds/owned.py`, role `session-<n>`), so that the scheduler queues, places, accounts and
contains it like any other job. `session.py` says what that job runs and the files it
reads; `jupyter.py` talks to its JupyterLab (is it up, is anything happening, shut down);
`controller.py` moves notebooks along on every pass of the kinds' loop; `actions.py` is
what users do to them (the API calls it).
"""

from __future__ import annotations

from corral import settings as settings_mod
from corral.kinds.notebooks import controller
from corral.services import runtime
from corral.store import db


def controller_for(store: db.Store, settings: settings_mod.Settings,
                   services: runtime.Runtime) -> controller.Controller:
    """The notebooks' controller, as the server runs it."""
    return controller.Controller(store, settings, services)
