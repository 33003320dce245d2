"""The in-memory store (``memory://``): the full contract, no durability, no threads.

For tests, demos and benchmarks of everything above the store. It keeps the same
log-structured shape as the SQLite backend: a revision log (``Record``s, for watch back-fill)
and, per key, the versions still needed to answer a list at any revision inside the window.
Every method runs on the event loop without awaiting in the middle of a write, so each write's
compare-and-swap is atomic by construction.

Limits: everything is lost when the process exits; memory grows with the history until
``compact`` is called (see ``store.compactor``); compaction runs in one go, not in batches,
which is fine at the sizes this backend is meant for.
"""

from __future__ import annotations

import bisect
from collections.abc import AsyncIterator, Callable, Sequence

from store.base import (
    Compacted,
    Event,
    KeyValue,
    ListResult,
    StoreClosed,
)
from store.record import Op, Record, WriteKind, next_record, prefix_end
from store.watchhub import DEFAULT_WATCH_BUFFER, WatchHub

__all__ = ["MemoryStore"]


def _revision_of(record: Record) -> int:
    return record.revision


class MemoryStore:
    """A ``Store`` held in process memory."""

    def __init__(self, *, watch_buffer: int = DEFAULT_WATCH_BUFFER) -> None:
        self._revision = 0
        self._compacted = 0
        self._log: list[Record] = []
        """Records with revision > compacted, in revision order (watch back-fill)."""
        self._versions: dict[str, list[Record]] = {}
        """Per key, the records a list at a revision >= compacted may need."""
        self._keys: list[str] = []
        """The keys of ``_versions``, sorted: list by prefix is a bisect range."""
        self._hub = WatchHub(capacity=watch_buffer)
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("store closed")

    async def get(self, key: str) -> KeyValue | None:
        self._check_open()
        versions = self._versions.get(key)
        return versions[-1].kv() if versions else None

    async def list(
        self,
        prefix: str,
        *,
        revision: int = 0,
        start_after: str | None = None,
        limit: int = 0,
    ) -> ListResult:
        self._check_open()
        if revision and revision < self._compacted:
            raise Compacted(revision, self._compacted)
        at = min(revision, self._revision) if revision else self._revision
        if start_after is not None and start_after >= prefix:
            lo = bisect.bisect_right(self._keys, start_after)
        else:
            lo = bisect.bisect_left(self._keys, prefix)
        end = prefix_end(prefix)
        hi = bisect.bisect_left(self._keys, end) if end is not None else len(self._keys)
        items: list[KeyValue] = []
        for key in self._keys[lo:hi]:
            versions = self._versions[key]
            index = bisect.bisect_right(versions, at, key=_revision_of)
            kv = versions[index - 1].kv() if index else None
            if kv is None:
                continue
            if limit and len(items) == limit:
                return ListResult(items=items, revision=at, more=True)
            items.append(kv)
        return ListResult(items=items, revision=at)

    async def create(self, key: str, value: bytes, *, ttl: float | None = None) -> KeyValue:
        """``ttl`` is ignored: this backend has no leases (``store.base``)."""
        record = self._append(Op(WriteKind.CREATE, key, value))
        kv = record.kv()
        assert kv is not None
        return kv

    async def update(
        self, key: str, value: bytes, *, expected_revision: int, ttl: float | None = None
    ) -> KeyValue:
        """``ttl`` is ignored: this backend has no leases (``store.base``)."""
        record = self._append(Op(WriteKind.UPDATE, key, value, expected_revision))
        kv = record.kv()
        assert kv is not None
        return kv

    async def delete(self, key: str, *, expected_revision: int | None = None) -> KeyValue:
        record = self._append(Op(WriteKind.DELETE, key, expected_revision=expected_revision))
        return record.event().kv

    def _append(self, op: Op) -> Record:
        self._check_open()
        versions = self._versions.get(op.key)
        latest = versions[-1] if versions else None
        record = next_record(op, latest=latest, revision=self._revision + 1)
        self._revision = record.revision
        self._log.append(record)
        if versions is None:
            self._versions[op.key] = [record]
            bisect.insort(self._keys, op.key)
        else:
            versions.append(record)
        self._hub.publish(map(Record.event, (record,)), revision=record.revision)
        return record

    def watch(
        self,
        prefix: str,
        *,
        after_revision: int,
        on_progress: Callable[[int], None] | None = None,
    ) -> AsyncIterator[Event]:
        """``on_progress`` reports the markers ``request_progress`` queues (``store.watchhub``)."""
        return self._hub.watch(
            prefix, after_revision=after_revision, history=self._history, on_progress=on_progress
        )

    async def request_progress(self) -> bool:
        """Answered at once by the hub, which every write passes through (``store.watchhub``)."""
        self._hub.request_progress()
        return True

    async def _history(self, prefix: str, *, after_revision: int, limit: int) -> Sequence[Event]:
        self._check_open()
        if after_revision < self._compacted:
            raise Compacted(after_revision, self._compacted)
        start = bisect.bisect_right(self._log, after_revision, key=_revision_of)
        events: list[Event] = []
        for record in self._log[start:]:
            if record.key.startswith(prefix):
                events.append(record.event())
                if len(events) == limit:
                    break
        return events

    async def current_revision(self) -> int:
        return self._revision

    async def compacted_revision(self) -> int:
        return self._compacted

    async def compact(self, revision: int) -> None:
        self._check_open()
        if revision > self._revision:
            raise ValueError(
                f"cannot compact to {revision}: the current revision is {self._revision}"
            )
        if revision <= self._compacted:
            return
        self._compacted = revision
        del self._log[: bisect.bisect_right(self._log, revision, key=_revision_of)]
        for key, versions in list(self._versions.items()):
            index = bisect.bisect_right(versions, revision, key=_revision_of)
            if index == 0:
                continue
            keep_from = index - 1 if not versions[index - 1].deleted else index
            if keep_from:
                del versions[:keep_from]
            if not versions:
                del self._versions[key]
        if len(self._keys) != len(self._versions):
            self._keys = [key for key in self._keys if key in self._versions]

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._hub.close()
