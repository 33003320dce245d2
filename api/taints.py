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

__all__ = ["matching_tolerations", "tolerates", "tolerates_taint"]


def tolerates(toleration: Mapping[str, Any], *, key: str, value: str, effect: str) -> bool:
    """Does ``toleration`` tolerate the taint ``key=value:effect``? (The one matching rule.)"""
    wanted_effect = toleration.get("effect") or ""
    if wanted_effect and wanted_effect != effect:
        return False
    wanted_key = toleration.get("key") or ""
    if wanted_key and wanted_key != key:
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == value
    return False


def tolerates_taint(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """``tolerates`` for a taint as its wire dict."""
    return tolerates(
        toleration,
        key=taint.get("key") or "",
        value=taint.get("value") or "",
        effect=taint.get("effect") or "",
    )


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
