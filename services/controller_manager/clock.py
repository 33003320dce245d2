"""The wall clock a time-driven controller reads, and the timers it sets: injectable.

Why: the job controller waits out pod-failure back-offs (10 s doubling to 10 min) and
``activeDeadlineSeconds``, and the TTL-after-finished controller waits ``ttlSecondsAfterFinished``;
all of them compare *wall* times written on objects (a pod's ``finishedAt``, a Job's
``startTime`` and ``completionTime``), as Kubernetes' controllers do with their ``clock.Clock``.
A test must be able to move that time on without waiting for it, so the controllers take a
``Clock`` instead of calling ``datetime.now`` and ``loop.call_later`` themselves:

* ``now()``: the current wall time (UTC);
* ``call_later(delay, callback)``: run ``callback`` once ``delay`` seconds of *this clock* have
  passed (controllers use it to requeue a key when a back-off or deadline runs out).

``SystemClock`` is the real one (the event loop's ``call_later``). ``ManualClock`` starts at
the real time and moves only when ``advance(seconds)`` is called, firing every timer that has
come due — client-go's ``clock/testing.FakeClock``. Its ``timers_pending`` event tells a test
that a controller has decided to wait (instead of guessing with a sleep).

Limits: ``ManualClock`` does not move the event loop's own clock, so work queues' rate-limit
back-offs and the informers' resyncs still run in real time.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    def now(self) -> datetime: ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> None: ...


class SystemClock:
    """The real wall clock; timers on the running event loop."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        asyncio.get_running_loop().call_later(max(0.0, delay), callback)


class ManualClock:
    """A clock that moves only when told to (tests)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime.now(UTC)
        self._timers: list[tuple[datetime, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.timers_pending = asyncio.Event()
        """Set while at least one timer waits for the clock to reach it."""

    def now(self) -> datetime:
        return self._now

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        due = self._now + timedelta(seconds=max(0.0, delay))
        heapq.heappush(self._timers, (due, next(self._seq), callback))
        self.timers_pending.set()

    def next_due(self) -> datetime | None:
        """When the earliest pending timer fires."""
        return self._timers[0][0] if self._timers else None

    def advance(self, seconds: float) -> None:
        """Move the clock on and run, in order, every timer that came due."""
        self._now += timedelta(seconds=seconds)
        while self._timers and self._timers[0][0] <= self._now:
            _, _, callback = heapq.heappop(self._timers)
            callback()
        if not self._timers:
            self.timers_pending.clear()
