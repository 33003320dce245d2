"""Turning what a pod worker knows into the ``status`` a Kubernetes user expects to read.

Pure functions, no I/O: ``container_status`` renders one container (state, lastState,
restartCount, image, imageID, containerID, ready, started), ``pod_phase`` is the kubelet's
``getPhase`` (Pending → Running → Succeeded/Failed by restart policy), and ``build_pod_status``
assembles the whole status (with the pod-level ``reason``/``message`` of a pod the kubelet
failed itself, such as ``Evicted``) with the conditions the kubelet owns — PodReadyToStartContainers,
Initialized, ContainersReady, Ready — while keeping conditions others own (PodScheduled from the
scheduler, DisruptionTarget, ...) and every condition's ``lastTransitionTime`` when its status
did not change.

Times are RFC 3339 with whole seconds (``metav1.Time``), as on the wire.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from api.meta import format_time, now_time
from services.kubelet.runtime.base import ContainerRecord

__all__ = [
    "KUBELET_CONDITIONS",
    "ContainerView",
    "build_pod_status",
    "container_status",
    "pod_phase",
]

KUBELET_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")
"""Conditions the kubelet owns; any other condition in the pod's status is kept as it is."""

Obj = dict[str, Any]


def _time(epoch: float | None) -> str | None:
    return None if epoch is None else _format_epoch(epoch)


@functools.lru_cache(maxsize=4096)
def _format_epoch(epoch: float) -> str:
    """A container's start or finish, formatted once: every sync renders it again."""
    return format_time(datetime.fromtimestamp(epoch, UTC))


@dataclass(frozen=True, slots=True)
class ContainerView:
    """What the worker knows about one container of the spec."""

    name: str
    image: str
    current: ContainerRecord | None = None
    """The latest instance, running or exited."""
    previous: ContainerRecord | None = None
    """The instance before it (its end is ``lastState`` while ``current`` runs)."""
    waiting: tuple[str, str | None] | None = None
    """(reason, message) when the container is not running and should be (or is not yet)."""
    ready: bool = False
    started: bool = False


def _terminated(record: ContainerRecord) -> Obj:
    out: Obj = {
        "exitCode": record.exit_code if record.exit_code is not None else 0,
        "reason": record.reason or ("Completed" if not record.exit_code else "Error"),
        "startedAt": _time(record.started_at),
        "finishedAt": _time(record.finished_at),
        "containerID": record.container_id,
    }
    if record.signal:
        out["signal"] = record.signal
    if record.message:
        out["message"] = record.message
    return out


def container_status(view: ContainerView) -> Obj:
    cur, prev = view.current, view.previous
    last: Obj = {}
    if view.waiting is not None:
        reason, message = view.waiting
        waiting: Obj = {"reason": reason}
        if message:
            waiting["message"] = message
        state: Obj = {"waiting": waiting}
        if cur is not None and not cur.running:
            last = {"terminated": _terminated(cur)}
        elif prev is not None:
            last = {"terminated": _terminated(prev)}
    elif cur is not None and cur.running:
        state = {"running": {"startedAt": _time(cur.started_at)}}
        if prev is not None:
            last = {"terminated": _terminated(prev)}
    elif cur is not None:
        state = {"terminated": _terminated(cur)}
        if prev is not None:
            last = {"terminated": _terminated(prev)}
    else:
        state = {"waiting": {"reason": "ContainerCreating"}}
    running = cur is not None and cur.running and view.waiting is None
    out: Obj = {
        "name": view.name,
        "state": state,
        "lastState": last,
        "ready": bool(running and view.ready),
        "restartCount": cur.attempt if cur is not None else 0,
        "image": view.image,
        "imageID": cur.image_id if cur is not None else "",
        "started": bool(running and view.started),
    }
    if cur is not None:
        out["containerID"] = cur.container_id
    return out


def pod_phase(
    statuses: Sequence[Mapping[str, Any]],
    *,
    restart_policy: str,
    initialized: bool = True,
    terminal: bool = False,
) -> str:
    """The kubelet's phase rule over rendered container statuses.

    ``terminal`` is set once the kubelet has stopped every container for good (the pod is being
    deleted): the pod then ends Succeeded if every container exited 0, else Failed, whatever
    its restart policy — as kubelets since 1.27 report.
    """
    running = waiting = stopped = succeeded = 0
    for st in statuses:
        state = st.get("state") or {}
        if "running" in state:
            running += 1
        elif "terminated" in state:
            stopped += 1
            if state["terminated"].get("exitCode") == 0:
                succeeded += 1
        elif "waiting" in state:
            last = (st.get("lastState") or {}).get("terminated")
            if last is not None and not terminal:
                stopped += 1
            else:
                waiting += 1
    if terminal and running == 0:
        return "Succeeded" if stopped and stopped == succeeded and not waiting else "Failed"
    if not initialized:
        return "Pending"
    if waiting > 0:
        return "Pending"
    if running > 0:
        return "Running"
    if stopped > 0:
        if restart_policy == "Always":
            return "Running"
        if stopped == succeeded:
            return "Succeeded"
        if restart_policy == "Never":
            return "Failed"
        return "Running"
    return "Pending"


def _condition(
    type_: str, ok: bool, *, reason: str | None = None, message: str | None = None
) -> Obj:
    out: Obj = {"type": type_, "status": "True" if ok else "False"}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


def build_pod_status(
    *,
    old: Mapping[str, Any],
    views: Iterable[ContainerView],
    init_views: Iterable[ContainerView] = (),
    restart_policy: str,
    pod_ip: str | None,
    host_ip: str,
    sandbox_ready: bool,
    terminal: bool = False,
    start_time: str | None = None,
    failed: tuple[str, str] | None = None,
) -> Obj:
    """The pod's new ``status``; ``old`` is the status currently in the API; ``failed``
    (reason, message) when the kubelet ended the pod itself: phase Failed whatever the
    containers say."""
    statuses = [container_status(v) for v in views]
    init_list = list(init_views)
    init_statuses = [container_status(v) for v in init_list]
    pending_init = [
        s["name"]
        for s in init_statuses
        if (s["state"].get("terminated") or {}).get("exitCode") != 0
        or "terminated" not in s["state"]
    ]
    initialized = not pending_init
    phase = pod_phase(
        statuses, restart_policy=restart_policy, initialized=initialized, terminal=terminal
    )
    if not initialized and restart_policy == "Never":
        for s in init_statuses:
            term = s["state"].get("terminated")
            if term is not None and term.get("exitCode") != 0:
                phase = "Failed"
    if failed is not None:
        phase = "Failed"
    unready = [s["name"] for s in statuses if not s["ready"]]
    completed = phase == "Succeeded"

    conditions: list[Obj] = [_condition("PodReadyToStartContainers", sandbox_ready)]
    if completed:
        conditions.append(_condition("Initialized", True, reason="PodCompleted"))
    elif initialized:
        conditions.append(_condition("Initialized", True))
    else:
        conditions.append(
            _condition(
                "Initialized",
                False,
                reason="ContainersNotInitialized",
                message=f"containers with incomplete status: [{' '.join(pending_init)}]",
            )
        )
    if completed:
        ready = [_condition(t, False, reason="PodCompleted") for t in ("Ready", "ContainersReady")]
    elif unready or not initialized:
        names = unready if initialized else [s["name"] for s in statuses]
        message = f"containers with unready status: [{' '.join(names)}]"
        if not initialized:
            message = f"containers with incomplete status: [{' '.join(pending_init)}]"
        reason = "ContainersNotReady" if initialized else "ContainersNotInitialized"
        ready = [
            _condition("Ready", False, reason=reason, message=message),
            _condition("ContainersReady", False, reason=reason, message=message),
        ]
    else:
        ready = [_condition("Ready", True), _condition("ContainersReady", True)]
    conditions.extend(ready)

    old_conditions = {c.get("type"): c for c in old.get("conditions") or []}
    if "PodScheduled" not in old_conditions:
        conditions.append(_condition("PodScheduled", True))
    now = now_time()
    for cond in conditions:
        before = old_conditions.get(cond["type"])
        if before is not None and before.get("status") == cond["status"]:
            cond["lastTransitionTime"] = before.get("lastTransitionTime") or now
        else:
            cond["lastTransitionTime"] = now
    kept = [c for t, c in old_conditions.items() if t not in KUBELET_CONDITIONS]
    status: Obj = {
        "phase": phase,
        "conditions": conditions + kept,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": old.get("startTime") or start_time or now,
        "containerStatuses": statuses,
    }
    if failed is not None:
        status["reason"], status["message"] = failed
    if pod_ip:
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    for carried in ("qosClass", "nominatedNodeName"):
        if old.get(carried):
            status[carried] = old[carried]
    return status
