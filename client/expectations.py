"""Expectations: what a replica-style controller has asked for but not yet seen in its cache.

Why: a controller creates 3 pods, then reconciles again before its informer has seen them; it
counts 0 pods in the cache and creates 3 more. client-go's ``ControllerExpectations`` (and the
ReplicaSet controller's UID-tracking variant for deletions) close that gap, and this is the same
idea: before issuing writes the controller records what it expects; the informer handlers
lower the expectation as the creations and deletions are observed; the controller only
computes a new diff when the key's expectations are *satisfied*.

* ``expect_creations(key, n)`` before ``n`` creates; ``creation_observed(key)`` from on_add.
* ``expect_deletions(key, pod_keys)`` before deleting those pods; ``deletion_observed(key,
  pod_key)`` from on_delete. Deletions are tracked by pod key, so an update, a resync, or the
  same deletion seen twice never lowers the count twice.
* A write that *failed* was never going to be observed: ``creation_failed(key)`` /
  ``deletion_failed(key, pod_key)`` lower the expectation by hand.
* ``satisfied(key)`` is true when nothing is pending, when the key has no record (first sync or
  after ``forget``), or when the record is older than ``ttl`` (5 min, client-go's value): if an
  event was lost somehow, the controller eventually resyncs instead of waiting forever.

Limits: expectations live in one process's memory; a restarted controller starts with none
(it then trusts its freshly synced cache, which is exactly right). Time is the event loop's
monotonic clock unless ``clock=`` is given.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

__all__ = ["Expectations"]

EXPECTATIONS_TTL = 300.0
"""client-go's ExpectationsTimeout: after 5 min an unmet expectation no longer blocks a sync."""


@dataclass(slots=True)
class _Record:
    adds: int
    deletes: set[str] = field(default_factory=set)
    stamp: float = 0.0


class Expectations:
    def __init__(
        self, *, ttl: float = EXPECTATIONS_TTL, clock: Callable[[], float] | None = None
    ) -> None:
        self.ttl = ttl
        self._clock = clock or (lambda: asyncio.get_running_loop().time())
        self._records: dict[str, _Record] = {}

    def expect_creations(self, key: str, count: int) -> None:
        """Replace ``key``'s expectations with ``count`` pending creations (and no deletions)."""
        self._records[key] = _Record(adds=max(0, count), stamp=self._clock())

    def expect_deletions(self, key: str, pod_keys: Iterable[str]) -> None:
        """Replace ``key``'s expectations with the deletions of exactly these objects."""
        self._records[key] = _Record(adds=0, deletes=set(pod_keys), stamp=self._clock())

    def creation_observed(self, key: str) -> None:
        rec = self._records.get(key)
        if rec is not None and rec.adds > 0:
            rec.adds -= 1

    creation_failed = creation_observed
    """A create that returned an error will never be observed: count it off the same way."""

    def deletion_observed(self, key: str, pod_key: str) -> None:
        rec = self._records.get(key)
        if rec is not None:
            rec.deletes.discard(pod_key)

    deletion_failed = deletion_observed

    def pending(self, key: str) -> tuple[int, int]:
        """(creations, deletions) still expected for ``key``."""
        rec = self._records.get(key)
        return (0, 0) if rec is None else (rec.adds, len(rec.deletes))

    def satisfied(self, key: str) -> bool:
        """May the controller compute a fresh diff for ``key`` now?"""
        rec = self._records.get(key)
        if rec is None:
            return True
        if rec.adds <= 0 and not rec.deletes:
            return True
        return self._clock() - rec.stamp > self.ttl

    def forget(self, key: str) -> None:
        """Drop ``key``'s record (its owner was deleted)."""
        self._records.pop(key, None)
