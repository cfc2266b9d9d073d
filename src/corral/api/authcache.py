"""Recently verified credentials, kept for a few seconds so a busy client is not looked up
in the database on every request.

What is kept is the answer of the database (who the credential belongs to, their roles,
when a token expires), never a verdict on a request: a signature is still checked on every
request, and a token's own expiry is checked against the clock on every hit.

Revocation stays prompt:

* every change this server makes to credentials, users or memberships empties the cache
  (`clear`) after its transaction commits and before it answers, so the next request is
  looked up afresh;
* a lookup that was under way while such a change happened is not kept (the generation it
  started in is gone), so it cannot put the old answer back;
* a change made behind this server's back (another process writing the database) is seen
  within `ttl` seconds.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable

from corral.domain import identity

#: entries kept at most; past it the cache starts again empty (cheaper than LRU, and a
#: server with this many live credentials at once looks them up now and then anyway)
MAX_ENTRIES = 4096


@dataclasses.dataclass(frozen=True)
class Entry:
    principal: identity.Principal
    #: a token's expiry (ms since the epoch), or None
    expires_at: int | None = None
    #: for an access key: its sealed secret, to check the signature of each request
    secret_sealed: str = ""


class CredentialCache:
    """Credentials verified in the last `ttl` seconds (0: keep none)."""

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock
        self._entries: dict[str, tuple[float, Entry]] = {}
        self._generation = 0
        self._lock = threading.Lock()

    @property
    def generation(self) -> int:
        """Take this before looking a credential up; hand it to `put`."""
        return self._generation

    def get(self, key: str) -> Entry | None:
        found = self._entries.get(key)
        if found is None:
            return None
        deadline, entry = found
        if self._clock() >= deadline:
            self._entries.pop(key, None)
            return None
        return entry

    def put(self, key: str, entry: Entry, generation: int) -> None:
        """Keep `entry`, unless the cache was cleared since `generation` was taken."""
        if self.ttl <= 0:
            return
        with self._lock:
            if generation != self._generation:
                return
            if len(self._entries) >= MAX_ENTRIES:
                self._entries.clear()
            self._entries[key] = (self._clock() + self.ttl, entry)

    def clear(self) -> None:
        """Forget everything: a credential, user or membership changed."""
        with self._lock:
            self._generation += 1
            self._entries.clear()
