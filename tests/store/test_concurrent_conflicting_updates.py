"""Many writers racing on one key: the store lets exactly one win per revision."""

from __future__ import annotations

import asyncio

from store.base import KeyValue, RevisionMismatch, Store


async def test_fifty_updates_from_one_revision_exactly_one_wins(store: Store) -> None:
    base = await store.create("/registry/core/pods/ns/hot", b"0")

    async def update(i: int) -> KeyValue | RevisionMismatch:
        try:
            return await store.update(
                "/registry/core/pods/ns/hot", f"{i}".encode(), expected_revision=base.mod_revision
            )
        except RevisionMismatch as err:
            return err

    outcomes = await asyncio.gather(*(update(i) for i in range(50)))
    winners = [o for o in outcomes if isinstance(o, KeyValue)]
    losers = [o for o in outcomes if isinstance(o, RevisionMismatch)]
    assert len(winners) == 1 and len(losers) == 49
    assert winners[0].mod_revision == base.mod_revision + 1
    assert all(loser.current == winners[0] for loser in losers)
    assert await store.get("/registry/core/pods/ns/hot") == winners[0]
    assert await store.current_revision() == base.mod_revision + 1


async def test_fifty_read_modify_write_loops_lose_no_increment(store: Store) -> None:
    """Each of 50 workers adds 1 by re-reading and retrying on conflict: the total is exact,
    and every revision the key went through was written by exactly one worker."""
    created = await store.create("/registry/counters/ns/c", b"0")
    wins: list[int] = []
    conflicts = 0
    all_read = asyncio.Barrier(50)  # the first attempts all read the same revision

    async def increment() -> None:
        nonlocal conflicts
        first = True
        while True:
            current = await store.get("/registry/counters/ns/c")
            assert current is not None
            if first:
                await all_read.wait()
                first = False
            try:
                written = await store.update(
                    "/registry/counters/ns/c",
                    str(int(current.value) + 1).encode(),
                    expected_revision=current.mod_revision,
                )
            except RevisionMismatch:
                conflicts += 1
                continue
            wins.append(written.mod_revision)
            return

    await asyncio.gather(*(increment() for _ in range(50)))
    final = await store.get("/registry/counters/ns/c")
    assert final is not None and final.value == b"50"
    assert sorted(wins) == list(range(created.mod_revision + 1, created.mod_revision + 51))
    assert conflicts >= 49
