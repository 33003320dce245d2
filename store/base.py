"""The store contract every backend implements, shaped after etcd v3.

What a backend owns:

* **One global revision**, a positive integer that increases by one with every write (create,
  update or delete) across all keys. An object's ``resourceVersion`` is the revision of its last
  write; a list's is the revision it was read at.
* **Compare-and-swap enforced inside the store.** ``create`` fails with ``KeyExists`` if the key
  is live; ``update``/``delete`` take the revision the caller last read and fail with
  ``RevisionMismatch`` (carrying the current value) if another write came in between. There is no
  check-then-write for callers to get wrong: callers re-read and retry.
* **Watch from a revision.** ``watch(prefix, after_revision=N)`` yields every event on keys under
  ``prefix`` with revision > N, in revision order, each exactly once, each with the previous value
  — history first (back-filled), then live, with no gap or duplicate at the seam. A revision older
  than the compacted window raises ``Compacted``.
* **Compaction.** ``compact(R)`` drops the history that no read at a revision >= R needs (as
  etcd does): afterwards ``list(revision=N)`` and ``watch(after_revision=N)`` work for every
  N >= R and raise ``Compacted`` for N < R. The current value of every live key is always kept.

What a backend does not own: object semantics. Values are opaque bytes (the apiserver's JSON);
``resourceVersion`` is *not* inside the stored value — the apiserver stamps it from
``mod_revision`` on the way out, as Kubernetes does with etcd.

Keys are ``/``-separated strings; a prefix used for listing or watching should end with ``/``.

A write may carry a ``ttl`` (Events do): a backend with leases (etcd) deletes the key once it
expires; the others ignore it, and nothing may rely on it happening.

**Progress notifications.** A watch may be given ``on_progress``: a backend that learns that
every event under the prefix up to revision R has been yielded calls ``on_progress(R)`` between
two events, in stream order, so the consumer has applied all of them by then. It is what lets a
cache that only sees its own prefix know it is current although the latest writes were
elsewhere (the apiserver's watch cache serves consistent lists so). ``request_progress()`` asks
for one notification on every such watch, for a revision at least that of every write
acknowledged before the call (Kubernetes' ``RequestWatchProgress``); it answers False when the
backend cannot ask, and then nothing is coming. Memory and SQLite answer every request at once
from their watch hub (``store.watchhub``) and send nothing unasked; etcd cannot ask over its
JSON gateway and sends only its periodic notifications (``store.etcd``). A hint to speed reads
up, never needed for correctness: a consumer waits for one only with a bound.

Revisions: etcd's count every write to the etcd cluster, so a store need not start at 0 and
two stores on one etcd share one sequence; memory and SQLite start at 0.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "Compacted",
    "Event",
    "EventType",
    "KeyExists",
    "KeyNotFound",
    "KeyValue",
    "ListResult",
    "RequestTooLarge",
    "RevisionMismatch",
    "Store",
    "StoreClosed",
    "StoreError",
    "StoreFailed",
    "StoreUnavailable",
    "WatchOverflow",
]


@dataclass(frozen=True, slots=True)
class KeyValue:
    """One key at one revision."""

    key: str
    value: bytes
    create_revision: int
    """Revision of the write that created this incarnation of the key."""
    mod_revision: int
    """Revision of the last write to the key: the object's resourceVersion."""


class EventType(enum.StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


@dataclass(frozen=True, slots=True)
class Event:
    """A change to one key. ``revision`` is the revision of this write.

    For ADDED and MODIFIED, ``kv`` is the new value (``kv.mod_revision == revision``).
    For DELETED, ``kv`` is the last value the key held, with ``mod_revision`` set to the
    deletion's revision (the apiserver stamps that as the object's final resourceVersion).
    ``prev`` is the value before this write (None for ADDED).
    """

    type: EventType
    kv: KeyValue
    prev: KeyValue | None
    revision: int


@dataclass(frozen=True, slots=True)
class ListResult:
    items: list[KeyValue]
    """Live keys under the prefix, in key order."""
    revision: int
    """The revision the list was read at."""
    more: bool = False
    """True when ``limit`` cut the list short; continue with ``start_after=items[-1].key``."""


class StoreError(Exception):
    """Root of the store's own errors (the apiserver maps them to Status errors)."""


class KeyExists(StoreError):
    def __init__(self, key: str) -> None:
        super().__init__(f"key {key!r} already exists")
        self.key = key


class KeyNotFound(StoreError):
    def __init__(self, key: str) -> None:
        super().__init__(f"key {key!r} not found")
        self.key = key


class RevisionMismatch(StoreError):
    """The compare of a compare-and-swap failed: the key moved on since the caller read it."""

    def __init__(self, key: str, expected: int, current: KeyValue) -> None:
        super().__init__(
            f"key {key!r} is at revision {current.mod_revision}, not the expected {expected}"
        )
        self.key = key
        self.expected = expected
        self.current = current


class Compacted(StoreError):
    """The revision asked for has been compacted away (the apiserver answers 410 Expired)."""

    def __init__(self, requested: int, compacted: int) -> None:
        super().__init__(f"revision {requested} has been compacted (oldest kept: {compacted})")
        self.requested = requested
        self.compacted = compacted


class StoreClosed(StoreError):
    """The store was closed; watches end with this."""


class StoreFailed(StoreClosed):
    """The store cannot go on: its storage is damaged, unreadable or cannot be written.

    Raised when a store is opened over such storage, and by every call after a backend found
    its storage damaged while running (watches end with it too). Retrying cannot help, so it is
    a ``StoreClosed``: loops that stop on a closed store stop on this as well. ``str()`` is one
    line saying what is wrong and what to do.
    """

    def __init__(self, problem: str, *, remedy: str) -> None:
        super().__init__(f"{problem}; {remedy}")
        self.problem = problem
        self.remedy = remedy


class StoreUnavailable(StoreError):
    """A networked store (etcd) did not answer within its timeout: no quorum, or no member
    reachable. The apiserver answers 504 Timeout when it timed out, else 503.

    ``timed_out`` tells a member that kept timing out (504) from none being reachable (503).
    """

    def __init__(self, message: str, *, timed_out: bool) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class RequestTooLarge(StoreError):
    """The store refused a write over its request limit (etcd's ``--max-request-bytes``, 1.5 MiB
    by default); the apiserver answers 413 RequestEntityTooLarge."""


class WatchOverflow(StoreError):
    """A watch fell too far behind the writers and was ended (the other watches go on).

    Each watch buffers a bounded number of live events; a consumer that lets the buffer fill
    is cut off rather than allowed to slow the writers or grow memory without bound. Recover
    by watching again from ``last_revision`` (the last event this watch yielded, or the
    ``after_revision`` it started from) — the store back-fills from history, or raises
    ``Compacted`` if that revision has meanwhile left the window.
    """

    def __init__(self, last_revision: int, capacity: int) -> None:
        super().__init__(
            f"watch fell more than {capacity} events behind after revision {last_revision}; "
            "watch again from that revision"
        )
        self.last_revision = last_revision
        self.capacity = capacity


@runtime_checkable
class Store(Protocol):
    """The seam between the apiserver and its storage. See the module docstring for the contract."""

    async def get(self, key: str) -> KeyValue | None:
        """The live value of ``key``, or None."""
        ...

    async def list(
        self,
        prefix: str,
        *,
        revision: int = 0,
        start_after: str | None = None,
        limit: int = 0,
    ) -> ListResult:
        """Live keys under ``prefix`` in key order, as of ``revision`` (0 = now).

        A ``revision`` below the compacted window raises ``Compacted``; one above the current
        revision is served at the current revision. ``limit`` 0 means no limit.
        """
        ...

    async def create(self, key: str, value: bytes, *, ttl: float | None = None) -> KeyValue:
        """Create ``key``; raises ``KeyExists`` if it is live. Durable before it returns.

        ``ttl``: seconds after which the store may delete the key by itself (etcd: a lease,
        which may run up to a minute longer so that writes share leases). A hint only: a
        backend without leases ignores it, so whoever needs the key gone on time deletes it
        too (the apiserver's Event sweeper does). The deletion is an ordinary DELETED event.
        """
        ...

    async def update(
        self, key: str, value: bytes, *, expected_revision: int, ttl: float | None = None
    ) -> KeyValue:
        """Replace ``key`` if its ``mod_revision`` is ``expected_revision``.

        Raises ``KeyNotFound`` if it is not live, ``RevisionMismatch`` if it moved on.
        ``ttl`` as for ``create``, counted from this write (None: the key lives until deleted).
        """
        ...

    async def delete(self, key: str, *, expected_revision: int | None = None) -> KeyValue:
        """Delete ``key`` (guarded by ``expected_revision`` when given).

        Returns the last value with ``mod_revision`` set to the deletion's revision.
        Raises ``KeyNotFound`` / ``RevisionMismatch``.
        """
        ...

    def watch(
        self,
        prefix: str,
        *,
        after_revision: int,
        on_progress: Callable[[int], None] | None = None,
    ) -> AsyncIterator[Event]:
        """Every event under ``prefix`` with revision > ``after_revision``, in order, forever.

        Raises ``Compacted`` (on first iteration) if ``after_revision`` is older than the window.
        The iterator ends with ``StoreClosed`` when the store closes, and with ``WatchOverflow``
        when its consumer falls too far behind (watch again from ``last_revision``); closing
        the iterator (``aclose``) releases it. ``on_progress``: see the module docstring.
        """
        ...

    async def request_progress(self) -> bool:
        """Ask every watch opened with ``on_progress`` to report a revision at least that of
        every write acknowledged before the call, in stream order; False when this backend
        cannot ask (see the module docstring)."""
        ...

    async def current_revision(self) -> int:
        """The revision of the latest write (0 for an empty memory or SQLite store), read so
        that it is at least that of every write acknowledged before the call (etcd: a quorum
        read)."""
        ...

    async def compacted_revision(self) -> int:
        """R of the last ``compact(R)``: the oldest revision a watch may start after (0 = none)."""
        ...

    async def compact(self, revision: int) -> None:
        """Drop history no read at a revision >= ``revision`` needs (never the live values)."""
        ...

    async def close(self) -> None:
        """Release resources; pending watches end with ``StoreClosed``."""
        ...
