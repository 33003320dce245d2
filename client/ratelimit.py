"""Rate limiters: the client's QPS/burst bucket and the work queue's retry limiters.

Why: two different things are rate limited in a controller, as in client-go.

* **Requests to the apiserver** (``TokenBucket``): a component may not send more than ``qps``
  requests per second on average, with bursts of ``burst``. client-go defaults to 5 QPS / 10
  burst; kubelite turns the limit *off* unless asked (benchmarks must see the server's speed),
  and components opt in with ``--kube-api-qps``.
* **Retries of a failing work-queue key** (``RateLimiter``): each key backs off exponentially on
  its own (``ItemExponentialRateLimiter``, 5 ms doubling to 1000 s, client-go's numbers), and
  all keys together share a token bucket (``BucketRateLimiter``, 10 QPS burst 100) so a
  thundering herd of failures cannot flood the apiserver. ``MaxOfRateLimiter`` combines them:
  a retry waits for the longer of the two. ``default_controller_rate_limiter()`` builds it.

Buckets *reserve* tokens (a token may be taken ahead of time, the caller then waits its turn),
which is what makes ``when()`` a pure number the work queue can schedule with ``call_later``.
Time comes from the event loop's monotonic clock unless ``clock=`` is given. Not thread-safe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from typing import Protocol

__all__ = [
    "BucketRateLimiter",
    "ItemExponentialRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "TokenBucket",
    "default_controller_rate_limiter",
]


def _loop_time() -> float:
    return asyncio.get_running_loop().time()


class TokenBucket:
    """``qps`` tokens per second, at most ``burst`` saved up; starts full."""

    def __init__(self, *, qps: float, burst: int, clock: Callable[[], float] | None = None) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"token bucket needs qps > 0 and burst >= 1, got {qps}, {burst}")
        self.qps = qps
        self.burst = burst
        self._clock = clock or _loop_time
        self._tokens = float(burst)
        self._stamp: float | None = None

    def _refill(self) -> float:
        now = self._clock()
        if self._stamp is not None:
            self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.qps)
        self._stamp = now
        return now

    def reserve(self) -> float:
        """Take one token now, possibly on credit; returns how long the caller must wait."""
        self._refill()
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def try_acquire(self) -> bool:
        """Take a token only if one is available right now."""
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    async def acquire(self) -> None:
        """Wait for a token (FIFO by reservation order)."""
        delay = self.reserve()
        if delay > 0:
            await asyncio.sleep(delay)


class RateLimiter(Protocol):
    """How long a work-queue key waits before its next retry (client-go ``RateLimiter``)."""

    def when(self, item: Hashable) -> float: ...

    def forget(self, item: Hashable) -> None: ...

    def num_requeues(self, item: Hashable) -> int: ...


class ItemExponentialRateLimiter:
    """``base * 2**failures`` per item, capped at ``cap``; ``forget`` clears the item's record."""

    def __init__(self, *, base: float = 0.005, cap: float = 1000.0) -> None:
        self.base = base
        self.cap = cap
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        n = self._failures.get(item, 0)
        self._failures[item] = n + 1
        if n > 64:  # 2**64 * base overflows any sensible cap; avoid float overflow games
            return self.cap
        return min(self.cap, self.base * 2.0**n)

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter:
    """One token bucket shared by every item: an overall retry rate."""

    def __init__(self, bucket: TokenBucket) -> None:
        self.bucket = bucket

    def when(self, item: Hashable) -> float:
        return self.bucket.reserve()

    def forget(self, item: Hashable) -> None:
        return None

    def num_requeues(self, item: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    """Asks every limiter (each records the attempt) and waits for the longest answer."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self.limiters = limiters

    def when(self, item: Hashable) -> float:
        return max(limiter.when(item) for limiter in self.limiters)

    def forget(self, item: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)


def default_controller_rate_limiter(*, clock: Callable[[], float] | None = None) -> RateLimiter:
    """client-go's ``DefaultControllerRateLimiter``: 5 ms..1000 s per item, 10 QPS/100 overall."""
    return MaxOfRateLimiter(
        ItemExponentialRateLimiter(base=0.005, cap=1000.0),
        BucketRateLimiter(TokenBucket(qps=10.0, burst=100, clock=clock)),
    )
