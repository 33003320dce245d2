"""Slow start: creations go in batches of 1, 2, 4, ... and stop at the first failed batch, so a
pod template the apiserver rejects costs a handful of requests, not ``replicas`` of them."""

from __future__ import annotations

from services.controller_manager.replication import slow_start_batch


async def test_slow_start_batches_double_and_stop_at_the_first_failure() -> None:
    calls: list[int] = []

    async def ok() -> None:
        calls.append(1)

    assert await slow_start_batch(10, initial=1, fn=ok) == (10, None)
    assert len(calls) == 10

    attempts = {"n": 0}

    async def failing_after_3() -> None:
        attempts["n"] += 1
        if attempts["n"] > 3:
            raise RuntimeError("rejected")

    successes, error = await slow_start_batch(20, initial=1, fn=failing_after_3)
    # batches 1, 2 succeed (3 calls), the batch of 4 fails: 7 calls, never 20
    assert (successes, attempts["n"]) == (3, 7)
    assert isinstance(error, RuntimeError)
