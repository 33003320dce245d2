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

**Progress on request.** Every committed write passes through ``publish`` in revision order, so
the hub always knows the latest revision it has handed out — even to no watch at all — and can
vouch for it at once: ``request_progress`` puts a progress marker carrying that revision into
the buffer of every watch opened with ``on_progress``, behind the events already buffered.
When the watch reaches the marker, every event under its prefix up to that revision has been
yielded (from history or from the buffer ahead of the marker), so it calls ``on_progress`` then,
between two events (``store.base``). A marker right behind another replaces it; a watch without
``on_progress`` never gets one.

What it does not guarantee: unbounded buffering. Each watch buffers at most ``capacity`` live
events (only those under its prefix; a pending progress marker takes a place too); a consumer
that lets it fill — or a back-fill so long that that many live events arrive meanwhile — is ended with ``WatchOverflow`` so that writers
never wait for a slow reader. The caller watches again from ``WatchOverflow.last_revision``.

Single event loop: ``publish`` and the watches must run on the loop that owns the hub.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
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
    """One watch's live buffer: events under its prefix and, if it asked for them, progress
    markers (a bare revision: every event up to it is ahead of the marker)."""

    __slots__ = ("buffer", "error", "prefix", "progress", "waiter")

    def __init__(self, prefix: str, *, progress: bool) -> None:
        self.prefix = prefix
        self.progress = progress
        self.buffer: collections.deque[Event | int] = collections.deque()
        self.error: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.buffer.clear()
        self.wake()

    def wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def mark(self, revision: int, *, capacity: int) -> None:
        """Queue a progress marker for ``revision`` behind the buffered events (replacing a
        marker right ahead of it; none when the buffer is full: the watch is about to overflow
        or be drained, and a later request says as much)."""
        buffer = self.buffer
        if buffer and isinstance(buffer[-1], int):
            buffer[-1] = revision
            return
        if len(buffer) < capacity:
            buffer.append(revision)
            self.wake()

    async def next(self) -> Event | int:
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

    def __init__(self, *, capacity: int = DEFAULT_WATCH_BUFFER, revision: int = 0) -> None:
        """``revision``: the store's revision when the hub starts (a reopened SQLite file's)."""
        if capacity < 1:
            raise ValueError(f"watch buffer capacity must be >= 1, got {capacity}")
        self._capacity = capacity
        self._subscriptions: set[_Subscription] = set()
        self._closed = False
        self._close_error: StoreClosed | None = None
        self._revision = revision
        """The revision of the latest write published (what a progress marker vouches for)."""

    @property
    def watch_count(self) -> int:
        """Open watches (subscribed to live events)."""
        return len(self._subscriptions)

    def publish(self, events: Iterable[Event], *, revision: int) -> None:
        """Hand committed events (in revision order) to every matching watch; never blocks.

        ``revision``: that of the last of them. Called for every commit, watched or not, so
        that the hub knows the latest revision; ``events`` is only iterated when some watch is
        open (a generator spares building them for nobody).
        """
        self._revision = revision
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

    def request_progress(self) -> None:
        """Queue a progress marker for the latest published revision on every watch opened
        with ``on_progress`` (see the module docstring); each reports it in stream order."""
        for sub in self._subscriptions:
            if sub.progress:
                sub.mark(self._revision, capacity=self._capacity)

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
        self,
        prefix: str,
        *,
        after_revision: int,
        history: HistoryReader,
        on_progress: Callable[[int], None] | None = None,
    ) -> AsyncIterator[Event]:
        """Back-filled then live events under ``prefix`` after ``after_revision``, each once;
        ``on_progress`` is called with the revision of each progress marker reached that is
        not behind the last event yielded."""
        if self._closed:
            raise self._close_error or StoreClosed("store closed")
        sub = _Subscription(prefix, progress=on_progress is not None)
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
                item = await sub.next()
                if isinstance(item, int):  # a progress marker: everything before it is out
                    if on_progress is not None and item >= last:
                        on_progress(item)
                    continue
                if item.revision <= last:
                    continue
                last = item.revision
                yield item
        except _Overflowed:
            raise WatchOverflow(last, self._capacity) from None
        finally:
            self._subscriptions.discard(sub)
