"""Compactors sharing one store (several apiservers on one etcd) take turns by a claim key:
in each round only the one whose compare-and-swap on the key sticks compacts; one that finds
the key written by another since it last looked skips the round (Kubernetes'
``compact_rev_key``). Two store handles stand for two apiservers."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from store.base import Store
from store.compactor import CLAIM_KEY, CompactionClaim

StoreOpener = Callable[..., Store]


@pytest.fixture
def shared(backend: str, open_backend: StoreOpener) -> StoreOpener:
    """Opens handles on one etcd prefix: the one backend several apiservers share (each
    ``memory://`` is a store of its own; a SQLite file is refused to a second process)."""
    if backend != "etcd":
        pytest.skip(f"several apiservers cannot share a {backend} store")
    return open_backend


async def test_only_one_of_two_compactors_wins_each_round(shared: StoreOpener) -> None:
    a_store, b_store = shared(), shared()
    a, b = CompactionClaim(a_store), CompactionClaim(b_store)

    assert await a.claim()  # the first claim creates the key
    assert not await b.claim()  # b finds a's claim: it adopts it and skips this round

    # the next round: whoever ticks first wins, the other one sees a fresh claim and skips
    assert await b.claim()
    assert not await a.claim()
    # a compactor that keeps ticking first keeps winning, the other keeps skipping
    assert await a.claim()
    assert not await b.claim()
    assert await a.claim()
    assert not await b.claim()


async def test_racing_claims_on_one_key_elect_exactly_one(shared: StoreOpener) -> None:
    """Both read the same key revision; the compare-and-swap lets one of them through."""
    stores = [shared() for _ in range(3)]
    claims = [CompactionClaim(s) for s in stores]
    await claims[0].claim()
    for claim in claims[1:]:
        await claim.claim()  # everyone has now seen the current key
    seen = claims[0].seen
    for claim in claims:
        claim.seen = seen  # all three tick in the same round, having seen the same revision
    won = [await claim.claim() for claim in claims]
    assert won.count(True) == 1
    kv = await stores[0].get(CLAIM_KEY)
    assert kv is not None and kv.mod_revision == next(
        c.seen for c, w in zip(claims, won, strict=True) if w
    )
