"""``persistentVolumeClaimRetentionPolicy``: which claims of a StatefulSet the garbage collector
may take, said with ownerReferences exactly as Kubernetes says it.

Why: a StatefulSet's claims outlive its pods by design (``web-1`` comes back to its data). The
retention policy (``whenDeleted``, ``whenScaled``: ``Retain`` or ``Delete``) lets a user have
them deleted with the set, or when a scale-down condemns their ordinal. Kubernetes' controller
does not delete claims itself: it puts plain (non-controller) ownerReferences on them and lets
the garbage collector follow them (``claimOwnerMatchesSetAndPod`` /
``updateClaimOwnerRefForSetAndPod`` in ``stateful_set_utils.go``):

=============  ===========  ===============================================================
whenScaled     whenDeleted  the claim of ordinal ``i`` is owned by
=============  ===========  ===============================================================
Retain         Retain       nobody
Retain         Delete       the set
Delete         Retain       the pod, once ``i`` is out of range (condemned); else nobody
Delete         Delete       the pod once condemned (and no longer the set); else the set
=============  ===========  ===============================================================

A claim that points at a pod of its ordinal's name with another uid is *stale*: the pod it
belonged to was condemned, the garbage collector is deleting the claim, and a new pod of that
ordinal must wait for it to go (``PodClaimIsStale``) rather than mount doomed data.

Limits: pure functions on dicts; the writes (with compare-and-swap) are in
``statefulset_pod_control``. Owner references to the set name ``apps/v1``, to pods ``v1``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.controller_manager.statefulset_pods import in_ordinal_range

__all__ = [
    "claim_owners_match",
    "has_stale_pod_ref",
    "retention_policy",
    "update_claim_owners",
]

Obj = dict[str, Any]

RETAIN, DELETE = "Retain", "Delete"


def retention_policy(sts: Obj) -> tuple[str, str]:
    """``(whenDeleted, whenScaled)``; ``Retain`` for what is not set."""
    policy = (sts.get("spec") or {}).get("persistentVolumeClaimRetentionPolicy") or {}
    return (policy.get("whenDeleted") or RETAIN, policy.get("whenScaled") or RETAIN)


def _refs(obj: Mapping[str, Any]) -> list[Obj]:
    return [r for r in (obj.get("metadata") or {}).get("ownerReferences") or [] if r]


def _has_ref(claim: Obj, owner: Mapping[str, Any]) -> bool:
    uid = (owner.get("metadata") or {}).get("uid")
    return bool(uid) and any(r.get("uid") == uid for r in _refs(claim))


def has_stale_pod_ref(claim: Obj, pod: Mapping[str, Any]) -> bool:
    """``claim`` names a Pod called like ``pod`` that is not ``pod`` (a new pod has no uid)."""
    meta = pod.get("metadata") or {}
    return any(
        r.get("kind") == "Pod"
        and r.get("name") == meta.get("name")
        and r.get("uid") != meta.get("uid")
        for r in _refs(claim)
    )


def _wanted(sts: Obj, pod: Mapping[str, Any]) -> tuple[bool, bool]:
    """Whether the claim of ``pod``'s ordinal should be owned by (the set, the pod)."""
    when_deleted, when_scaled = retention_policy(sts)
    condemned = not in_ordinal_range(pod, sts)
    by_pod = when_scaled == DELETE and condemned
    by_set = when_deleted == DELETE and not by_pod
    return by_set, by_pod


def claim_owners_match(claim: Obj, sts: Obj, pod: Mapping[str, Any]) -> bool:
    """The claim's ownerReferences are what the policy asks for."""
    by_set, by_pod = _wanted(sts, pod)
    return _has_ref(claim, sts) == by_set and _has_ref(claim, pod) == by_pod


def _ref(owner: Mapping[str, Any], *, api_version: str, kind: str) -> Obj:
    meta = owner.get("metadata") or {}
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta.get("name"),
        "uid": meta.get("uid"),
    }


def _set_ref(
    claim: Obj, owner: Mapping[str, Any], *, wanted: bool, api_version: str, kind: str
) -> bool:
    if _has_ref(claim, owner) == wanted:
        return False
    meta = claim.setdefault("metadata", {})
    uid = (owner.get("metadata") or {}).get("uid")
    refs = [r for r in _refs(claim) if r.get("uid") != uid]
    if wanted:
        refs.append(_ref(owner, api_version=api_version, kind=kind))
    if refs:
        meta["ownerReferences"] = refs
    else:
        meta.pop("ownerReferences", None)
    return True


def update_claim_owners(claim: Obj, sts: Obj, pod: Mapping[str, Any]) -> bool:
    """Make ``claim``'s (a dict this caller owns) references follow the policy; whether it
    changed. A reference to the pod is only added when the pod has a uid (it exists)."""
    by_set, by_pod = _wanted(sts, pod)
    changed = _set_ref(claim, sts, wanted=by_set, api_version="apps/v1", kind="StatefulSet")
    if (pod.get("metadata") or {}).get("uid"):
        changed = _set_ref(claim, pod, wanted=by_pod, api_version="v1", kind="Pod") or changed
    return changed
