"""The controller work queue: de-duplicating, delaying, rate-limited, one worker per key.

Why: informer handlers fire far more often than a controller needs to act, and reconciling is
level-triggered (read the cache, converge), so what a controller queues is *keys*, not events.
This mirrors client-go's ``util/workqueue`` (``Typed`` + ``DelayingQueue`` +
``RateLimitingQueue``) and keeps its contract:

* **De-duplication.** A key queued twice before a worker takes it is processed once.
* **One worker per key.** A key handed out by ``get()`` is *processing* until ``done(key)``; it
  is never handed to another worker meanwhile.
* **Dirty while processing.** A key ``add``-ed while it is processing is remembered and queued
  again when ``done`` is called, so the change that arrived meanwhile is not lost.
* **Delays.** ``add_after(key, seconds)`` queues it later (a key waiting twice keeps the earlier
  time); ``add_rate_limited(key)`` asks the rate limiter how long (per-key exponential plus an
  overall bucket by default); ``forget(key)`` clears its failure history after a success.
* **Shutdown.** ``shutdown()`` stops accepting keys and drops pending delays; ``get()`` keeps
  handing out what is already queued, then raises ``ShutDown``. ``await shutdown(drain=True)``
  additionally waits until every processing key is ``done``.

Delays use ``loop.call_later`` (one timer per waiting key, no background task), so virtual time
drives them in tests. Each queue reports client-go's ``workqueue_*`` metrics under its name
to the provider it was built under (``client.workqueue_metrics``), if any. Not thread-safe: one event loop. Keys must be hashable (strings such as
``namespace/name`` by convention). FIFO order among ready keys.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from client.ratelimit import RateLimiter, default_controller_rate_limiter
from client.workqueue_metrics import QueueMetrics, queue_metrics

__all__ = ["ShutDown", "WorkQueue"]

K = TypeVar("K", bound=Hashable)


class ShutDown(Exception):
    """``get()`` on a queue that is shut down and empty: the worker should exit."""


class WorkQueue(Generic[K]):
    def __init__(
        self,
        *,
        name: str = "queue",
        rate_limiter: RateLimiter | None = None,
        metrics: QueueMetrics | None = None,
    ) -> None:
        self.name = name
        self.rate_limiter = rate_limiter or default_controller_rate_limiter()
        self.metrics = metrics if metrics is not None else queue_metrics(name)
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._waiting: dict[K, tuple[float, asyncio.TimerHandle]] = {}
        self._getters: deque[asyncio.Future[None]] = deque()
        self._idle: asyncio.Event | None = None
        self._shutting_down = False

    # -- adding ---------------------------------------------------------------------------

    def add(self, item: K) -> None:
        """Queue ``item`` unless it is already queued; if it is processing, requeue after done."""
        if self._shutting_down or item in self._dirty:
            return
        self.metrics.add(item)
        self._dirty.add(item)
        if item in self._processing:
            return
        self._queue.append(item)
        self._wake_one()

    def add_after(self, item: K, delay: float) -> None:
        """Queue ``item`` after ``delay`` seconds; an earlier pending time wins."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(item)
            return
        loop = asyncio.get_running_loop()
        ready_at = loop.time() + delay
        pending = self._waiting.get(item)
        if pending is not None:
            if pending[0] <= ready_at:
                return
            pending[1].cancel()
        handle = loop.call_later(delay, self._ready, item)
        self._waiting[item] = (ready_at, handle)

    def _ready(self, item: K) -> None:
        self._waiting.pop(item, None)
        self.add(item)

    def add_rate_limited(self, item: K) -> None:
        """Queue ``item`` after the rate limiter's delay (a retry after a failure)."""
        self.metrics.retry()
        self.add_after(item, self.rate_limiter.when(item))

    def forget(self, item: K) -> None:
        """The item succeeded: clear its retry history (it does not leave the queue)."""
        self.rate_limiter.forget(item)

    def num_requeues(self, item: K) -> int:
        return self.rate_limiter.num_requeues(item)

    # -- taking ---------------------------------------------------------------------------

    async def get(self) -> K:
        """The next ready key, now marked processing; raises ``ShutDown`` once drained."""
        while not self._queue:
            if self._shutting_down:
                raise ShutDown(self.name)
            fut = asyncio.get_running_loop().create_future()
            self._getters.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    self._wake_one()  # pass the wake-up we were given on to another getter
                else:
                    fut.cancel()
                raise
        item = self._queue.popleft()
        self._processing.add(item)
        self._dirty.discard(item)
        self.metrics.get(item)
        return item

    def done(self, item: K) -> None:
        """The worker finished ``item``; if it was dirtied meanwhile, queue it again."""
        self.metrics.done(item)
        self._processing.discard(item)
        if item in self._dirty:
            self._queue.append(item)
            self._wake_one()
        elif not self._processing and self._idle is not None:
            self._idle.set()

    def _wake_one(self) -> None:
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)
                return

    # -- shutting down --------------------------------------------------------------------

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def shut_down(self) -> None:
        """Stop accepting keys, drop pending delays, wake every idle getter."""
        self._shutting_down = True
        for _, handle in self._waiting.values():
            handle.cancel()
        self._waiting.clear()
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)

    async def shutdown(self, *, drain: bool = True) -> None:
        """``shut_down()``; with ``drain``, also wait until no key is processing."""
        self.shut_down()
        if drain:
            while self._processing:
                self._idle = asyncio.Event()
                await self._idle.wait()

    # -- introspection --------------------------------------------------------------------

    def __len__(self) -> int:
        """Keys ready to be handed out (not processing, not waiting on a delay)."""
        return len(self._queue)

    @property
    def processing(self) -> frozenset[K]:
        return frozenset(self._processing)

    @property
    def waiting(self) -> int:
        """Keys scheduled with a delay and not yet ready."""
        return len(self._waiting)
