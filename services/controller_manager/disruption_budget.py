"""A PodDisruptionBudget's status from the pods it selects: the disruption controller's arithmetic.

Why: the eviction subresource trusts ``status.disruptionsAllowed``; these few rules decide it,
and they are Kubernetes' own (``pkg/controller/disruption/disruption.go``,
``component-helpers/apps/poddisruptionbudget``). Kept apart from the controller so that each
rule can be read, and tested, on plain dicts with an explicit ``now``:

* **expected and desired** (``expected_pods``; Kubernetes' ``getExpectedPodCount``):
  ``minAvailable`` as a number needs no controller: expected = the selected pods, desired = the
  number. A percentage ``minAvailable`` and any ``maxUnavailable`` need the scale of the pods'
  controllers: expected = the sum of ``spec.replicas`` of every distinct controller
  (``ControllerScales``), desired = ``ceil(minAvailable% of expected)`` or
  ``expected - maxUnavailable`` (a percentage rounded up), never below 0. Pods without a
  controller reference are **unmanaged**: left out of the sum and reported (the controller
  raises the ``UnmanagedPods`` warning); a pod whose controller cannot be found, or whose
  controller has no scale, fails the computation (``ExpectedPodsError``, e.g. ``found no
  controllers for pod "web-1"``), which the controller turns into ``SyncFailed``.
* **disrupted pods** (``disrupted_pods``; ``buildDisruptedPodMap``): an eviction records the
  pod in ``status.disruptedPods`` with the time; the entry stays while the pod exists, is not
  yet being deleted and ``DELETION_TIMEOUT`` (2 minutes) has not passed. An entry past the
  timeout is dropped and its pod reported as "not deleted"; the earliest pending expiry is when
  the budget must be looked at again.
* **healthy** (``count_healthy``): Ready pods that are not being deleted and not disrupted.
* **the status** (``new_status``; ``updatePdbStatus``): ``disruptionsAllowed = currentHealthy -
  desiredHealthy``, 0 when negative or when no pods are expected (a budget whose pods have not
  appeared yet must not grant anything); ``observedGeneration``; the ``DisruptionAllowed``
  condition (``SufficientPods`` True / ``InsufficientPods`` False), its transition time moving
  only when its status flips. ``None`` when the written status already says all that, so an
  unchanged budget costs no write. ``fail_safe_status`` is what a failed computation writes:
  nothing allowed, ``SyncFailed`` with the error.

Limits: controllers are found in the caches only (Kubernetes falls back to a live ``scale``
GET for kinds it has no lister for; kubelite serves ``scale`` only for the four kinds cached
here, so the fallback reads the same caches). Times are wall-clock, as Kubernetes' are.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from api.meta import format_time, parse_time
from api.registry import REGISTRY, ResourceType
from services.controller_manager.controller_ref import controller_ref, is_being_deleted
from services.controller_manager.pod_state import is_ready

__all__ = [
    "DELETION_TIMEOUT",
    "DISRUPTION_ALLOWED",
    "ControllerScales",
    "Disrupted",
    "Expected",
    "ExpectedPodsError",
    "count_healthy",
    "disrupted_pods",
    "expected_pods",
    "fail_safe_status",
    "new_status",
    "scaled_value",
]

Obj = dict[str, Any]

DELETION_TIMEOUT = timedelta(minutes=2)
"""How long an eviction's ``disruptedPods`` entry waits for its pod to be marked for deletion
(Kubernetes' ``DeletionTimeout``); after that the pod is assumed to stay and counts again."""

DISRUPTION_ALLOWED = "DisruptionAllowed"
SUFFICIENT_PODS = "SufficientPods"
INSUFFICIENT_PODS = "InsufficientPods"
SYNC_FAILED = "SyncFailed"

RCS = REGISTRY.require("", "ReplicationController")
RSS = REGISTRY.require("apps", "ReplicaSet")
DEPLOYMENTS = REGISTRY.require("apps", "Deployment")
STATEFULSETS = REGISTRY.require("apps", "StatefulSet")


class ExpectedPodsError(Exception):
    """The expected pod count cannot be computed; the message is Kubernetes' wording."""


class Cache(Protocol):
    def get(self, key: str) -> Obj | None: ...


# -- IntOrString --------------------------------------------------------------------------


def scaled_value(value: int | str, total: int, *, round_up: bool) -> int:
    """``intstr.GetScaledValueFromIntOrPercent``: a number as is, ``"N%"`` of ``total``."""
    if isinstance(value, int):
        return value
    if not value.endswith("%"):
        raise ExpectedPodsError(
            "invalid value for IntOrString: invalid type: string is not a percentage"
        )
    try:
        percent = int(value[:-1])
    except ValueError:
        raise ExpectedPodsError(f"invalid value {value!r}") from None
    exact = percent * total / 100
    return math.ceil(exact) if round_up else math.floor(exact)


# -- controllers and their scale ----------------------------------------------------------


def _group_of(ref: Mapping[str, Any]) -> str:
    return str(ref.get("apiVersion") or "").rpartition("/")[0]


def _is(ref: Mapping[str, Any] | None, kind: str, groups: tuple[str, ...]) -> bool:
    return ref is not None and ref.get("kind") == kind and _group_of(ref) in groups


def _replicas(obj: Obj) -> int:
    return int((obj.get("spec") or {}).get("replicas", 1))


@dataclass(frozen=True, slots=True)
class ControllerScales:
    """Finds the controller of a pod's controller reference and its ``spec.replicas``.

    Kubernetes' finders, in its order: a ReplicationController; the Deployment of a ReplicaSet
    it controls; a ReplicaSet no Deployment controls; a StatefulSet; then any kind serving
    ``scale`` (here: the same four, read from the cache). Each must be the very object the
    reference names (same uid)."""

    rcs: Cache
    replicasets: Cache
    deployments: Cache
    statefulsets: Cache

    def _cache_of(self, rt: ResourceType) -> Cache | None:
        return {
            RCS.kind: self.rcs,
            RSS.kind: self.replicasets,
            DEPLOYMENTS.kind: self.deployments,
            STATEFULSETS.kind: self.statefulsets,
        }.get(rt.kind)

    @staticmethod
    def _cached(cache: Cache, namespace: str, ref: Mapping[str, Any]) -> Obj | None:
        obj = cache.get(f"{namespace}/{ref.get('name')}")
        if obj is None or (obj.get("metadata") or {}).get("uid") != ref.get("uid"):
            return None
        return obj

    def find(self, ref: Mapping[str, Any], namespace: str) -> tuple[str, int] | None:
        """``(uid, replicas)`` of the controller ``ref`` names, or None when it is not found."""
        if _is(ref, "ReplicationController", ("",)):
            rc = self._cached(self.rcs, namespace, ref)
            if rc is not None:
                return str(ref["uid"]), _replicas(rc)
        if _is(ref, "ReplicaSet", ("apps", "extensions")):
            rs = self._cached(self.replicasets, namespace, ref)
            if rs is not None:
                owner = controller_ref(rs)
                if owner is None or owner.get("kind") != "Deployment":
                    return str(ref["uid"]), _replicas(rs)
                if _is(owner, "Deployment", ("apps", "extensions")):
                    deployment = self._cached(self.deployments, namespace, owner)
                    if deployment is not None:
                        return str(owner["uid"]), _replicas(deployment)
        if _is(ref, "StatefulSet", ("apps",)):
            sts = self._cached(self.statefulsets, namespace, ref)
            if sts is not None:
                return str(ref["uid"]), _replicas(sts)
        return self._by_scale(ref, namespace)

    def _by_scale(self, ref: Mapping[str, Any], namespace: str) -> tuple[str, int] | None:
        """``getScaleController``: any kind serving ``scale``; an error for one that does not."""
        api_version, kind = str(ref.get("apiVersion") or ""), str(ref.get("kind") or "")
        rt = REGISTRY.by_api_version(api_version, kind)
        if rt is None:
            raise ExpectedPodsError(f'no matches for kind "{kind}" in version "{api_version}"')
        if not any(s.name == "scale" for s in rt.subresources):
            resource = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
            raise ExpectedPodsError(f"{resource} does not implement the scale subresource")
        cache = self._cache_of(rt)
        found = None if cache is None else self._cached(cache, namespace, ref)
        return None if found is None else (str(ref["uid"]), _replicas(found))


# -- expected / desired -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Expected:
    expected: int
    desired: int
    unmanaged: tuple[str, ...] = ()
    """Names of selected pods without a controller reference (left out of ``expected``)."""


def _expected_scale(pods: Iterable[Obj], scales: ControllerScales) -> tuple[int, tuple[str, ...]]:
    scale_by_uid: dict[str, int] = {}
    unmanaged: list[str] = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        ref = controller_ref(pod)
        if ref is None:
            unmanaged.append(str(meta.get("name")))
            continue
        if ref.get("uid") in scale_by_uid:
            continue
        found = scales.find(ref, str(meta.get("namespace") or ""))
        if found is None:
            raise ExpectedPodsError(f'found no controllers for pod "{meta.get("name")}"')
        uid, replicas = found
        scale_by_uid[uid] = replicas
    return sum(scale_by_uid.values()), tuple(unmanaged)


def expected_pods(budget: Obj, pods: list[Obj], *, scales: ControllerScales) -> Expected:
    """``getExpectedPodCount`` (see the module docstring); raises ``ExpectedPodsError``."""
    spec = budget.get("spec") or {}
    max_unavailable, min_available = spec.get("maxUnavailable"), spec.get("minAvailable")
    if max_unavailable is not None:
        expected, unmanaged = _expected_scale(pods, scales)
        unavailable = scaled_value(max_unavailable, expected, round_up=True)
        return Expected(expected, max(0, expected - unavailable), unmanaged)
    if isinstance(min_available, int):
        return Expected(len(pods), min_available)
    if isinstance(min_available, str):
        expected, unmanaged = _expected_scale(pods, scales)
        return Expected(expected, scaled_value(min_available, expected, round_up=True), unmanaged)
    return Expected(0, 0)


# -- disrupted and healthy pods -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Disrupted:
    pods: dict[str, str]
    """The ``disruptedPods`` entries still pending: pod name -> eviction time (as written)."""
    recheck_at: datetime | None
    """The earliest time one of them expires (look at the budget again then)."""
    overdue: tuple[Obj, ...]
    """Pods whose entry expired without them being deleted."""


def disrupted_pods(budget: Obj, pods: Iterable[Obj], *, now: datetime) -> Disrupted:
    """``buildDisruptedPodMap``: keep entries of existing, not-deleting pods within the timeout."""
    recorded: Mapping[str, str] = (budget.get("status") or {}).get("disruptedPods") or {}
    kept: dict[str, str] = {}
    overdue: list[Obj] = []
    recheck_at: datetime | None = None
    if not recorded:
        return Disrupted({}, None, ())
    for pod in pods:
        name = str((pod.get("metadata") or {}).get("name"))
        if is_being_deleted(pod) or name not in recorded:
            continue
        expires = parse_time(recorded[name]) + DELETION_TIMEOUT
        if expires < now:
            overdue.append(pod)
            continue
        kept[name] = recorded[name]
        if recheck_at is None or expires < recheck_at:
            recheck_at = expires
    return Disrupted(kept, recheck_at, tuple(overdue))


def count_healthy(pods: Iterable[Obj], disrupted: Mapping[str, str], *, now: datetime) -> int:
    """``countHealthyPods``: Ready, not being deleted, not disrupted within the timeout."""
    healthy = 0
    for pod in pods:
        if is_being_deleted(pod):
            continue
        since = disrupted.get(str((pod.get("metadata") or {}).get("name")))
        if since is not None and parse_time(since) + DELETION_TIMEOUT > now:
            continue
        if is_ready(pod):
            healthy += 1
    return healthy


# -- the status ---------------------------------------------------------------------------


def _condition(status: Obj) -> Obj | None:
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == DISRUPTION_ALLOWED:
            return cond
    return None


def _set_condition(status: Obj, *, allowed: bool, reason: str, message: str, now: datetime) -> None:
    """``meta.SetStatusCondition`` of ``DisruptionAllowed`` on ``status`` (edited in place)."""
    wanted = {
        "type": DISRUPTION_ALLOWED,
        "status": "True" if allowed else "False",
        "reason": reason,
        "message": message,
        "observedGeneration": int(status.get("observedGeneration") or 0),
    }
    conditions = [dict(c) for c in status.get("conditions") or [] if isinstance(c, dict)]
    status["conditions"] = conditions
    existing = _condition(status)
    if existing is None:
        conditions.append({**wanted, "lastTransitionTime": format_time(now)})
        return
    if existing.get("status") != wanted["status"]:
        existing["lastTransitionTime"] = format_time(now)
    existing.update(wanted)


def _condition_up_to_date(budget: Obj) -> bool:
    """``ConditionsAreUpToDate``."""
    status = budget.get("status") or {}
    cond = _condition(status)
    if cond is None:
        return False
    if int(status.get("observedGeneration") or 0) != _generation(budget):
        return False
    if int(status.get("disruptionsAllowed") or 0) > 0:
        return cond.get("status") == "True" and cond.get("reason") == SUFFICIENT_PODS
    return cond.get("status") == "False" and cond.get("reason") == INSUFFICIENT_PODS


def _generation(budget: Obj) -> int:
    return int((budget.get("metadata") or {}).get("generation") or 0)


def new_status(
    budget: Obj,
    *,
    expected: Expected,
    current_healthy: int,
    disrupted: Mapping[str, str],
    now: datetime,
) -> Obj | None:
    """The status to write, or None when the budget's status already says it."""
    allowed = current_healthy - expected.desired
    if expected.expected <= 0 or allowed <= 0:
        allowed = 0
    old = budget.get("status") or {}
    if (
        int(old.get("currentHealthy") or 0) == current_healthy
        and int(old.get("desiredHealthy") or 0) == expected.desired
        and int(old.get("expectedPods") or 0) == expected.expected
        and int(old.get("disruptionsAllowed") or 0) == allowed
        and dict(old.get("disruptedPods") or {}) == dict(disrupted)
        and _condition_up_to_date(budget)
    ):
        return None
    status: Obj = {
        "observedGeneration": _generation(budget),
        "disruptionsAllowed": allowed,
        "currentHealthy": current_healthy,
        "desiredHealthy": expected.desired,
        "expectedPods": expected.expected,
        "conditions": old.get("conditions") or [],
    }
    if disrupted:
        status["disruptedPods"] = dict(disrupted)
    if allowed > 0:
        _set_condition(status, allowed=True, reason=SUFFICIENT_PODS, message="", now=now)
    else:
        _set_condition(status, allowed=False, reason=INSUFFICIENT_PODS, message="", now=now)
    return status


def fail_safe_status(budget: Obj, *, message: str, now: datetime) -> Obj:
    """``failSafe``: the old status with nothing allowed and ``SyncFailed`` saying why."""
    status: Obj = {**(budget.get("status") or {}), "disruptionsAllowed": 0}
    _set_condition(status, allowed=False, reason=SYNC_FAILED, message=message, now=now)
    return status
