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
  (``owners``: the pod's ReplicaSet, ReplicationController ...); from an owner's tenth pod on the
  recorder combines those Events, and the controller-manager's managedFields entry on the pod
  (to the second) stands in;
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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final

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
# the precise steps that rank before it. A replica set's own steps rank first.
RANKS = {
    "created": 0,
    "scaled": 1,
    "seen by controller-manager": 2,
    "not schedulable": 3,
    "scheduled": 4,
    "seen by kubelet": 5,
    "volumes not ready": 6,
    "volumes ready": 7,
    "sandbox ready": 8,
    "image pulled": 9,
    "container created": 10,
    "container started": 11,
    "probe failed": 12,
    "probes passed": 13,
    "containers ready": 13,
    # a replica set's steps naming one of its pods
    "pod created": 2,
    "pod scheduled": 4,
    "pod started": 11,
    "pod ready": 13,
}


@dataclass(frozen=True, slots=True)
class _Found:
    """A step before ordering: ``precise`` when ``at`` is below the second."""

    step: str
    component: str
    at: datetime
    precise: bool
    detail: str
    lane: str
    """Steps of one object share a lane: placing a second-resolution step looks at its own."""

    @property
    def rank(self) -> int:
        return RANKS[self.step]


@dataclass(slots=True)
class _Evidence:
    """The steps found so far for one object (its lane)."""

    lane: str
    found: list[_Found] = field(default_factory=list)

    def add(
        self, step: str, at: datetime, *, by: str, detail: str = "", precise: bool = False
    ) -> None:
        self.found.append(_Found(step, by, at, precise, detail, self.lane))

    def add_event(self, step: str, event: Obj, *, detail: str) -> None:
        when = _event_time(event)
        if when is not None:
            self.add(step, when[0], by=_component(event), detail=detail, precise=when[1])


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        at = parse_time(value)
    except ValueError:
        return None
    return at.astimezone(UTC)


# -- events --------------------------------------------------------------------------------


def _event_time(event: Obj) -> tuple[datetime, bool] | None:
    """The first occurrence, and whether to the microsecond: ``eventTime`` (MicroTime), else
    ``firstTimestamp`` (seconds)."""
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
    evidence = _Evidence(f"{meta.get('namespace')}/{meta.get('name')}")
    created = _time(meta.get("creationTimestamp"))
    if created is not None:
        evidence.add("created", created, by="apiserver", detail=_creator(pod))
    for owner in owners:
        _made_by(owner, pod, events, evidence)
    own = [e for e in events if _about(e, pod)]
    for event in own:
        step = EVENT_STEPS.get(str(event.get("reason") or ""))
        if step is not None:
            evidence.add_event(step, event, detail=_event_detail(step, event))
    node = (pod.get("spec") or {}).get("nodeName")
    bound = _condition(pod, "PodScheduled")
    if bound and node and not any(f.step == "scheduled" for f in evidence.found):
        evidence.add("scheduled", bound, by="scheduler", detail=f"bound to {node}")
    _kubelet_steps(pod, own, evidence)
    return evidence.found


COMBINED: Final = "(combined from similar events): "
"""How the event recorder starts an Event folding similar ones (client-go's wording): its message
names only the latest pod, and its time is the first one's."""


def _made_by(owner: Obj, pod: Obj, events: Sequence[Obj], evidence: _Evidence) -> None:
    """The owner's ``SuccessfulCreate`` Event naming ``pod``; once the recorder combined them
    (from the tenth pod of an owner on), the pod's own managedFields entry by the
    controller-manager, to the second."""
    meta = pod.get("metadata") or {}
    name = meta.get("name")
    what = f"{owner.get('kind')} {(owner.get('metadata') or {}).get('name')}"
    for event in events:
        message = str(event.get("message") or "")
        if event.get("reason") != "SuccessfulCreate" or not message.endswith(f": {name}"):
            continue
        if message.startswith(COMBINED):
            continue
        if _about(event, owner):
            evidence.add_event("seen by controller-manager", event, detail=f"{what}: {message}")
            return
    for entry in meta.get("managedFields") or []:
        manager = str(entry.get("manager") or "")
        at = _time(entry.get("time"))
        if "controller-manager" in manager and not entry.get("subresource") and at is not None:
            detail = f"{what}: created the pod (its Event was combined with similar ones)"
            evidence.add("seen by controller-manager", at, by="controller-manager", detail=detail)
            return


def _event_detail(step: str, event: Obj) -> str:
    detail = str(event.get("message") or "") + _repeats(event)
    rv = (event.get("involvedObject") or {}).get("resourceVersion")
    if step == "scheduled" and rv:
        detail += f" (saw the pod at resourceVersion {rv})"
    return detail


def _kubelet_steps(pod: Obj, own: Sequence[Obj], evidence: _Evidence) -> None:
    """What the kubelet reports in the pod's status (whole seconds)."""
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    acknowledged = _time(status.get("startTime"))
    if acknowledged is not None:
        rvs = [
            (e.get("involvedObject") or {}).get("resourceVersion")
            for e in own
            if _component(e) == "kubelet"
        ]
        seen_at = f" (at resourceVersion {rvs[0]})" if rvs and rvs[0] else ""
        detail = f"{spec.get('nodeName') or ''}{seen_at}"
        evidence.add("seen by kubelet", acknowledged, by="kubelet", detail=detail)
    sandbox = _condition(pod, "PodReadyToStartContainers")
    if sandbox is not None:
        if volumes := spec.get("volumes") or []:
            names = ", ".join(str(v.get("name")) for v in volumes)
            detail = f"{names} (mounted before the sandbox; no time of their own)"
            evidence.add("volumes ready", sandbox, by="kubelet", detail=detail)
        ip = status.get("podIP")
        evidence.add("sandbox ready", sandbox, by="kubelet", detail=f"pod IP {ip}" if ip else "")
    started = {
        str(e.get("message") or "").rsplit(" ", 1)[-1] for e in own if e.get("reason") == "Started"
    }
    for cs in status.get("containerStatuses") or []:
        at = _time(((cs.get("state") or {}).get("running") or {}).get("startedAt"))
        if at is not None and cs.get("name") not in started:
            evidence.add(
                "container started", at, by="kubelet", detail=f"container {cs.get('name')}"
            )
    ready = _condition(pod, "ContainersReady")
    if ready is not None:
        probed = [
            str(c.get("name"))
            for c in spec.get("containers") or []
            if c.get("readinessProbe") or c.get("startupProbe")
        ]
        if probed:
            evidence.add(
                "probes passed", ready, by="kubelet", detail=f"readiness of {', '.join(probed)}"
            )
        else:
            evidence.add("containers ready", ready, by="kubelet", detail="no readiness probes")


# -- ordering ----------------------------------------------------------------------------------


REPORTED_AFTER: Final = frozenset({"seen by controller-manager"})
"""Steps whose Event is recorded only once the write it reports has returned: the scheduler may
bind the pod in between, so such a step is placed no later than the first step ranked after it
in its lane (a pod is created before it is scheduled)."""


def _placed(found: Sequence[_Found]) -> list[_Found]:
    """Each second-resolution step at the earliest instant its second and the precise steps
    ranked before it (in its lane) allow; a step of ``REPORTED_AFTER`` no later than the steps
    ranked after it."""
    out = []
    for f in found:
        if f.step in REPORTED_AFTER:
            after = [g.at for g in found if g.lane == f.lane and g.rank > f.rank and g.precise]
            out.append(replace(f, at=min([f.at, *after])))
        elif f.precise:
            out.append(f)  # already where it happened: no scan (a replica set's pods' steps)
        else:
            before = [
                g.at
                for g in found
                if g.precise
                and g.lane == f.lane
                and g.rank < f.rank
                and f.at <= g.at < f.at + SECOND
            ]
            out.append(replace(f, at=max([f.at, *before])))
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


def _scaled(rs: Obj, evidence: _Evidence) -> None:
    """Who set ``spec.replicas`` after the creator (``kubectl scale``, a Deployment ...)."""
    entries = (rs.get("metadata") or {}).get("managedFields") or []
    creator = next((e for e in entries if not e.get("subresource")), None)
    replicas = (rs.get("spec") or {}).get("replicas")
    for entry in entries:
        fields = entry.get("fieldsV1") or {}
        at = _time(entry.get("time"))
        if entry is creator or at is None or "f:replicas" not in (fields.get("f:spec") or {}):
            continue
        via = f" (/{entry['subresource']})" if entry.get("subresource") else ""
        detail = f"spec.replicas (now {replicas}) set by {entry.get('manager')}{via}"
        evidence.add("scaled", at, by="apiserver", detail=detail)


def _events_by_pod(rs: Obj, events: Sequence[Obj]) -> Callable[[Obj], Sequence[Obj]]:
    """For each pod of ``rs``, the ``events`` that can be evidence of it: its own, the
    ``SuccessfulCreate`` naming it, and any without an involvedObject uid — grouped once, so a
    1,000-replica set's trace does not match every Event against every pod."""
    rs_uid = (rs.get("metadata") or {}).get("uid")
    by_uid: dict[str | None, list[Obj]] = {}
    for event in events:
        by_uid.setdefault((event.get("involvedObject") or {}).get("uid") or None, []).append(event)
    creates: dict[str, list[Obj]] = {}
    for event in by_uid.get(rs_uid, []) if rs_uid else []:
        if event.get("reason") == "SuccessfulCreate":
            named = str(event.get("message") or "").rpartition(": ")[2]
            creates.setdefault(named, []).append(event)

    def of(pod: Obj) -> Sequence[Obj]:
        meta = pod.get("metadata") or {}
        if not rs_uid or not meta.get("uid"):
            return events  # matched by kind and name: no grouping to trust
        own = by_uid.get(meta["uid"], [])
        return [*own, *creates.get(str(meta.get("name")), []), *by_uid.get(None, [])]

    return of


def replicaset_trace(rs: Obj, pods: Sequence[Obj], events: Sequence[Obj]) -> list[TraceStep]:
    """A ReplicaSet's (or ReplicationController's) scale-up as the seed tells it: created,
    scaled, then each of ``pods`` created by the controller-manager, scheduled, started, ready."""
    meta = rs.get("metadata") or {}
    evidence = _Evidence(f"{meta.get('namespace')}/{meta.get('name')}")
    created = _time(meta.get("creationTimestamp"))
    if created is not None:
        evidence.add("created", created, by="apiserver", detail=_creator(rs))
    _scaled(rs, evidence)
    found = list(evidence.found)
    events_of = _events_by_pod(rs, events)
    for pod in pods:
        name = (pod.get("metadata") or {}).get("name")
        # placed among all of the pod's evidence, then kept where they are (precise)
        for f in _placed(_pod_found(pod, events_of(pod), [rs])):
            if f.step in REPLICA_STEPS:
                detail = f"{name}: {f.detail}" if f.detail else str(name)
                found.append(replace(f, step=REPLICA_STEPS[f.step], detail=detail, precise=True))
    return _finish(found)
