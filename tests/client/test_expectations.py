"""Expectations keep a replica controller from acting on a cache that has not caught up."""

from __future__ import annotations

from client.expectations import Expectations


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_unknown_keys_are_satisfied() -> None:
    assert Expectations(clock=Clock()).satisfied("ns/rc")


def test_creations_must_all_be_observed() -> None:
    exp = Expectations(clock=Clock())
    exp.expect_creations("ns/rc", 3)
    assert not exp.satisfied("ns/rc")
    exp.creation_observed("ns/rc")
    exp.creation_observed("ns/rc")
    assert exp.pending("ns/rc") == (1, 0) and not exp.satisfied("ns/rc")
    exp.creation_failed("ns/rc")  # the third create errored: it will never be observed
    assert exp.satisfied("ns/rc")
    exp.creation_observed("ns/rc")  # extra observations do not go negative
    assert exp.pending("ns/rc") == (0, 0)


def test_deletions_are_tracked_by_object_so_repeats_do_not_count_twice() -> None:
    exp = Expectations(clock=Clock())
    exp.expect_deletions("ns/rc", ["ns/p1", "ns/p2"])
    exp.deletion_observed("ns/rc", "ns/p1")
    exp.deletion_observed("ns/rc", "ns/p1")
    assert not exp.satisfied("ns/rc")
    exp.deletion_observed("ns/rc", "ns/p2")
    assert exp.satisfied("ns/rc")


def test_stale_expectations_expire_after_the_ttl() -> None:
    clock = Clock()
    exp = Expectations(ttl=300.0, clock=clock)
    exp.expect_creations("ns/rc", 1)
    clock.now = 299.0
    assert not exp.satisfied("ns/rc")
    clock.now = 301.0
    assert exp.satisfied("ns/rc")


def test_forget_drops_the_record() -> None:
    exp = Expectations(clock=Clock())
    exp.expect_creations("ns/rc", 2)
    exp.forget("ns/rc")
    assert exp.satisfied("ns/rc") and exp.pending("ns/rc") == (0, 0)
