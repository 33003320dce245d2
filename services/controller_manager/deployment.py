"""The Deployment controller: rolls pods from one template to the next through ReplicaSets.

Why: a Deployment never touches pods. It owns one ReplicaSet per pod template it has had —
named ``<deployment>-<pod-template-hash>``, selecting and labelling its pods with that hash —
and moves replicas between them; the ReplicaSet controller does the pods. Following
``pkg/controller/deployment``, one sync of a Deployment:

* **claims** the ReplicaSets the selector matches (adopt / release, as for pods);
* finds the **new** ReplicaSet and the **old** ones, keeping revisions
  (``deployment_history.py``: new vs old, revisions for ``kubectl rollout undo``, pruning
  beyond ``revisionHistoryLimit``);
* on a **scaling event** (``replicas`` changed, seen through the ``desired-replicas``
  annotation) or a **paused** Deployment only resizes, proportionally
  (``deployment_scaling.py``), and never starts a rollout;
* otherwise rolls by its strategy, **RollingUpdate** or **Recreate** (``rollout_strategy.py``);
* writes the **status** and its conditions, what ``kubectl rollout status`` reads
  (``deployment_status.py``).

This module owns the work queue and that order of steps; ``deployment_triggers.py`` decides which
Deployment a ReplicaSet or pod event concerns, ``rollout.py`` holds the pure arithmetic.

Every decision is made from the informer caches and written as a compare-and-swap against the
cached resourceVersion: a decision taken on a stale cache fails with Conflict and is retried
from a fresher one. Events (component ``deployment-controller``): ``ScalingReplicaSet``
"Scaled up replica set NAME from A to B", ``SelectingAll``.

Limits: the deprecated ``rollbackTo`` API is not served; ``ReplicaFailure`` conditions are not
copied from ReplicaSets; pods are not consulted for ranking across ReplicaSets.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from api.errors import Conflict, NotFound
from api.registry import REGISTRY
from api.selectors import LabelSelector, label_selector_from_dict
from client.cache import object_key, split_key
from client.controller import Controller
from client.events import EventRecorder
from client.rest import ApiClient
from client.workqueue import WorkQueue
from services.controller_manager import rollout as ro
from services.controller_manager.controller_ref import OwnerGone, claim, is_being_deleted
from services.controller_manager.deployment_history import RevisionHistory
from services.controller_manager.deployment_scaling import ReplicaSetScaler
from services.controller_manager.deployment_status import DeploymentStatusWriter
from services.controller_manager.deployment_triggers import DeploymentTriggers
from services.controller_manager.informers import SharedInformers
from services.controller_manager.rollout_strategy import Recreate, RollingUpdate

__all__ = ["DeploymentController"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]


PODS = REGISTRY.require("", "Pod")
RSS = REGISTRY.require("apps", "ReplicaSet")
DEPLOYMENTS = REGISTRY.require("apps", "Deployment")


def _is_scaling_event(d: Obj, all_rss: list[Obj | None]) -> bool:
    """``replicas`` differs from what an active ReplicaSet was last sized for."""
    replicas = ro.spec_replicas(d)
    for rs in ro.active(all_rss):
        desired = ro.desired_replicas_annotation(rs)
        if desired is not None and desired != replicas:
            return True
    return False


class DeploymentController:
    def __init__(
        self,
        *,
        client: ApiClient,
        informers: SharedInformers,
        recorder: EventRecorder,
        workers: int = 5,
    ) -> None:
        self.name = "deployment"
        self.client = client
        self.recorder = recorder
        self.workers = workers
        self.deployments = informers.get(DEPLOYMENTS)
        self.rss = informers.get(RSS)
        self.pods = informers.get(PODS)
        self.queue: WorkQueue[str] = WorkQueue(name="deployment")
        self.history = RevisionHistory(client=client, recorder=recorder)
        self.scaler = ReplicaSetScaler(client=client, recorder=recorder)
        self.status = DeploymentStatusWriter(client=client)
        self.rolling = RollingUpdate(history=self.history, scaler=self.scaler, status=self.status)
        self.recreate = Recreate(
            history=self.history, scaler=self.scaler, status=self.status, pods=self.pods
        )
        triggers = DeploymentTriggers(
            deployments=self.deployments, rss=self.rss, enqueue=self._enqueue
        )
        self.deployments.add_handler(on_change=self._enqueue)
        self.rss.add_handler(
            on_add=triggers.rs_added, on_update=triggers.rs_updated, on_delete=triggers.rs_deleted
        )
        self.pods.add_handler(on_delete=triggers.pod_deleted)

    async def run(self) -> None:
        await Controller(
            name=self.name,
            queue=self.queue,
            reconcile=self.sync,
            workers=self.workers,
            wait_for=[self.deployments, self.rss, self.pods],
        ).run()

    def _enqueue(self, d: Obj) -> None:
        self.queue.add(object_key(d))

    async def sync(self, key: str) -> float | None:
        cached = self.deployments.get(key)
        if cached is None:
            return None
        d = copy.deepcopy(cached)
        try:
            return await self._sync(d)
        except Conflict as exc:
            # decided on a stale cache: try again once the informer has caught up
            log.debug("deployment %s: %s; will retry from a fresher cache", key, exc.message)
            self.queue.add_rate_limited(key)
            return None

    async def _sync(self, d: Obj) -> float | None:
        spec = d.get("spec") or {}
        selector = label_selector_from_dict(spec.get("selector"))
        if selector.empty:
            await self._refuse_empty_selector(d)
            return None
        try:
            rs_list = await self._claim(d, selector)
        except OwnerGone:
            return None
        if is_being_deleted(d):
            new_rs, old_rss = await self.history.new_and_old(d, rs_list)
            await self.status.sync(d, [*old_rss, new_rs], new_rs=new_rs)
            return None
        await self.status.check_paused_conditions(d)
        new_rs, old_rss = await self.history.new_and_old(d, rs_list)
        if spec.get("paused") or _is_scaling_event(d, [*old_rss, new_rs]):
            await self.scaler.resize(d, new_rs=new_rs, old_rss=old_rss)
            if spec.get("paused"):
                await self.history.cleanup(d, old_rss)
            await self.status.sync(d, [*old_rss, new_rs], new_rs=new_rs)
            return None
        strategy = self.recreate if ro.is_recreate(d) else self.rolling
        return await strategy.rollout(d, new_rs=new_rs, old_rss=old_rss)

    async def _refuse_empty_selector(self, d: Obj) -> None:
        self.recorder.event(
            d, "Warning", "SelectingAll",
            "This deployment is selecting all pods. A non-empty selector is required.",
        )  # fmt: skip
        if (d.get("status") or {}).get("observedGeneration") != d["metadata"].get("generation"):
            d.setdefault("status", {})["observedGeneration"] = d["metadata"].get("generation")
            await self.client.update_status(DEPLOYMENTS, d)

    async def _claim(self, d: Obj, selector: LabelSelector) -> list[Obj]:
        """Copies of the ReplicaSets ``d`` controls, after adopting and releasing."""
        namespace, _ = split_key(object_key(d))
        rs_list = await claim(
            self.client,
            owner=d,
            owner_rt=DEPLOYMENTS,
            child_rt=RSS,
            selector=selector,
            candidates=self.rss.by_index("namespace", namespace or ""),
            can_adopt=lambda: self._can_adopt(d),
        )
        return [copy.deepcopy(rs) for rs in rs_list]

    async def _can_adopt(self, d: Obj) -> None:
        meta = d["metadata"]
        try:
            fresh = await self.client.get(DEPLOYMENTS, meta["name"], namespace=meta["namespace"])
        except NotFound:
            raise OwnerGone(meta["name"]) from None
        if fresh["metadata"].get("uid") != meta.get("uid") or is_being_deleted(fresh):
            raise OwnerGone(meta["name"])
