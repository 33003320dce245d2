"""Live fan-out of committed writes to a store's watches, and the seam between history and live.

Why in-process: only one process (the apiserver) opens a kubelite store, so every write passes
through this process and can be handed to the watches right after it commits — no polling.
Both backends publish here; each supplies a ``HistoryReader`` for the back-fill.

How a watch from revision N avoids gaps and duplicates at the history/live seam:

1. subscribe to live events first (everything published from now on is buffered);
2. back-fill from history, page by page, every event with revision > N (this includes writes
   committed while subscribing, and may include some that are also in the live buffer);
3. continue from the live buffer, skipping every revision already yielded.

A write published after step 1 is in the live buffer; one committed before step 2's read is in
history; a backend must therefore publish a write only after it is visible to history reads,
and publish in revision order. Both backends do.

What it does not guarantee: unbounded buffering. Each watch buffers at most ``capacity`` live
events (only those under its prefix); a consumer that lets it fill — or a back-fill so long
that that many live events arrive meanwhile — is ended with ``WatchOverflow`` so that writers
never wait for a slow reader. The caller watches again from ``WatchOverflow.last_revision``.

Single event loop: ``publish`` and the watches must run on the loop that owns the hub.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Protocol

from store.base import Event, StoreClosed, WatchOverflow

__all__ = ["DEFAULT_WATCH_BUFFER", "HistoryReader", "WatchHub"]

DEFAULT_WATCH_BUFFER = 4096
"""Live events one watch may hold unread. The apiserver's watch cache drains its single store
watch per resource continuously; 4096 absorbs a burst of group-committed writes (a few
hundred per commit) many times over while bounding memory to a few MB per watch."""

HISTORY_PAGE = 500
"""Events read from history per round trip during a back-fill."""


class HistoryReader(Protocol):
    """Events under ``prefix`` with revision > ``after_revision``, oldest first, at most ``limit``.

    Raises ``Compacted`` when ``after_revision`` is older than the compacted window.
    """

    async def __call__(
        self, prefix: str, *, after_revision: int, limit: int
    ) -> Sequence[Event]: ...


class _Overflowed(Exception):
    """Internal: the subscription's buffer filled up."""


class _Subscription:
    __slots__ = ("buffer", "error", "prefix", "waiter")

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.buffer: collections.deque[Event] = collections.deque()
        self.error: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.buffer.clear()
        self.wake()

    def wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def next(self) -> Event:
        while not self.buffer:
            if self.error is not None:
                raise self.error
            self.waiter = asyncio.get_running_loop().create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        return self.buffer.popleft()


class WatchHub:
    """Fans committed events out to every open watch whose prefix they fall under."""

    def __init__(self, *, capacity: int = DEFAULT_WATCH_BUFFER) -> None:
        if capacity < 1:
            raise ValueError(f"watch buffer capacity must be >= 1, got {capacity}")
        self._capacity = capacity
        self._subscriptions: set[_Subscription] = set()
        self._closed = False
        self._close_error: StoreClosed | None = None

    @property
    def watch_count(self) -> int:
        """Open watches (subscribed to live events)."""
        return len(self._subscriptions)

    def publish(self, events: Iterable[Event]) -> None:
        """Hand committed events (in revision order) to every matching watch; never blocks."""
        if not self._subscriptions:
            return
        batch = list(events)
        for sub in list(self._subscriptions):
            added = False
            for event in batch:
                if not event.kv.key.startswith(sub.prefix):
                    continue
                if len(sub.buffer) >= self._capacity:
                    self._subscriptions.discard(sub)
                    sub.fail(_Overflowed())
                    break
                sub.buffer.append(event)
                added = True
            if added:
                sub.wake()

    def close(self, *, error: StoreClosed | None = None) -> None:
        """End every watch with ``error`` (default ``StoreClosed``); later watches fail at once.

        Only the first call counts, so a store that failed and is then closed keeps its reason.
        """
        if self._closed:
            return
        self._closed = True
        self._close_error = error
        for sub in self._subscriptions:
            sub.fail(error or StoreClosed("store closed"))
        self._subscriptions.clear()

    async def watch(
        self, prefix: str, *, after_revision: int, history: HistoryReader
    ) -> AsyncIterator[Event]:
        """Back-filled then live events under ``prefix`` after ``after_revision``, each once."""
        if self._closed:
            raise self._close_error or StoreClosed("store closed")
        sub = _Subscription(prefix)
        self._subscriptions.add(sub)
        last = after_revision
        try:
            while True:
                if sub.error is not None:
                    raise sub.error
                page = await history(prefix, after_revision=last, limit=HISTORY_PAGE)
                for event in page:
                    last = event.revision
                    yield event
                if len(page) < HISTORY_PAGE:
                    break
            while True:
                event = await sub.next()
                if event.revision <= last:
                    continue
                last = event.revision
                yield event
        except _Overflowed:
            raise WatchOverflow(last, self._capacity) from None
        finally:
            self._subscriptions.discard(sub)
