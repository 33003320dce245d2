"""The balancer alone: round-robin and random spread, ClientIP affinity with its timeout on a
clock the test moves, and endpoint changes taking effect on the next pick."""

from __future__ import annotations

import random
from collections import Counter

from services.proxy.balancer import Balancer
from services.proxy.service_table import Route

A, B, C = ("127.1.0.2", 80), ("127.1.0.3", 80), ("127.1.0.4", 80)


def route(*endpoints: tuple[str, int], affinity: float | None = None) -> Route:
    return Route("default/web", "", "ClusterIP", tuple(endpoints), affinity)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_round_robin_takes_each_endpoint_in_turn() -> None:
    balancer = Balancer(route(A, B, C), mode="round-robin")
    picks = [balancer.pick("127.0.0.1") for _ in range(6)]
    assert Counter(picks) == {A: 2, B: 2, C: 2}


def test_random_reaches_every_endpoint() -> None:
    balancer = Balancer(route(A, B, C), mode="random", rng=random.Random(7))
    assert {balancer.pick("127.0.0.1") for _ in range(100)} == {A, B, C}


def test_no_endpoint_means_none() -> None:
    assert Balancer(route()).pick("127.0.0.1") is None


def test_update_takes_effect_on_the_next_pick_and_never_returns_a_removed_endpoint() -> None:
    balancer = Balancer(route(A, B), mode="round-robin")
    balancer.update(route(C))
    assert {balancer.pick("127.0.0.1") for _ in range(5)} == {C}


def test_avoid_skips_endpoints_that_failed() -> None:
    balancer = Balancer(route(A, B), mode="random", rng=random.Random(1))
    assert {balancer.pick("127.0.0.1", avoid=[A]) for _ in range(20)} == {B}
    assert balancer.pick("127.0.0.1", avoid=[A, B]) is None


def test_client_ip_affinity_sticks_until_the_timeout() -> None:
    clock = Clock()
    balancer = Balancer(route(A, B, C, affinity=60), mode="round-robin", clock=clock)
    first = balancer.pick("127.0.0.9")
    for _ in range(10):
        clock.now += 50  # each pick refreshes the timer
        assert balancer.pick("127.0.0.9") == first
    other = balancer.pick("127.0.0.8")
    assert other != first  # another client is balanced as usual
    clock.now += 61
    assert balancer.pick("127.0.0.9") != first  # expired: round-robin moved on meanwhile


def test_affinity_moves_when_the_endpoint_leaves_or_fails() -> None:
    clock = Clock()
    balancer = Balancer(route(A, B, affinity=600), mode="round-robin", clock=clock)
    first = balancer.pick("127.0.0.9")
    assert first is not None
    remaining = B if first == A else A
    assert balancer.pick("127.0.0.9", avoid=[first]) == remaining
    assert balancer.pick("127.0.0.9") == remaining  # the retry's endpoint is the new sticky one
    balancer.update(route(first, affinity=600))
    assert balancer.pick("127.0.0.9") == first
