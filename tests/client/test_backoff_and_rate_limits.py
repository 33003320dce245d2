"""Backoff grows, jitters, caps and resets after health; token buckets pace in virtual time."""

from __future__ import annotations

import asyncio

import pytest

from client.backoff import Backoff, BackoffPolicy
from client.ratelimit import (
    BucketRateLimiter,
    ItemExponentialRateLimiter,
    MaxOfRateLimiter,
    TokenBucket,
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_backoff_doubles_from_0_8_to_the_30s_cap_without_jitter() -> None:
    b = Backoff(BackoffPolicy(jitter=0.0), clock=Clock())
    delays = [b.next_delay() for _ in range(8)]
    assert delays == pytest.approx([0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0])


async def test_backoff_jitter_stays_between_base_and_cap() -> None:
    for r in (0.0, 0.5, 0.999):
        b = Backoff(clock=Clock(), rand=lambda r=r: r)
        delays = [b.next_delay() for _ in range(10)]
        bases = [min(30.0, 0.8 * 2**i) for i in range(10)]
        for d, base in zip(delays, bases, strict=True):
            assert base <= d <= min(30.0, 2 * base)


async def test_backoff_resets_after_a_healthy_spell() -> None:
    clock = Clock()
    b = Backoff(BackoffPolicy(jitter=0.0, reset_after=120.0), clock=clock)
    assert [b.next_delay() for _ in range(3)] == pytest.approx([0.8, 1.6, 3.2])
    clock.now += 119.0
    assert b.next_delay() == pytest.approx(6.4), "not healthy long enough yet"
    clock.now += 121.0
    assert b.next_delay() == pytest.approx(0.8)
    b.reset()
    assert b.failures == 0 and b.next_delay() == pytest.approx(0.8)


@pytest.mark.looptime
async def test_backoff_sleeps_on_the_loop_clock() -> None:
    loop = asyncio.get_running_loop()
    b = Backoff(BackoffPolicy(jitter=0.0))
    t0 = loop.time()
    assert await b.sleep() == pytest.approx(0.8)
    assert await b.sleep() == pytest.approx(1.6)
    assert loop.time() - t0 == pytest.approx(2.4)


async def test_backoff_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        BackoffPolicy(initial=5, cap=1)
    with pytest.raises(ValueError):
        BackoffPolicy(factor=0.5)


@pytest.mark.looptime
async def test_token_bucket_allows_a_burst_then_paces_at_qps() -> None:
    loop = asyncio.get_running_loop()
    bucket = TokenBucket(qps=5, burst=10)
    t0 = loop.time()
    for _ in range(10):
        await bucket.acquire()
    assert loop.time() - t0 == pytest.approx(0)
    for _ in range(10):
        await bucket.acquire()
    assert loop.time() - t0 == pytest.approx(2.0)  # 10 more tokens at 5 per second
    assert not bucket.try_acquire()


async def test_controller_rate_limiter_takes_the_longer_of_per_item_and_overall() -> None:
    clock = Clock()
    limiter = MaxOfRateLimiter(
        ItemExponentialRateLimiter(base=0.005, cap=1000.0),
        BucketRateLimiter(TokenBucket(qps=10, burst=2, clock=clock)),
    )
    assert limiter.when("a") == pytest.approx(0.005)
    assert limiter.when("b") == pytest.approx(0.005)
    assert limiter.when("c") == pytest.approx(0.1), "bucket exhausted: overall rate wins"
    assert limiter.num_requeues("a") == 1
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0


async def test_item_exponential_caps() -> None:
    limiter = ItemExponentialRateLimiter(base=0.005, cap=1000.0)
    delays = [limiter.when("x") for _ in range(100)]
    assert delays[0] == pytest.approx(0.005)
    assert max(delays) == 1000.0 and delays[-1] == 1000.0
