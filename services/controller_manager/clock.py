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

``SystemClock`` is the real one (the event loop's ``call_later``). ``ManualClock`` is the real
time plus whatever ``advance(seconds)`` added, and its timers fire only in ``advance`` — in the
spirit of client-go's ``clock/testing.FakeClock``, but following the real clock underneath, so
times other processes write (a kubelet's ``finishedAt``) stay comparable with it. Its
``timers_pending`` event tells a test that a controller has decided to wait (instead of
guessing with a sleep); ``advance_to_next()`` jumps to the earliest timer.

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
    """The real clock plus an offset that only ``advance`` moves; timers fire in ``advance``."""

    def __init__(self) -> None:
        self._offset = timedelta()
        self._timers: list[tuple[datetime, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.timers_pending = asyncio.Event()
        """Set while at least one timer waits for the clock to reach it."""

    def now(self) -> datetime:
        return datetime.now(UTC) + self._offset

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        due = self.now() + timedelta(seconds=max(0.0, delay))
        heapq.heappush(self._timers, (due, next(self._seq), callback))
        self.timers_pending.set()

    def next_delay(self) -> float | None:
        """Seconds from now until the earliest pending timer (None: no timer)."""
        if not self._timers:
            return None
        return (self._timers[0][0] - self.now()) / timedelta(seconds=1)

    def advance(self, seconds: float) -> None:
        """Move the clock on and run, in order, every timer that came due."""
        self._offset += timedelta(seconds=seconds)
        now = self.now()
        while self._timers and self._timers[0][0] <= now:
            _, _, callback = heapq.heappop(self._timers)
            callback()
        if not self._timers:
            self.timers_pending.clear()

    def advance_to_next(self) -> float:
        """Jump to the earliest pending timer (and fire it); the seconds jumped."""
        delay = max(0.0, self.next_delay() or 0.0)
        self.advance(delay)
        return delay
