"""A pod's way through the control plane, step by step, read back from the objects it left.

Why: the seed explains Kubernetes by following one pod from ``kubectl create`` to Running —
the apiserver stores it, the controller-manager made it (for a ReplicaSet's pod), the
scheduler binds it, the kubelet runs it. Every component leaves evidence of its part on the
API: Events, the pod's conditions, its container statuses, its managedFields. This module
turns that evidence into an ordered list of ``TraceStep``\\ s (``kubelite trace pod``, and the
dashboard's swimlane), as a pure function over plain JSON objects: no I/O, nothing of ours
outside ``api/``.

Where each step comes from:

* **created** (apiserver): ``metadata.creationTimestamp``; the detail names the manager of the
  first managedFields entry (who wrote the pod);
* **seen by controller-manager**: the owner's ``SuccessfulCreate`` Event "Created pod: NAME"
  (``owners``: the pod's ReplicaSet, ReplicationController ...);
* **not schedulable** / **scheduled** (scheduler): ``FailedScheduling`` Events (the filter
  outcome, "0/3 nodes are available: ...") and the ``Scheduled`` Event ("Successfully assigned
  ns/pod to node", with the resourceVersion at which the scheduler saw the pod); without the
  Event, the ``PodScheduled`` condition;
* **seen by kubelet**: ``status.startTime`` (when the kubelet acknowledged the pod), with the
  resourceVersion its first Event names;
* **volumes not ready** (``FailedMount``), **volumes ready** and **sandbox ready**: the
  ``PodReadyToStartContainers`` condition (the kubelet mounts a pod's volumes before it makes the
  sandbox, so "volumes ready" carries the sandbox's time: it has none of its own);
* **image pulled**, **container created**, **container started** (kubelet): the ``Pulled``,
  ``Created`` and ``Started`` Events, one step per container (``startedAt`` when the Event is
  gone);
* **probe failed** (``Unhealthy`` Events) and **probes passed** / **containers ready**: the
  ``ContainersReady`` condition.

Precision. Events carry ``eventTime``, a MicroTime (kubelite's recorder sets it). Conditions,
``startTime``, ``startedAt`` and ``creationTimestamp`` are ``metav1.Time``: whole seconds. A
second-resolution time stands for the whole second that follows it, so the trace places such a
step at the earliest instant consistent with the steps that must come before it (a sandbox is
never ready before the pod was scheduled): ``max(t, latest earlier step)`` when that is inside
the second. Steps are then sorted by time, so offsets never decrease; ties keep the lifecycle's
order. ``created`` has one-second resolution and is usually the first step, so every offset
may be up to a second larger than the true time since creation.

What it does not guarantee: Events are best effort and expire (``--event-ttl``); a step whose
evidence is gone is missing, not invented. An Event aggregated over repeats gives its *first*
occurrence. The scheduler's scores are not recorded anywhere, only the filter's outcome.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from api.meta import format_micro_time, parse_time

__all__ = ["TraceStep", "pod_trace", "replicaset_trace"]

Obj = Mapping[str, Any]

SECOND = timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class TraceStep:
    """One step: what happened, which component did it, when, and how long after the first."""

    step: str
    component: str
    at: datetime
    offset: float
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "component": self.component,
            "time": format_micro_time(self.at),
            "offsetSeconds": self.offset,
            "detail": self.detail,
        }


# The lifecycle's order: ties in time keep it, and a second-resolution step is placed after
# the precise steps that rank before it.
RANKS = {
    "created": 0,
    "seen by controller-manager": 1,
    "not schedulable": 2,
    "scheduled": 3,
    "seen by kubelet": 4,
    "volumes not ready": 5,
    "volumes ready": 6,
    "sandbox ready": 7,
    "image pulled": 8,
    "container created": 9,
    "container started": 10,
    "probe failed": 11,
    "probes passed": 12,
    "containers ready": 12,
}


@dataclass(frozen=True, slots=True)
class _Found:
    """A step before ordering: ``precise`` when ``at`` is below the second."""

    step: str
    component: str
    at: datetime
    precise: bool
    detail: str
    rank: int
    lane: str = ""
    """Steps of one pod share a lane: placing a second-resolution step looks only at its own."""


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        at = parse_time(value)
    except ValueError:
        return None
    return at.astimezone(UTC)


def _found(
    step: str, component: str, at: datetime, *, precise: bool, detail: str = "", lane: str = ""
) -> _Found:
    return _Found(step, component, at, precise, detail, RANKS[step], lane)


# -- events --------------------------------------------------------------------------------


def _event_time(event: Obj) -> tuple[datetime, bool] | None:
    """The first occurrence: ``eventTime`` (MicroTime) else ``firstTimestamp`` (seconds)."""
    micro = _time(event.get("eventTime"))
    if micro is not None:
        return micro, True
    for key in ("firstTimestamp", "lastTimestamp"):
        at = _time(event.get(key))
        if at is not None:
            return at, False
    at = _time((event.get("metadata") or {}).get("creationTimestamp"))
    return (at, False) if at is not None else None


def _component(event: Obj) -> str:
    """The control-plane process behind an Event's reporter."""
    source = str(event.get("reportingComponent") or (event.get("source") or {}).get("component"))
    if source == "kubelet":
        return "kubelet"
    if event.get("reason") in ("Scheduled", "FailedScheduling") or "scheduler" in source:
        return "scheduler"
    if source.endswith("-controller"):
        return "controller-manager"
    return source or "unknown"


def _about(event: Obj, obj: Obj) -> bool:
    """Whether ``event`` is about ``obj`` (by uid; by kind, namespace and name without one)."""
    ref = event.get("involvedObject") or {}
    meta = obj.get("metadata") or {}
    if ref.get("uid") and meta.get("uid"):
        return bool(ref["uid"] == meta["uid"])
    return (
        ref.get("kind") == obj.get("kind", ref.get("kind"))
        and ref.get("name") == meta.get("name")
        and (ref.get("namespace") or "") == (meta.get("namespace") or "")
    )


def _repeats(event: Obj) -> str:
    count = int(event.get("count") or 1)
    return f" (x{count})" if count > 1 else ""


# -- one pod ---------------------------------------------------------------------------------

# reason -> step, for the Events a pod's kubelet and scheduler leave on it
EVENT_STEPS = {
    "FailedScheduling": "not schedulable",
    "Scheduled": "scheduled",
    "FailedMount": "volumes not ready",
    "Pulled": "image pulled",
    "Created": "container created",
    "Started": "container started",
    "Unhealthy": "probe failed",
}


def _condition(pod: Obj, kind: str) -> datetime | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return _time(cond.get("lastTransitionTime"))
    return None


def _creator(obj: Obj) -> str:
    entries = (obj.get("metadata") or {}).get("managedFields") or []
    first = next((e for e in entries if not e.get("subresource")), None)
    return f"by {first['manager']}" if first and first.get("manager") else ""


def _pod_found(pod: Obj, events: Sequence[Obj], owners: Sequence[Obj]) -> list[_Found]:
    meta = pod.get("metadata") or {}
    name = str(meta.get("name") or "")
    lane = f"{meta.get('namespace')}/{name}"
    spec = pod.get("spec") or {}
    found: list[_Found] = []
    created = _time(meta.get("creationTimestamp"))
    if created is not None:
        found.append(
            _found("created", "apiserver", created, precise=False, detail=_creator(pod), lane=lane)
        )
    found += _made_by_owner(name, lane, events, owners)
    own = [e for e in events if _about(e, pod)]
    found += _event_steps(own, lane)
    if not any(f.step == "scheduled" for f in found):
        bound = _condition(pod, "PodScheduled")
        if bound is not None and spec.get("nodeName"):
            found.append(
                _found(
                    "scheduled",
                    "scheduler",
                    bound,
                    precise=False,
                    detail=f"bound to {spec['nodeName']}",
                    lane=lane,
                )
            )
    found += _kubelet_steps(pod, own, lane)
    return found


def _made_by_owner(
    name: str, lane: str, events: Sequence[Obj], owners: Sequence[Obj]
) -> list[_Found]:
    out = []
    for owner in owners:
        for event in events:
            if event.get("reason") != "SuccessfulCreate" or not _about(event, owner):
                continue
            if not str(event.get("message") or "").endswith(f": {name}"):
                continue
            when = _event_time(event)
            if when is not None:
                what = f"{owner.get('kind')} {(owner.get('metadata') or {}).get('name')}"
                out.append(
                    _found(
                        "seen by controller-manager",
                        "controller-manager",
                        when[0],
                        precise=when[1],
                        detail=f"{what}: {event.get('message')}",
                        lane=lane,
                    )
                )
    return out


def _event_steps(events: Iterable[Obj], lane: str) -> list[_Found]:
    out = []
    for event in events:
        step = EVENT_STEPS.get(str(event.get("reason") or ""))
        when = _event_time(event)
        if step is None or when is None:
            continue
        detail = str(event.get("message") or "") + _repeats(event)
        if step == "scheduled":
            rv = (event.get("involvedObject") or {}).get("resourceVersion")
            detail += f" (saw the pod at resourceVersion {rv})" if rv else ""
        out.append(
            _found(step, _component(event), when[0], precise=when[1], detail=detail, lane=lane)
        )
    return out


def _kubelet_steps(pod: Obj, own: Sequence[Obj], lane: str) -> list[_Found]:
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    node = str(spec.get("nodeName") or "")
    out = []
    acknowledged = _time(status.get("startTime"))
    if acknowledged is not None:
        rvs = [
            (e.get("involvedObject") or {}).get("resourceVersion")
            for e in own
            if _component(e) == "kubelet"
        ]
        detail = f"{node}" + (f" (at resourceVersion {rvs[0]})" if rvs and rvs[0] else "")
        out.append(
            _found(
                "seen by kubelet", "kubelet", acknowledged, precise=False, detail=detail, lane=lane
            )
        )
    sandbox = _condition(pod, "PodReadyToStartContainers")
    if sandbox is not None:
        volumes = spec.get("volumes") or []
        if volumes:
            names = ", ".join(str(v.get("name")) for v in volumes)
            out.append(
                _found(
                    "volumes ready",
                    "kubelet",
                    sandbox,
                    precise=False,
                    detail=f"{names} (mounted before the sandbox; no time of their own)",
                    lane=lane,
                )
            )
        ip = status.get("podIP")
        out.append(
            _found(
                "sandbox ready",
                "kubelet",
                sandbox,
                precise=False,
                detail=f"pod IP {ip}" if ip else "",
                lane=lane,
            )
        )
    started = {
        str(e.get("message") or "").rsplit(" ", 1)[-1] for e in own if e.get("reason") == "Started"
    }
    for cs in status.get("containerStatuses") or []:
        at = _time(((cs.get("state") or {}).get("running") or {}).get("startedAt"))
        if at is not None and cs.get("name") not in started:
            out.append(
                _found(
                    "container started",
                    "kubelet",
                    at,
                    precise=False,
                    detail=f"container {cs.get('name')}",
                    lane=lane,
                )
            )
    ready = _condition(pod, "ContainersReady")
    if ready is not None:
        probed = [
            c.get("name")
            for c in spec.get("containers") or []
            if c.get("readinessProbe") or c.get("startupProbe")
        ]
        step = "probes passed" if probed else "containers ready"
        detail = f"readiness of {', '.join(map(str, probed))}" if probed else "no readiness probes"
        out.append(_found(step, "kubelet", ready, precise=False, detail=detail, lane=lane))
    return out


# -- ordering ----------------------------------------------------------------------------------


def _placed(found: Sequence[_Found]) -> list[_Found]:
    """Each second-resolution step at the earliest instant its second and the precise steps
    ranked before it (in its lane) allow."""
    out = []
    for f in found:
        if f.precise:
            out.append(f)
            continue
        before = [
            g.at
            for g in found
            if g.precise and g.lane == f.lane and g.rank < f.rank and f.at <= g.at < f.at + SECOND
        ]
        out.append(
            _Found(f.step, f.component, max([f.at, *before]), False, f.detail, f.rank, f.lane)
        )
    return out


def _finish(found: Sequence[_Found]) -> list[TraceStep]:
    ordered = sorted(_placed(found), key=lambda f: (f.at, f.rank))
    if not ordered:
        return []
    start = ordered[0].at
    return [
        TraceStep(f.step, f.component, f.at, (f.at - start).total_seconds(), f.detail)
        for f in ordered
    ]


def pod_trace(pod: Obj, events: Sequence[Obj], owners: Sequence[Obj] = ()) -> list[TraceStep]:
    """The steps ``pod`` went through, in time order; ``events`` may be any Events (those about
    the pod and its ``owners`` are used), ``owners`` the objects that created it."""
    return _finish(_pod_found(pod, events, owners))


# -- a replica set's scale-up ---------------------------------------------------------------

# a pod's step -> the replica set's step naming that pod
REPLICA_STEPS = {
    "seen by controller-manager": "pod created",
    "scheduled": "pod scheduled",
    "container started": "pod started",
    "probes passed": "pod ready",
    "containers ready": "pod ready",
}


def _scaled(rs: Obj) -> list[_Found]:
    """Who set ``spec.replicas`` after the creator (``kubectl scale``, a Deployment ...)."""
    entries = (rs.get("metadata") or {}).get("managedFields") or []
    creator = next((e for e in entries if not e.get("subresource")), None)
    replicas = (rs.get("spec") or {}).get("replicas")
    out = []
    for entry in entries:
        fields = entry.get("fieldsV1") or {}
        if entry is creator or "f:replicas" not in (fields.get("f:spec") or {}):
            continue
        at = _time(entry.get("time"))
        if at is not None:
            via = f" (/{entry['subresource']})" if entry.get("subresource") else ""
            detail = f"spec.replicas (now {replicas}) set by {entry.get('manager')}{via}"
            out.append(_Found("scaled", "apiserver", at, False, detail, 1))
    return out


def replicaset_trace(rs: Obj, pods: Sequence[Obj], events: Sequence[Obj]) -> list[TraceStep]:
    """A ReplicaSet's (or ReplicationController's) scale-up as the seed tells it: created,
    scaled, then each of ``pods`` created by the controller-manager, scheduled, started, ready."""
    found: list[_Found] = []
    created = _time((rs.get("metadata") or {}).get("creationTimestamp"))
    if created is not None:
        found.append(_Found("created", "apiserver", created, False, _creator(rs), 0))
    found += _scaled(rs)
    for pod in pods:
        name = (pod.get("metadata") or {}).get("name")
        for f in _placed(_pod_found(pod, events, [rs])):
            step = REPLICA_STEPS.get(f.step)
            if step is not None:
                detail = f"{name}: {f.detail}" if f.detail else str(name)
                found.append(_Found(step, f.component, f.at, True, detail, 10 + f.rank, str(name)))
    return _finish(found)
