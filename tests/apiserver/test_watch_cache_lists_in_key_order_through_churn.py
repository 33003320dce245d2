"""The watch cache serves its state in key order — what a list returns — however objects come,
change, go and come back between two lists: it mends its key order from the last list's rather
than sorting every key per list, and walks only a namespace's keys for a namespaced list.
Checked against a plain model (a dict, sorted on each read) over a seeded random history."""

from __future__ import annotations

import random

import pytest

from api.registry import REGISTRY
from services.apiserver.predicate import Predicate
from services.apiserver.watchcache import CacheEvent, CompactObject, WatchCache
from store.memory import MemoryStore
from tests import factories
from tests.factories import Obj

PODS = REGISTRY.get("", "v1", "pods")
assert PODS is not None
NAMESPACES = ["a", "a-b", "b", "ab"]
"""Namespaces whose keys interleave: ``a-b`` sorts between ``a``'s keys and ``ab``'s."""


def pod(namespace: str, name: str, revision: int, *, tier: str) -> Obj:
    obj = factories.pod(name, namespace=namespace, labels={"tier": tier})
    obj["metadata"]["resourceVersion"] = str(revision)
    return obj


def listed(cache: WatchCache, predicate: Predicate) -> list[str]:
    events, _ = cache.snapshot(predicate)
    return [event.key for event in events]


@pytest.mark.parametrize("seed", range(5))
async def test_lists_stay_in_key_order_through_creates_updates_deletes_and_returns(
    seed: int,
) -> None:
    rng = random.Random(seed)
    cache = WatchCache(MemoryStore(), PODS)
    model: dict[str, Obj] = {}
    predicates = [Predicate.parse(PODS, namespace=None)]
    predicates += [Predicate.parse(PODS, namespace=ns) for ns in NAMESPACES]
    predicates += [
        Predicate.parse(PODS, namespace=None, label_selector="tier=web"),
        Predicate.parse(PODS, namespace="a", label_selector="tier=web"),
        Predicate(rt=PODS, namespace=""),  # matches no namespaced object, as before
    ]

    for revision in range(1, 1500):
        namespace, name = rng.choice(NAMESPACES), f"p{rng.randrange(60)}"
        key = PODS.key(namespace, name)
        obj = pod(namespace, name, revision, tier=rng.choice(["web", "db"]))
        known = model.get(key)
        if known is not None and rng.random() < 0.3:
            del model[key]
            event = CacheEvent(
                type="DELETED",
                key=key,
                current=CompactObject(PODS, known),
                previous=CompactObject(PODS, known),
                revision=revision,
            )
        else:
            model[key] = obj
            event = CacheEvent(
                type="MODIFIED" if known is not None else "ADDED",
                key=key,
                current=CompactObject(PODS, obj),
                previous=CompactObject(PODS, known) if known is not None else None,
                revision=revision,
            )
        cache.apply(event)
        if rng.random() < 0.05:  # a list now and then: the order is mended between lists
            for predicate in predicates:
                expected = [
                    k
                    for k, o in sorted(model.items())
                    if predicate.matches_parts(
                        o["metadata"]["namespace"], o["metadata"]["labels"], {}
                    )
                ]
                assert listed(cache, predicate) == expected
