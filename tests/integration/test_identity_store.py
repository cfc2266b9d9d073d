"""Projects, users, keys and tokens in the store, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import pathlib

import pytest
from cryptography.fernet import Fernet

from corral.domain import errors, identity
from corral.services import accounts, secretbox
from corral.store import db, identity_repo
from tests import conftest

NOW = 1_700_000_000_000


@pytest.fixture
def box() -> secretbox.SecretBox:
    return secretbox.SecretBox(Fernet.generate_key())


def test_first_start_makes_one_admin_with_a_key_and_a_token(
        store: db.Store, box: secretbox.SecretBox) -> None:
    with store.begin() as conn:
        pid = identity_repo.ensure_default_project(conn, NOW)
        first = accounts.bootstrap(conn, box, project_id=pid, now=NOW)
        again = accounts.bootstrap(conn, box, project_id=pid, now=NOW)

    assert first is not None and again is None
    assert first.token and first.key.access_key and first.key.secret_key
    with store.read() as conn:
        key = identity_repo.live_key(conn, first.key.access_key)
        token = identity_repo.live_token(conn, secretbox.hash_token(first.token), NOW)
        assert key is not None and token is not None
        admin = identity_repo.principal(conn, key.user_id)
    assert box.decrypt(key.secret_sealed) == first.key.secret_key
    assert key.secret_sealed != first.key.secret_key
    assert admin is not None and admin.is_admin and admin.user_name == "admin"
    assert admin.role_in(pid) is identity.Role.ADMIN


def test_memberships_keys_and_tokens_live_and_die(store: db.Store,
                                                  box: secretbox.SecretBox) -> None:
    with store.begin() as conn:
        p1 = identity_repo.create_project(conn, "one", NOW)
        p2 = identity_repo.create_project(conn, "two", NOW)
        uid = identity_repo.create_user(conn, "u", is_admin=False, now=NOW)
        identity_repo.set_role(conn, uid, p1, identity.Role.VIEWER, NOW)
        # a change, not a second row
        identity_repo.set_role(conn, uid, p1, identity.Role.MEMBER, NOW)
        identity_repo.set_role(conn, uid, p2, identity.Role.ADMIN, NOW)
        key = accounts.issue_key(conn, box, user_id=uid, project_id=p1, description="",
                                 now=NOW)
        tid, token = accounts.issue_token(conn, user_id=uid, description="", now=NOW,
                                          expires_at=NOW + 1000)
    with store.read() as conn:
        assert identity_repo.roles_of(conn, uid) == {p1: identity.Role.MEMBER,
                                                     p2: identity.Role.ADMIN}
        assert identity_repo.live_key(conn, key.access_key) is not None
        assert identity_repo.live_token(conn, secretbox.hash_token(token), NOW + 999) is not None
        assert identity_repo.live_token(conn, secretbox.hash_token(token), NOW + 1000) is None
        assert [k.access_key for k in identity_repo.list_keys(conn, p1, uid)] == [key.access_key]

    with store.begin() as conn:
        identity_repo.remove_member(conn, uid, p1, NOW)
    with store.read() as conn:
        assert identity_repo.live_key(conn, key.access_key) is None  # revoked with the membership
        assert identity_repo.roles_of(conn, uid) == {p2: identity.Role.ADMIN}

    with store.begin() as conn:
        identity_repo.disable_user(conn, uid, NOW)
    with store.read() as conn:
        assert identity_repo.principal(conn, uid) is None
        assert identity_repo.live_token(conn, secretbox.hash_token(token), NOW) is None
        assert [t.id for t in identity_repo.list_tokens(conn, uid)] == [tid]


def test_names_are_unique_and_checked(store: db.Store) -> None:
    with store.begin() as conn:
        identity_repo.create_project(conn, "team", NOW)
        identity_repo.create_user(conn, "ann", is_admin=False, now=NOW)
        with pytest.raises(errors.DuplicateName):
            identity_repo.create_project(conn, "team", NOW)
        with pytest.raises(errors.DuplicateName):
            identity_repo.create_user(conn, "ann", is_admin=False, now=NOW)
        for bad in ("", "a b", "../x", "x" * 65, "-lead"):
            with pytest.raises(errors.BadParameter):
                identity_repo.create_user(conn, bad, is_admin=False, now=NOW)


@pytest.mark.postgres
def test_a_live_server_on_postgresql_verifies_keys_and_tokens(
        pg_url: str, tmp_path: pathlib.Path) -> None:
    from tests.api.test_sdk import connect

    live = conftest.start_live(tmp_path / "home", database_url=pg_url)
    try:
        viewer = live.new_user("pat", "viewer")
        sdk = connect(live, viewer.access_key, viewer.secret_key)
        assert sdk.search().total == 0
        r = viewer.http.post(live.path("/training-jobs"), json={"kind": "job"})
        assert (r.status_code, r.json()["error_code"]) == (403, "ModelArts.0403")
        sdk.client.get_http_client().close()
    finally:
        conftest.stop_live(live)
