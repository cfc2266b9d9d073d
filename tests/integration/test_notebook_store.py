"""The notebooks table on SQLite and PostgreSQL: guarded state changes, the list, and the
migration that adds it (0010) going up over existing jobs and back down."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from corral.domain import notebooks
from corral.store import db, job_repo, kind_repo, notebook_repo
from tests.integration.test_store import NOW, project  # noqa: F401

State = notebooks.State


def a_notebook(project_id: str, name: str = "nb", **values: Any) -> dict[str, Any]:
    row = {"id": notebook_repo.new_id(), "project_id": project_id, "name": name,
           "description": "", "user_name": "ann", "flavor_id": "corral.cpu.1u",
           "image_id": "python-3.11", "pool_id": "default", "workspace": "/tmp/ws",
           "volume": "{}", "state": State.STARTING.value, "session": 1,
           "lease_type": "timing", "lease_ms": 1000, "created_at": NOW, "updated_at": NOW}
    row.update(values)
    return row


def test_a_notebooks_state_moves_only_from_its_state_and_its_session(
        store: db.Store, project: str) -> None:  # noqa: F811
    with store.begin() as conn:
        notebook_repo.insert(conn, values := a_notebook(project))
        read = notebook_repo.get(conn, project, values["id"])
        # A user started a new session meanwhile: a decision about the old one is dropped.
        conn.execute(notebook_repo.T.update().values(session=2))
        assert not notebook_repo.transition(conn, read, to=State.RUNNING,
                                            now=NOW,
                                            message="up")
        fresh = notebook_repo.get(conn, project, values["id"])
        assert notebook_repo.transition(conn, fresh, to=State.RUNNING,
                                        now=NOW,
                                        message="up", port=1234)
        assert not notebook_repo.transition(conn, fresh, to=State.RUNNING,
                                            now=NOW,
                                            message="again")
    with store.read() as conn:
        after = notebook_repo.get(conn, project, values["id"])
        _total, events = kind_repo.list_events(conn, notebooks.KIND, after.id)
    assert (after.state, after.port) == ("running", 1234)
    assert [e.message for e in events] == ["up"]


def test_a_session_that_ended_is_not_moved_over_a_users_stop(
        store: db.Store, project: str) -> None:  # noqa: F811
    with store.begin() as conn:
        notebook_repo.insert(conn, values := a_notebook(project, state="running"))
        read = notebook_repo.get(conn, project, values["id"])
        # its job ended by itself, as the controller read it; a user stopped it meanwhile
        conn.execute(notebook_repo.T.update().values(state="stopping"))
        assert not notebook_repo.transition(conn, read, to=State.STOPPED, now=NOW,
                                            unchanged=True, message="ended")
        assert notebook_repo.transition(conn, read, to=State.STOPPED, now=NOW,
                                        message="Stopped: asked to")
        assert not notebook_repo.transition(conn, read, to=State.STARTING, now=NOW,
                                            unchanged=True, message="not from running")
    with store.read() as conn:
        assert notebook_repo.get(conn, project, values["id"]).state == "stopped"


def test_the_list_filters_pages_and_keeps_to_its_project(
        store: db.Store, project: str) -> None:  # noqa: F811
    with store.begin() as conn:
        for i in range(3):
            notebook_repo.insert(conn, a_notebook(project, f"nb-{i}", created_at=NOW + i,
                                                  state="stopped" if i else "running"))
        total, page = notebook_repo.search(conn, project, limit=2)
        stopped, _ = notebook_repo.search(conn, project, states={"stopped"})
        named, found = notebook_repo.search(conn, project, name="nb-1")
        elsewhere, _ = notebook_repo.search(conn, "no-such-project")
    assert (total, [n.name for n in page]) == (3, ["nb-2", "nb-1"])
    assert (stopped, named, [n.name for n in found], elsewhere) == (2, 1, ["nb-1"], 0)


def test_migration_0010_adds_notebooks_over_existing_jobs_and_goes_back_down(
        db_url: str) -> None:
    from tests.integration.test_store_scheduling import _migrated_from

    with _migrated_from(db_url, "0009", "Completed", "Completed") as engine:
        with engine.begin() as conn:
            assert job_repo.job_by_id(conn, "j") is not None
            project_id = conn.execute(sa.text("SELECT project_id FROM jobs")).scalar_one()
            notebook_repo.insert(conn, a_notebook(project_id))
        db.downgrade(engine, "0009")
        with engine.connect() as conn:
            assert "notebooks" not in sa.inspect(conn).get_table_names()
            assert conn.execute(sa.text("SELECT count(*) FROM jobs")).scalar_one() == 1
        db.upgrade(engine)
