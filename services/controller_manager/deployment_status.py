"""A Deployment's status: what ``kubectl rollout status`` and ``kubectl get deploy`` read.

Why a module of its own: the status is computed from the ReplicaSets alone, and its
Progressing condition carries the rollout's clock (``progressDeadlineSeconds``); keeping that
apart from the scaling decisions lets each be read on its own, as
``pkg/controller/deployment/sync.go`` (``calculateStatus``, ``syncRolloutStatus``) and
``progress.go`` keep them.

What it owns:

* ``calculate_status`` — replicas, updatedReplicas, readyReplicas, availableReplicas,
  unavailableReplicas, observedGeneration (zero values omitted, as Kubernetes writes them), the
  kept ``collisionCount`` and the ``Available`` condition (MinimumReplicasAvailable /
  MinimumReplicasUnavailable);
* the ``Progressing`` condition of a rollout (NewReplicaSetAvailable, ReplicaSetUpdated,
  ProgressDeadlineExceeded) and of a pause (DeploymentPaused / DeploymentResumed), with
  Kubernetes' messages;
* ``DeploymentStatusWriter`` — writes the status to ``deployments/status`` only when it changed,
  as a compare-and-swap on the cached resourceVersion, and says when to look again so a stuck
  rollout is marked ProgressDeadlineExceeded on time.

What it does not guarantee: the status is as fresh as the informer caches it was computed from;
a write on a stale cache fails with Conflict and the caller retries. ``ReplicaFailure``
conditions are not copied from ReplicaSets.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from api.registry import REGISTRY
from client.rest import ApiClient
from services.controller_manager import rollout as ro

__all__ = ["DeploymentStatusWriter", "calculate_status", "requeue_after"]

Obj = dict[str, Any]

DEPLOYMENTS = REGISTRY.require("apps", "Deployment")


def _total(field: str, of: list[Obj]) -> int:
    return sum(int((rs.get("status") or {}).get(field) or 0) for rs in of)


def calculate_status(d: Obj, all_rss: list[Obj | None], *, new_rs: Obj | None) -> Obj:
    """The status the ReplicaSets imply, with the ``Available`` condition (``calculateStatus``)."""
    rss = [rs for rs in all_rss if rs is not None]
    available = ro.available_replicas(rss)
    replicas = ro.spec_replicas(d)
    old = d.get("status") or {}
    status: Obj = {
        "observedGeneration": d["metadata"].get("generation"),
        "replicas": _total("replicas", rss),
        "updatedReplicas": _total("replicas", [new_rs] if new_rs is not None else []),
        "readyReplicas": _total("readyReplicas", rss),
        "availableReplicas": available,
        "unavailableReplicas": max(0, replicas - available),
    }
    status = {k: v for k, v in status.items() if v}  # omitempty, as Kubernetes writes them
    if old.get("collisionCount") is not None:
        status["collisionCount"] = old["collisionCount"]
    if old.get("conditions"):
        status["conditions"] = copy.deepcopy(old["conditions"])
    if available >= replicas - ro.max_unavailable(d):
        ro.set_condition(status, ro.new_condition(
            "Available", "True", ro.MIN_AVAILABLE, "Deployment has minimum availability."))  # fmt: skip
    else:
        ro.set_condition(status, ro.new_condition(
            "Available", "False", ro.MIN_UNAVAILABLE, "Deployment does not have minimum availability."))  # fmt: skip
    return status


def _message(rs_name: str | None, what: str) -> str:
    """``ReplicaSet "web-x" is progressing.``, or of the Deployment when there is no new one."""
    return f'ReplicaSet "{rs_name}" {what}' if rs_name else f"Deployment {what}"


def _set_progressing(d: Obj, status: Obj, *, new_rs: Obj | None) -> None:
    """The rollout's ``Progressing`` condition (``syncRolloutStatus``), written into ``status``."""
    deadline = (d.get("spec") or {}).get("progressDeadlineSeconds")
    if deadline is None:
        ro.remove_condition(status, "Progressing")
    current = ro.get_condition(d.get("status") or {}, "Progressing")
    complete = (
        int(status.get("replicas") or 0) == int(status.get("updatedReplicas") or 0)
        and current is not None
        and current.get("reason") == ro.NEW_RS_AVAILABLE
    )
    if deadline is None or complete:
        return
    rs_name = (new_rs or {}).get("metadata", {}).get("name")
    if ro.deployment_complete(d, status):
        msg = _message(rs_name, "has successfully progressed.")
        ro.set_condition(status, ro.new_condition("Progressing", "True", ro.NEW_RS_AVAILABLE, msg))
    elif ro.deployment_progressing(d, status):
        msg = _message(rs_name, "is progressing.")
        cond = ro.new_condition("Progressing", "True", ro.RS_UPDATED, msg)
        if current is not None:
            if current.get("status") == "True":
                cond["lastTransitionTime"] = current.get("lastTransitionTime")
            ro.remove_condition(status, "Progressing")
        ro.set_condition(status, cond)
    elif ro.deployment_timed_out(d, status):
        msg = _message(rs_name, "has timed out progressing.")
        ro.set_condition(status, ro.new_condition("Progressing", "False", ro.TIMED_OUT, msg))


def requeue_after(d: Obj, status: Obj) -> float | None:
    """Come back when the progress deadline would pass, if the rollout is still going."""
    deadline = (d.get("spec") or {}).get("progressDeadlineSeconds")
    cond = ro.get_condition(status, "Progressing")
    if (
        deadline is None
        or cond is None
        or cond.get("reason") in (ro.NEW_RS_AVAILABLE, ro.TIMED_OUT)
    ):
        return None
    if ro.deployment_complete(d, status) or not cond.get("lastUpdateTime"):
        return None
    since = datetime.fromisoformat(str(cond["lastUpdateTime"]).replace("Z", "+00:00"))
    remaining = since.timestamp() + int(deadline) - datetime.now(UTC).timestamp()
    return max(1.0, remaining + 1.0)


class DeploymentStatusWriter:
    """Writes a Deployment's status through ``deployments/status`` when it changed."""

    def __init__(self, *, client: ApiClient) -> None:
        self.client = client

    async def sync(self, d: Obj, all_rss: list[Obj | None], *, new_rs: Obj | None) -> None:
        """Status without the rollout's clock: a paused, resized or deleted Deployment."""
        await self._write(d, calculate_status(d, all_rss, new_rs=new_rs))

    async def sync_rollout(
        self, d: Obj, all_rss: list[Obj | None], *, new_rs: Obj | None
    ) -> float | None:
        """Status of a rolling Deployment; the seconds after which to look again, if any."""
        status = calculate_status(d, all_rss, new_rs=new_rs)
        _set_progressing(d, status, new_rs=new_rs)
        await self._write(d, status)
        return requeue_after(d, status)

    async def check_paused_conditions(self, d: Obj) -> None:
        """Mark a pause or a resume in ``Progressing`` (only with a progress deadline)."""
        spec = d.get("spec") or {}
        if spec.get("progressDeadlineSeconds") is None:
            return
        status = d.setdefault("status", {})
        cond = ro.get_condition(status, "Progressing")
        if cond is not None and cond.get("reason") == ro.TIMED_OUT:
            return
        paused_cond = cond is not None and cond.get("reason") == ro.PAUSED
        if spec.get("paused") and not paused_cond:
            ro.set_condition(
                status,
                ro.new_condition("Progressing", "Unknown", ro.PAUSED, "Deployment is paused"),
            )
        elif not spec.get("paused") and paused_cond:
            ro.set_condition(
                status,
                ro.new_condition("Progressing", "Unknown", ro.RESUMED, "Deployment is resumed"),
            )
        else:
            return
        written = await self.client.update_status(DEPLOYMENTS, d)
        d["metadata"]["resourceVersion"] = written["metadata"]["resourceVersion"]

    async def _write(self, d: Obj, status: Obj) -> None:
        if status == (d.get("status") or {}):
            return
        d["status"] = status
        written = await self.client.update_status(DEPLOYMENTS, d)  # CAS on the cached version
        d["metadata"]["resourceVersion"] = written["metadata"]["resourceVersion"]
