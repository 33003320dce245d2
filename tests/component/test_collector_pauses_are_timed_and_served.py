"""Every collection of the cyclic garbage collector is timed once a component tuned it
(``component.gcpauses``): counted per generation in ``/metrics``, and a long one logged as a
warning — a full collection over a large heap stops the event loop, and this is how a
component says so. With ``freeze_survivors`` (a sim kubelet's), what a full collection leaves
is frozen out of the next ones. Real collections (``gc.collect``), a real registry's page.
"""

from __future__ import annotations

import gc
import logging

import pytest

from component import gcpauses
from component.gcpauses import PAUSES, watch_pauses
from component.metrics import Metrics
from kubelite.testing.metrics import samples


def served(metrics: Metrics, name: str, generation: int) -> float:
    for sample in samples(metrics.render()):
        if sample.name == name and sample.labels == {"generation": str(generation)}:
            return sample.value
    raise AssertionError(f"{name}{{generation={generation}}} is not served")


def test_every_full_collection_is_counted_and_timed() -> None:
    watch_pauses()
    watch_pauses()  # once only: each collection is counted once
    metrics = Metrics()
    before = served(metrics, "python_gc_pauses_total", 2)
    seconds = served(metrics, "python_gc_pause_seconds_total", 2)

    gc.collect()

    assert served(metrics, "python_gc_pauses_total", 2) == before + 1
    assert served(metrics, "python_gc_pause_seconds_total", 2) > seconds
    assert served(metrics, "python_gc_pause_max_seconds", 2) == PAUSES.longest[2] > 0


def test_a_long_pause_is_logged_with_its_generation(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    watch_pauses()
    monkeypatch.setattr(gcpauses, "PAUSE_WARNING", 0.0)  # every pause is "long"
    with caplog.at_level(logging.WARNING, logger="kubelite.component"):
        gc.collect(1)
    assert any(
        "garbage collection of generation 1 stopped everything for" in r.getMessage()
        for r in caplog.records
    ), caplog.text


def test_survivors_of_a_full_collection_are_frozen_when_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    watch_pauses()
    monkeypatch.setattr(PAUSES, "freeze_survivors", True)
    kept = [[i] for i in range(1000)]  # containers the collector tracks, alive throughout
    try:
        before = gc.get_freeze_count()
        gc.collect(1)
        assert gc.get_freeze_count() == before, "a younger generation's collection froze"
        gc.collect()
        assert gc.get_freeze_count() >= before + len(kept), "the survivors were not frozen"
    finally:
        gc.unfreeze()
        monkeypatch.setattr(PAUSES, "freeze_survivors", False)
