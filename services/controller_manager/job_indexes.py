"""Completion indexes of an Indexed Job: the pod's index, and sets of indexes as ``"1,3-5"``.

Why: an Indexed Job's ``status.completedIndexes`` and ``status.failedIndexes`` are compressed
interval lists (``"0-2,5"``): ascending, comma-separated, a run of consecutive indexes written
``first-last``. Kubernetes' ``orderedIntervals`` parse them back when the controller restarts,
so the string *is* the durable record of which indexes succeeded — there is no per-pod UID list
for Indexed Jobs. This module owns that format and the pod's index:

* ``completion_index(pod)``: the ``batch.kubernetes.io/job-completion-index`` annotation as an
  int, None when absent or malformed (such a pod belongs to no index);
* ``parse_indexes(text, completions)`` / ``format_indexes(indexes)``: the interval strings
  (indexes at or above ``completions`` are dropped, as Kubernetes drops them).

Limits: sets are plain Python ``set[int]``; fine up to the apiserver's 100,000-completion cap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["COMPLETION_INDEX_KEY", "completion_index", "format_indexes", "parse_indexes"]

COMPLETION_INDEX_KEY = "batch.kubernetes.io/job-completion-index"
"""The annotation (and label) carrying a pod's completion index."""


def completion_index(pod: Mapping[str, Any]) -> int | None:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(COMPLETION_INDEX_KEY)
    if raw is None:
        return None
    try:
        index = int(str(raw))
    except ValueError:
        return None
    return index if index >= 0 else None


def parse_indexes(text: str | None, completions: int) -> set[int]:
    """The indexes named by ``text`` below ``completions``; malformed parts are skipped."""
    found: set[int] = set()
    for part in (text or "").split(","):
        first, _, last = part.strip().partition("-")
        try:
            lo = int(first)
            hi = int(last) if last else lo
        except ValueError:
            continue
        found.update(range(max(lo, 0), min(hi, completions - 1) + 1))
    return found


def format_indexes(indexes: Iterable[int]) -> str:
    """``{0, 1, 2, 5}`` -> ``"0-2,5"``; empty -> ``""``."""
    runs: list[list[int]] = []
    for ix in sorted(set(indexes)):
        if runs and ix == runs[-1][1] + 1:
            runs[-1][1] = ix
        else:
            runs.append([ix, ix])
    return ",".join(f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in runs)
