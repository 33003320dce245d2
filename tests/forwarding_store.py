"""``ForwardingStore``: a real store behind a wrapper that passes every call through, for tests
that need to watch or hold one kind of call (count the lists, gate the creates) and leave the
rest alone — a subclass overrides only the calls it is about.

Nothing here fakes a store: ``inner`` is a real memory, SQLite or etcd store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from store.base import Event, KeyValue, ListResult, Store

__all__ = ["ForwardingStore"]


class ForwardingStore:
    """Every ``Store`` call, passed to ``inner`` as it came."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    async def get(self, key: str) -> KeyValue | None:
        return await self.inner.get(key)

    async def list(
        self, prefix: str, *, revision: int = 0, start_after: str | None = None, limit: int = 0
    ) -> ListResult:
        return await self.inner.list(
            prefix, revision=revision, start_after=start_after, limit=limit
        )

    async def create(self, key: str, value: bytes, *, ttl: float | None = None) -> KeyValue:
        return await self.inner.create(key, value, ttl=ttl)

    async def update(
        self, key: str, value: bytes, *, expected_revision: int, ttl: float | None = None
    ) -> KeyValue:
        return await self.inner.update(key, value, expected_revision=expected_revision, ttl=ttl)

    async def delete(self, key: str, *, expected_revision: int | None = None) -> KeyValue:
        return await self.inner.delete(key, expected_revision=expected_revision)

    def watch(
        self, prefix: str, *, after_revision: int, on_progress: Callable[[int], None] | None = None
    ) -> AsyncIterator[Event]:
        return self.inner.watch(prefix, after_revision=after_revision, on_progress=on_progress)

    async def request_progress(self) -> bool:
        return await self.inner.request_progress()

    async def current_revision(self) -> int:
        return await self.inner.current_revision()

    async def compacted_revision(self) -> int:
        return await self.inner.compacted_revision()

    async def compact(self, revision: int) -> None:
        await self.inner.compact(revision)

    async def close(self) -> None:
        await self.inner.close()
