"""Taints and tolerations: does a pod's toleration tolerate a node's taint (``v1.Toleration``
``ToleratesTaint`` and ``GetMatchingTolerations`` from Kubernetes' component helpers).

Why here: the scheduler (NoSchedule/NoExecute filtering) and the controller-manager (NoExecute
eviction) must agree exactly on matching, and ``api/`` is what both share. Works on the wire
dicts (``{"key", "operator", "value", "effect", "tolerationSeconds"}``).

Rules: an empty toleration effect matches every effect; an empty key with ``Exists`` matches
every key; ``Exists`` ignores the value; ``Equal`` (or no operator) needs equal values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["matching_tolerations", "tolerates_taint"]


def tolerates_taint(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def matching_tolerations(
    taints: Iterable[Mapping[str, Any]], tolerations: Iterable[Mapping[str, Any]]
) -> tuple[bool, list[Mapping[str, Any]]]:
    """(every taint tolerated?, the first toleration matching each taint)."""
    tolerations = list(tolerations)
    used: list[Mapping[str, Any]] = []
    for taint in taints:
        match = next((t for t in tolerations if tolerates_taint(t, taint)), None)
        if match is None:
            return False, []
        used.append(match)
    return True, used
