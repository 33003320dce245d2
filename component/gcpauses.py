"""The cyclic garbage collector's pauses, timed: the moments a component's event loop stands still.

Why: a collection of the oldest generation walks every container object the process holds —
at 150,000 pods, tens of millions in a sim kubelet or a controller's informers — and nothing
else runs meanwhile: requests time out on the client's side, leases go stale, watches fall
behind. Kubernetes' Go components report theirs (``go_gc_duration_seconds``); this is the same
question asked of CPython.

``watch_pauses()`` (``component.lifecycle.tune_collector`` calls it) times every collection
through ``gc.callbacks``: ``PAUSES`` keeps, per generation, how many there were, their total
seconds and the longest; a pause of ``PAUSE_WARNING`` seconds or more is logged as a warning
with its generation and how many objects it freed. Every ``component.metrics.Metrics`` serves
them as ``python_gc_pauses_total{generation}``, ``python_gc_pause_seconds_total{generation}``
and ``python_gc_pause_max_seconds{generation}``.

``freeze_survivors()`` goes further, for a process whose heap is large and long-lived (a sim
kubelet hosting thousands of nodes and their pods): after each full collection, what survived
it is frozen (``gc.freeze``) out of the collections that follow, so the next full collection
walks only what came since — a pause that grows with the heap's growth, not with the heap (a
sim kubelet holding 150,000 pods stood still 12.5 s, and 213 of its nodes' lease renewals
timed out at once: bench/README.md). The price: cyclic garbage among frozen objects is never
collected (reference counting still frees everything else), so objects in cycles that lived
through a full collection and then died stay allocated — acceptable for a simulator, not the
default for a component.

Limits: one process-wide record (the collector is process-wide); the callback costs two clock
reads per collection, and the young generation is collected every ``GC_YOUNG_THRESHOLD``
allocations, so that is nothing next to the collection itself.
"""

from __future__ import annotations

import gc
import logging
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PAUSES", "PAUSE_WARNING", "Pauses", "freeze_survivors", "watch_pauses"]

log = logging.getLogger("kubelite.component")

PAUSE_WARNING = 1.0
"""Seconds of one collection from which it is logged: a tenth of a heartbeat's 10 s timeout."""


@dataclass(slots=True)
class Pauses:
    """Collections per generation (0, 1, 2): count, total seconds, longest."""

    count: list[int] = field(default_factory=lambda: [0, 0, 0])
    seconds: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    longest: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    freeze_survivors: bool = False
    """After each full collection, freeze its survivors (``freeze_survivors()``)."""
    _started: float = 0.0

    def observe(self, phase: str, info: dict[str, Any]) -> None:
        """A ``gc.callbacks`` callback."""
        if phase == "start":
            self._started = time.perf_counter()
            return
        took = time.perf_counter() - self._started
        generation = info["generation"]
        self.count[generation] += 1
        self.seconds[generation] += took
        self.longest[generation] = max(self.longest[generation], took)
        if took >= PAUSE_WARNING:
            log.warning(
                "garbage collection of generation %d stopped everything for %.1fs "
                "(%d objects freed)",
                generation,
                took,
                info.get("collected", 0),
            )
        if generation == 2 and self.freeze_survivors:
            gc.freeze()  # the collection is over: its survivors leave the next ones


PAUSES = Pauses()
"""This process's collections, once ``watch_pauses`` ran."""


def freeze_survivors() -> None:
    """From now on, freeze what each full collection leaves (see the module docstring)."""
    PAUSES.freeze_survivors = True
    watch_pauses()


def watch_pauses() -> None:
    """Time every later collection into ``PAUSES`` (idempotent)."""
    if PAUSES.observe not in gc.callbacks:
        gc.callbacks.append(PAUSES.observe)
