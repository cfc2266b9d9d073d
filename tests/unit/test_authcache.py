"""The memory of verified credentials: kept for its time, and never past a revocation."""

from __future__ import annotations

from corral.api import authcache
from corral.domain import identity
from tests.unit import fakes

ALICE = identity.Principal(user_id="u1", user_name="alice", is_admin=False, roles={})


def test_a_credential_is_remembered_for_its_time_only() -> None:
    clock = fakes.FakeClock()
    cache = authcache.CredentialCache(5.0, clock=clock)
    cache.put("token:x", authcache.Entry(ALICE), cache.generation)
    clock.advance(4.9)
    assert cache.get("token:x") == authcache.Entry(ALICE)
    clock.advance(0.2)
    assert cache.get("token:x") is None


def test_clearing_forgets_everything_and_a_lookup_under_way_is_not_kept() -> None:
    cache = authcache.CredentialCache(5.0, clock=fakes.FakeClock())
    cache.put("token:x", authcache.Entry(ALICE), cache.generation)
    started = cache.generation  # a lookup begins and reads the database ...
    cache.clear()  # ... while a revocation commits
    assert cache.get("token:x") is None
    cache.put("token:y", authcache.Entry(ALICE), started)  # what it read may be stale
    assert cache.get("token:y") is None
    cache.put("token:y", authcache.Entry(ALICE), cache.generation)
    assert cache.get("token:y") is not None


def test_a_time_of_zero_remembers_nothing() -> None:
    cache = authcache.CredentialCache(0.0, clock=fakes.FakeClock())
    cache.put("token:x", authcache.Entry(ALICE), cache.generation)
    assert cache.get("token:x") is None
