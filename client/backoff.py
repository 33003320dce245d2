"""The one backoff helper every retry loop in kubelite uses.

Why: a control plane is a crowd of clients. When the apiserver goes away they must not hammer it
when it comes back, and one that recovers must not keep waiting as if it were still broken. So
every loop that can fail asks a ``Backoff`` how long to wait, logs that figure ("will retry in
1.6s"), and waits it out on the event loop's clock.

What it does, mirroring client-go's ``wait.NewExponentialBackoffManager`` as the reflector uses
it (0.8 s initial, factor 2, cap 30 s, reset after 2 min, jitter 1.0):

* the *base* delay starts at ``initial`` and doubles (``factor``) per failure up to ``cap``;
* each delay is jittered upwards, ``base * (1 + jitter * random())``, then clipped to ``cap``,
  so a crowd of clients spreads out and no single delay ever exceeds ``cap``;
* if ``reset_after`` seconds passed since the previous delay was handed out, the loop has been
  healthy that long and the next delay starts from ``initial`` again; ``reset()`` does it at once.

The clock is monotonic: by default the running event loop's ``time()``, so virtual time
(looptime) drives tests; pass ``clock=`` to use anything else. Limits: it is not thread-safe and
not shared between loops — give each retry loop its own instance.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Backoff", "BackoffPolicy"]


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    """The numbers of a backoff; the defaults are client-go's reflector values."""

    initial: float = 0.8
    factor: float = 2.0
    cap: float = 30.0
    jitter: float = 1.0
    reset_after: float = 120.0

    def __post_init__(self) -> None:
        if self.initial <= 0 or self.cap < self.initial:
            raise ValueError(f"backoff needs 0 < initial <= cap, got {self.initial}, {self.cap}")
        if self.factor < 1 or self.jitter < 0 or self.reset_after < 0:
            raise ValueError("backoff needs factor >= 1, jitter >= 0, reset_after >= 0")


class Backoff:
    """Hands out jittered, growing, bounded delays; forgets the failures after a healthy spell."""

    def __init__(
        self,
        policy: BackoffPolicy | None = None,
        *,
        clock: Callable[[], float] | None = None,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.policy = policy or BackoffPolicy()
        self._clock = clock
        self._rand = rand
        self._base = self.policy.initial
        self._last: float | None = None
        self.failures = 0
        """Delays handed out since the last reset."""

    def _now(self) -> float:
        return self._clock() if self._clock is not None else asyncio.get_running_loop().time()

    def next_delay(self) -> float:
        """The delay to wait now; advances the sequence."""
        p = self.policy
        now = self._now()
        if self._last is not None and now - self._last > p.reset_after:
            self.reset()
        self._last = now
        base = self._base
        self._base = min(p.cap, self._base * p.factor)
        self.failures += 1
        return min(p.cap, base * (1.0 + p.jitter * self._rand()))

    def reset(self) -> None:
        """Start again from ``initial`` (the caller knows it is healthy)."""
        self._base = self.policy.initial
        self._last = None
        self.failures = 0

    async def sleep(self, delay: float | None = None) -> float:
        """Wait ``delay`` (or the next delay) on the event loop's clock; returns the time waited."""
        delay = self.next_delay() if delay is None else delay
        await asyncio.sleep(delay)
        return delay
