"""The Deployment controller: rolls pods from one template to the next through ReplicaSets.

Why: a Deployment never touches pods. It owns one ReplicaSet per pod template it has had —
named ``<deployment>-<pod-template-hash>``, selecting and labelling its pods with that hash —
and moves replicas between them; the ReplicaSet controller does the pods. Following
``pkg/controller/deployment``:

* **Claim** the ReplicaSets the selector matches (adopt / release, as for pods).
* The **new** ReplicaSet is the oldest one whose template equals the Deployment's (ignoring the
  hash label); all others are **old**. Its ``deployment.kubernetes.io/revision`` is one more than
  the highest old revision — which is why ``kubectl rollout undo`` (a patch of the Deployment
  with an old ReplicaSet's template and annotations) revives that ReplicaSet under a new
  revision, keeping the old number in ``revision-history``. The Deployment's own revision
  annotation follows its new ReplicaSet. Deployment annotations (but ``ANNOTATIONS_TO_SKIP``)
  are copied to the new ReplicaSet, ``change-cause`` included.
* **RollingUpdate**: grow the new ReplicaSet while all ReplicaSets together stay within
  ``replicas + maxSurge``; shrink old ones (unhealthy pods first) while the available pods stay
  at least ``replicas - maxUnavailable`` (counted conservatively: see
  ``rollout.available_replicas``). **Recreate**: scale every old ReplicaSet to 0, wait until no
  old pod is left running, then scale the new one up.
* A **scaling event** (``replicas`` changed, seen through the ``desired-replicas`` annotation)
  or a **paused** Deployment only resizes (proportionally, largest first, leftovers to the
  largest) and never starts a rollout.
* **Status**: replicas, updatedReplicas, readyReplicas, availableReplicas,
  unavailableReplicas, observedGeneration; conditions ``Available``
  (MinimumReplicasAvailable / MinimumReplicasUnavailable) and ``Progressing``
  (NewReplicaSetCreated, FoundNewReplicaSet, ReplicaSetUpdated, NewReplicaSetAvailable,
  ProgressDeadlineExceeded) with Kubernetes' messages — what ``kubectl rollout status`` reads.
* **History**: old ReplicaSets scaled to zero beyond ``revisionHistoryLimit`` are deleted,
  oldest revision first.

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
from datetime import UTC, datetime
from typing import Any

from api.errors import AlreadyExists, Conflict, NotFound
from api.registry import REGISTRY
from api.selectors import label_selector_from_dict
from client.cache import object_key, split_key
from client.controller import Controller
from client.events import EventRecorder
from client.rest import ApiClient
from client.workqueue import WorkQueue
from services.controller_manager import rollout as ro
from services.controller_manager.controller_ref import (
    OwnerGone,
    claim,
    controller_ref,
    is_being_deleted,
    labels_of,
    new_controller_ref,
    resolve_controller_ref,
)
from services.controller_manager.informers import SharedInformers

__all__ = ["DeploymentController"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]


PODS = REGISTRY.require("", "Pod")
RSS = REGISTRY.require("apps", "ReplicaSet")
DEPLOYMENTS = REGISTRY.require("apps", "Deployment")


def _annotations(obj: Obj) -> dict[str, str]:
    return obj.setdefault("metadata", {}).setdefault("annotations", {})


def _created(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (str(meta.get("creationTimestamp") or ""), str(meta.get("name") or ""))


def _active(rss: list[Obj | None]) -> list[Obj]:
    return [rs for rs in rss if rs is not None and ro.spec_replicas(rs) > 0]


def _is_recreate(d: Obj) -> bool:
    return ((d.get("spec") or {}).get("strategy") or {}).get("type") == "Recreate"


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
        self.deployments.add_handler(
            on_add=self._enqueue, on_update=lambda _o, n: self._enqueue(n), on_delete=self._enqueue
        )
        self.rss.add_handler(
            on_add=self._rs_added, on_update=self._rs_updated, on_delete=self._rs_deleted
        )
        self.pods.add_handler(on_delete=self._pod_deleted)

    async def run(self) -> None:
        await Controller(
            name=self.name,
            queue=self.queue,
            reconcile=self.sync,
            workers=self.workers,
            wait_for=[self.deployments, self.rss, self.pods],
        ).run()

    # -- handlers -------------------------------------------------------------------------

    def _enqueue(self, d: Obj) -> None:
        self.queue.add(object_key(d))

    def _resolve(self, namespace: str, ref: dict[str, Any] | None) -> Obj | None:
        return resolve_controller_ref(
            ref, namespace=namespace, rt=DEPLOYMENTS, owners=self.deployments
        )

    def _matching(self, rs: Obj) -> list[Obj]:
        namespace = rs["metadata"].get("namespace") or ""
        labels = labels_of(rs)
        out = []
        for d in self.deployments.by_index("namespace", namespace):
            selector = label_selector_from_dict((d.get("spec") or {}).get("selector"))
            if not selector.empty and selector.matches(labels):
                out.append(d)
        return out

    def _rs_added(self, rs: Obj) -> None:
        namespace = rs["metadata"].get("namespace") or ""
        ref = controller_ref(rs)
        if ref is not None:
            d = self._resolve(namespace, ref)
            if d is not None:
                self._enqueue(d)
            return
        for d in self._matching(rs):
            self._enqueue(d)

    def _rs_updated(self, old: Obj, new: Obj) -> None:
        if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
            return
        namespace = new["metadata"].get("namespace") or ""
        cur, prev = controller_ref(new), controller_ref(old)
        changed = (cur or {}).get("uid") != (prev or {}).get("uid")
        if changed and prev is not None:
            d = self._resolve(namespace, prev)
            if d is not None:
                self._enqueue(d)
        if cur is not None:
            d = self._resolve(namespace, cur)
            if d is not None:
                self._enqueue(d)
            return
        if changed or labels_of(old) != labels_of(new):
            for d in self._matching(new):
                self._enqueue(d)

    def _rs_deleted(self, rs: Obj) -> None:
        d = self._resolve(rs["metadata"].get("namespace") or "", controller_ref(rs))
        if d is not None:
            self._enqueue(d)

    def _pod_deleted(self, pod: Obj) -> None:
        """Recreate waits for the old pods to be gone: a pod deletion may unblock it."""
        namespace = pod["metadata"].get("namespace") or ""
        ref = controller_ref(pod)
        if ref is None or ref.get("kind") != "ReplicaSet":
            return
        rs = self.rss.get(f"{namespace}/{ref.get('name')}")
        if rs is None:
            return
        d = self._resolve(namespace, controller_ref(rs))
        if d is not None and _is_recreate(d):
            self._enqueue(d)

    # -- sync -----------------------------------------------------------------------------

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
            self.recorder.event(
                d, "Warning", "SelectingAll",
                "This deployment is selecting all pods. A non-empty selector is required.",
            )  # fmt: skip
            if (d.get("status") or {}).get("observedGeneration") != d["metadata"].get("generation"):
                d.setdefault("status", {})["observedGeneration"] = d["metadata"].get("generation")
                await self.client.update_status(DEPLOYMENTS, d)
            return None
        namespace, _ = split_key(object_key(d))
        try:
            rs_list = await claim(
                self.client,
                owner=d,
                owner_rt=DEPLOYMENTS,
                child_rt=RSS,
                selector=selector,
                candidates=self.rss.by_index("namespace", namespace or ""),
                can_adopt=lambda: self._can_adopt(d),
            )
        except OwnerGone:
            return None
        rs_list = [copy.deepcopy(rs) for rs in rs_list]
        if is_being_deleted(d):
            new_rs, old_rss = await self._get_all(d, rs_list, create=False)
            await self._sync_status(d, [*old_rss, new_rs], new_rs)
            return None
        await self._check_paused_conditions(d)
        new_rs, old_rss = await self._get_all(d, rs_list, create=False)
        if spec.get("paused") or self._is_scaling_event(d, [*old_rss, new_rs]):
            await self._scale(d, new_rs, old_rss)
            if spec.get("paused"):
                await self._cleanup(d, old_rss)
            await self._sync_status(d, [*old_rss, new_rs], new_rs)
            return None
        if _is_recreate(d):
            return await self._rollout_recreate(d, new_rs, old_rss, rs_list)
        return await self._rollout_rolling(d, new_rs, old_rss)

    async def _can_adopt(self, d: Obj) -> None:
        meta = d["metadata"]
        try:
            fresh = await self.client.get(DEPLOYMENTS, meta["name"], namespace=meta["namespace"])
        except NotFound:
            raise OwnerGone(meta["name"]) from None
        if fresh["metadata"].get("uid") != meta.get("uid") or is_being_deleted(fresh):
            raise OwnerGone(meta["name"])

    def _is_scaling_event(self, d: Obj, all_rss: list[Obj | None]) -> bool:
        replicas = ro.spec_replicas(d)
        for rs in _active(all_rss):
            desired = ro.desired_replicas_annotation(rs)
            if desired is not None and desired != replicas:
                return True
        return False

    async def _check_paused_conditions(self, d: Obj) -> None:
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

    # -- new and old ReplicaSets ----------------------------------------------------------

    async def _get_all(
        self, d: Obj, rs_list: list[Obj], *, create: bool
    ) -> tuple[Obj | None, list[Obj]]:
        template = (d.get("spec") or {}).get("template")
        same = sorted(
            (
                rs
                for rs in rs_list
                if ro.equal_ignoring_hash((rs.get("spec") or {}).get("template"), template)
            ),
            key=_created,
        )
        existing = same[0] if same else None
        old_rss = [rs for rs in rs_list if rs is not existing]
        new_rs = await self._new_replica_set(d, existing, old_rss, create=create)
        return new_rs, old_rss

    def _set_new_rs_annotations(self, d: Obj, rs: Obj, new_revision: int, *, exists: bool) -> bool:
        changed = False
        annotations = _annotations(rs)
        for k, v in (d["metadata"].get("annotations") or {}).items():
            if k in ro.ANNOTATIONS_TO_SKIP or annotations.get(k) == v:
                continue
            annotations[k] = v
            changed = True
        old = annotations.get(ro.REVISION)
        try:
            old_revision = int(old) if old else 0
        except ValueError:
            return changed
        if old_revision < new_revision:
            annotations[ro.REVISION] = str(new_revision)
            changed = True
            if old:
                history = annotations.get(ro.REVISION_HISTORY)
                annotations[ro.REVISION_HISTORY] = f"{history},{old}" if history else old
        if not exists:
            changed |= self._set_replicas_annotations(d, rs)
        return changed

    @staticmethod
    def _set_replicas_annotations(d: Obj, rs: Obj) -> bool:
        annotations = _annotations(rs)
        desired = str(ro.spec_replicas(d))
        most = str(ro.spec_replicas(d) + ro.max_surge(d))
        if (
            annotations.get(ro.DESIRED_REPLICAS) == desired
            and annotations.get(ro.MAX_REPLICAS) == most
        ):
            return False
        annotations[ro.DESIRED_REPLICAS] = desired
        annotations[ro.MAX_REPLICAS] = most
        return True

    async def _set_deployment_revision(self, d: Obj, revision: str) -> None:
        if (d["metadata"].get("annotations") or {}).get(ro.REVISION) == revision:
            return
        _annotations(d)[ro.REVISION] = revision
        written = await self.client.update(DEPLOYMENTS, d)
        d["metadata"] = written["metadata"]

    async def _new_replica_set(
        self, d: Obj, existing: Obj | None, old_rss: list[Obj], *, create: bool
    ) -> Obj | None:
        new_revision = max((ro.revision(rs) for rs in old_rss), default=0) + 1
        spec = d.get("spec") or {}
        progress_deadline = spec.get("progressDeadlineSeconds") is not None
        status = d.setdefault("status", {})
        if existing is not None:
            rs = existing
            changed = self._set_new_rs_annotations(d, rs, new_revision, exists=True)
            min_ready = spec.get("minReadySeconds") or 0
            if changed or ((rs.get("spec") or {}).get("minReadySeconds") or 0) != min_ready:
                rs["spec"]["minReadySeconds"] = min_ready
                rs = await self.client.update(RSS, rs)
            await self._set_deployment_revision(
                d, _annotations(rs).get(ro.REVISION, str(new_revision))
            )
            if progress_deadline and ro.get_condition(status, "Progressing") is None:
                ro.set_condition(status, ro.new_condition(
                    "Progressing", "True", ro.FOUND_NEW_RS,
                    f'Found new replica set "{rs["metadata"]["name"]}"'))  # fmt: skip
            return rs
        if not create:
            return None
        meta = d["metadata"]
        template = copy.deepcopy(spec.get("template") or {})
        pod_hash = ro.pod_template_hash(template, status.get("collisionCount"))
        template.setdefault("metadata", {}).setdefault("labels", {})[ro.HASH_LABEL] = pod_hash
        selector = copy.deepcopy(spec.get("selector") or {})
        selector.setdefault("matchLabels", {})[ro.HASH_LABEL] = pod_hash
        name = f"{meta['name']}-{pod_hash}"
        rs = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": name,
                "namespace": meta["namespace"],
                "labels": dict(template["metadata"]["labels"]),
                "ownerReferences": [new_controller_ref(d, DEPLOYMENTS)],
            },
            "spec": {
                "replicas": 0,
                "minReadySeconds": spec.get("minReadySeconds") or 0,
                "selector": selector,
                "template": template,
            },
        }
        rs["spec"]["replicas"] = ro.new_rs_new_replicas(d, [*old_rss, rs], rs)
        self._set_new_rs_annotations(d, rs, new_revision, exists=False)
        try:
            created = await self.client.create(RSS, rs)
        except AlreadyExists:
            found = await self.client.get(RSS, name, namespace=meta["namespace"])
            ref = controller_ref(found)
            if (
                ref is not None
                and ref.get("uid") == meta.get("uid")
                and ro.equal_ignoring_hash(
                    (found.get("spec") or {}).get("template"), spec.get("template")
                )
            ):
                return found  # we created it before and the cache has not shown it yet
            status["collisionCount"] = int(status.get("collisionCount") or 0) + 1
            await self.client.update_status(DEPLOYMENTS, d)
            raise Conflict(
                f'hash collision for replica set "{name}"; retrying with a new hash'
            ) from None
        replicas = ro.spec_replicas(created)
        log.info("deployment %s/%s: created replica set %s with %d replicas",
                 meta["namespace"], meta["name"], name, replicas)  # fmt: skip
        if replicas > 0:
            self.recorder.event(
                d,
                "Normal",
                "ScalingReplicaSet",
                f"Scaled up replica set {name} from 0 to {replicas}",
            )
        await self._set_deployment_revision(d, str(new_revision))
        if progress_deadline:
            ro.set_condition(status, ro.new_condition(
                "Progressing", "True", ro.NEW_RS_CREATED, f'Created new replica set "{name}"'))  # fmt: skip
        return created

    # -- scaling --------------------------------------------------------------------------

    async def _scale_rs(
        self, d: Obj, rs: Obj, replicas: int, *, operation: str | None = None
    ) -> tuple[bool, Obj]:
        current = ro.spec_replicas(rs)
        annotations_changed = self._set_replicas_annotations(d, copy.deepcopy(rs))
        if current == replicas and not annotations_changed:
            return False, rs
        updated = copy.deepcopy(rs)
        updated["spec"]["replicas"] = replicas
        self._set_replicas_annotations(d, updated)
        written = await self.client.update(RSS, updated)  # CAS on the cached resourceVersion
        if current != replicas:
            op = operation or ("up" if replicas > current else "down")
            name = rs["metadata"]["name"]
            self.recorder.event(
                d,
                "Normal",
                "ScalingReplicaSet",
                f"Scaled {op} replica set {name} from {current} to {replicas}",
            )
            log.info("deployment %s: scaled %s replica set %s from %d to %d",
                     object_key(d), op, name, current, replicas)  # fmt: skip
        return current != replicas, written

    async def _scale(self, d: Obj, new_rs: Obj | None, old_rss: list[Obj]) -> None:
        """Resize without rolling (``scale`` in Kubernetes): a scaling event or a paused rollout."""
        replicas = ro.spec_replicas(d)
        olds = sorted(old_rss, key=_created, reverse=True)
        active = _active([*olds, new_rs])
        if len(active) <= 1 and (new_rs is not None or olds):
            target = active[0] if active else (new_rs if new_rs is not None else olds[0])
            if (
                ro.spec_replicas(target) != replicas
                or ro.desired_replicas_annotation(target) != replicas
            ):
                await self._scale_rs(d, target, replicas)
            return
        if new_rs is not None and self._saturated(d, new_rs):
            for old in _active(olds):
                await self._scale_rs(d, old, 0)
            return
        if _is_recreate(d):
            return
        all_replicas = sum(ro.spec_replicas(rs) for rs in active)
        allowed = replicas + ro.max_surge(d) if replicas > 0 else 0
        to_add = allowed - all_replicas
        # larger first; among equals newer first when growing, older first when shrinking
        active.sort(key=_created, reverse=to_add > 0)
        active.sort(key=lambda rs: -ro.spec_replicas(rs))
        added = 0
        sizes: dict[str, int] = {}
        for rs in active:
            if to_add != 0:
                proportion = self._proportion(d, rs, to_add, added)
                sizes[rs["metadata"]["name"]] = ro.spec_replicas(rs) + proportion
                added += proportion
            else:
                sizes[rs["metadata"]["name"]] = ro.spec_replicas(rs)
        for i, rs in enumerate(active):
            name = rs["metadata"]["name"]
            if i == 0 and to_add != 0:
                sizes[name] = max(0, sizes[name] + to_add - added)
            await self._scale_rs(d, rs, sizes[name], operation="up" if to_add > 0 else "down")

    @staticmethod
    def _proportion(d: Obj, rs: Obj, to_add: int, added: int) -> int:
        size = ro.spec_replicas(rs)
        if size == 0 or to_add == 0 or to_add == added:
            return 0
        replicas = ro.spec_replicas(d)
        if replicas == 0:
            fraction = -size
        else:
            annotated = ro.max_replicas_annotation(rs) or int(
                (d.get("status") or {}).get("replicas") or 0
            )
            if annotated <= 0:
                fraction = 0
            else:
                fraction = round(size * (replicas + ro.max_surge(d)) / annotated) - size
        allowed = to_add - added
        return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)

    @staticmethod
    def _saturated(d: Obj, rs: Obj) -> bool:
        replicas = ro.spec_replicas(d)
        return (
            ro.desired_replicas_annotation(rs) == replicas
            and ro.spec_replicas(rs) == replicas
            and int((rs.get("status") or {}).get("availableReplicas") or 0) == replicas
        )

    # -- rolling update -------------------------------------------------------------------

    async def _rollout_rolling(
        self, d: Obj, new_rs: Obj | None, old_rss: list[Obj]
    ) -> float | None:
        if new_rs is None:
            new_rs = await self._new_replica_set(d, None, old_rss, create=True)
        assert new_rs is not None
        all_rss: list[Obj | None] = [*old_rss, new_rs]
        scaled, new_rs = await self._reconcile_new_rs(d, all_rss, new_rs)
        all_rss = [*old_rss, new_rs]
        if scaled:
            return await self._sync_rollout_status(d, all_rss, new_rs)
        scaled, old_rss = await self._reconcile_old_rss(d, all_rss, old_rss, new_rs)
        all_rss = [*old_rss, new_rs]
        if scaled:
            return await self._sync_rollout_status(d, all_rss, new_rs)
        if ro.deployment_complete(d, d.get("status") or {}):
            await self._cleanup(d, old_rss)
        return await self._sync_rollout_status(d, all_rss, new_rs)

    async def _reconcile_new_rs(
        self, d: Obj, all_rss: list[Obj | None], new_rs: Obj
    ) -> tuple[bool, Obj]:
        replicas = ro.spec_replicas(d)
        current = ro.spec_replicas(new_rs)
        if current == replicas:
            return False, new_rs
        if current > replicas:
            return await self._scale_rs(d, new_rs, replicas)
        target = ro.new_rs_new_replicas(d, all_rss, new_rs)
        return await self._scale_rs(d, new_rs, target)

    async def _reconcile_old_rss(
        self, d: Obj, all_rss: list[Obj | None], old_rss: list[Obj], new_rs: Obj
    ) -> tuple[bool, list[Obj]]:
        old_count = sum(ro.spec_replicas(rs) for rs in old_rss)
        if old_count == 0:
            return False, old_rss
        all_count = sum(ro.spec_replicas(rs) for rs in all_rss if rs is not None)
        min_available = ro.spec_replicas(d) - ro.max_unavailable(d)
        new_unavailable = ro.spec_replicas(new_rs) - min(
            int((new_rs.get("status") or {}).get("availableReplicas") or 0),
            ro.spec_replicas(new_rs),
        )
        max_scaled_down = all_count - min_available - new_unavailable
        if max_scaled_down <= 0:
            return False, old_rss
        olds = sorted(old_rss, key=_created)
        # first the old replicas that are not available anyway: removing them costs nothing
        cleaned = 0
        for i, rs in enumerate(olds):
            if cleaned >= max_scaled_down:
                break
            size = ro.spec_replicas(rs)
            if size == 0:
                continue
            unhealthy = size - min(
                int((rs.get("status") or {}).get("availableReplicas") or 0), size
            )
            if unhealthy <= 0:
                continue
            step = min(max_scaled_down - cleaned, unhealthy)
            _, olds[i] = await self._scale_rs(d, rs, size - step)
            cleaned += step
        # then available ones, while the available total stays above replicas - maxUnavailable
        available = ro.available_replicas([*olds, new_rs], conservative=True)
        scaled_down = 0
        total = available - min_available
        if total > 0:
            for i, rs in enumerate(olds):
                if scaled_down >= total:
                    break
                size = ro.spec_replicas(rs)
                if size == 0:
                    continue
                step = min(size, total - scaled_down)
                _, olds[i] = await self._scale_rs(d, rs, size - step)
                scaled_down += step
        return cleaned + scaled_down > 0, olds

    # -- recreate -------------------------------------------------------------------------

    async def _rollout_recreate(
        self, d: Obj, new_rs: Obj | None, old_rss: list[Obj], rs_list: list[Obj]
    ) -> float | None:
        scaled = False
        olds = list(old_rss)
        for i, rs in enumerate(olds):
            if ro.spec_replicas(rs) != 0:
                changed, olds[i] = await self._scale_rs(d, rs, 0)
                scaled |= changed
        if scaled:
            return await self._sync_rollout_status(d, [*olds, new_rs], new_rs)
        if self._old_pods_running(new_rs, olds):
            return await self._sync_rollout_status(d, [*olds, new_rs], new_rs)
        if new_rs is None:
            new_rs = await self._new_replica_set(d, None, olds, create=True)
        assert new_rs is not None
        _, new_rs = await self._scale_rs(d, new_rs, ro.spec_replicas(d))
        if ro.deployment_complete(d, d.get("status") or {}):
            await self._cleanup(d, olds)
        return await self._sync_rollout_status(d, [*olds, new_rs], new_rs)

    def _old_pods_running(self, new_rs: Obj | None, old_rss: list[Obj]) -> bool:
        if sum(int((rs.get("status") or {}).get("replicas") or 0) for rs in old_rss) > 0:
            return True
        old_uids = {rs["metadata"].get("uid") for rs in old_rss}
        new_uid = (new_rs or {}).get("metadata", {}).get("uid")
        namespace = old_rss[0]["metadata"].get("namespace") or "" if old_rss else ""
        for pod in self.pods.by_index("namespace", namespace) if old_rss else []:
            ref = controller_ref(pod)
            if ref is None or ref.get("uid") not in old_uids or ref.get("uid") == new_uid:
                continue
            if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                return True
        return False

    # -- history --------------------------------------------------------------------------

    async def _cleanup(self, d: Obj, old_rss: list[Obj]) -> None:
        limit = (d.get("spec") or {}).get("revisionHistoryLimit")
        if limit is None:
            return
        alive = [rs for rs in old_rss if not is_being_deleted(rs)]
        extra = len(alive) - int(limit)
        if extra <= 0:
            return
        for rs in sorted(alive, key=ro.revision)[:extra]:
            status = rs.get("status") or {}
            meta = rs["metadata"]
            if (
                int(status.get("replicas") or 0) != 0
                or ro.spec_replicas(rs) != 0
                or int(meta.get("generation") or 0) > int(status.get("observedGeneration") or 0)
            ):
                continue
            log.info("deployment %s: deleting old replica set %s (revision history limit %d)",
                     object_key(d), meta["name"], limit)  # fmt: skip
            try:
                await self.client.delete(
                    RSS,
                    meta["name"],
                    namespace=meta["namespace"],
                    preconditions={"uid": meta["uid"]},
                )
            except (NotFound, Conflict):
                continue

    # -- status ---------------------------------------------------------------------------

    def _calculate_status(self, d: Obj, all_rss: list[Obj | None], new_rs: Obj | None) -> Obj:
        rss = [rs for rs in all_rss if rs is not None]
        available = ro.available_replicas(rss)
        replicas = ro.spec_replicas(d)
        old = d.get("status") or {}

        def total(field: str, of: list[Obj]) -> int:
            return sum(int((rs.get("status") or {}).get(field) or 0) for rs in of)

        status: Obj = {
            "observedGeneration": d["metadata"].get("generation"),
            "replicas": total("replicas", rss),
            "updatedReplicas": total("replicas", [new_rs] if new_rs is not None else []),
            "readyReplicas": total("readyReplicas", rss),
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

    async def _write_status(self, d: Obj, status: Obj) -> None:
        if status == (d.get("status") or {}):
            return
        d["status"] = status
        written = await self.client.update_status(DEPLOYMENTS, d)  # CAS on the cached version
        d["metadata"]["resourceVersion"] = written["metadata"]["resourceVersion"]

    async def _sync_status(self, d: Obj, all_rss: list[Obj | None], new_rs: Obj | None) -> None:
        await self._write_status(d, self._calculate_status(d, all_rss, new_rs))

    async def _sync_rollout_status(
        self, d: Obj, all_rss: list[Obj | None], new_rs: Obj | None
    ) -> float | None:
        status = self._calculate_status(d, all_rss, new_rs)
        deadline = (d.get("spec") or {}).get("progressDeadlineSeconds")
        if deadline is None:
            ro.remove_condition(status, "Progressing")
        current = ro.get_condition(d.get("status") or {}, "Progressing")
        complete = (
            int(status.get("replicas") or 0) == int(status.get("updatedReplicas") or 0)
            and current is not None
            and current.get("reason") == ro.NEW_RS_AVAILABLE
        )
        rs_name = (new_rs or {}).get("metadata", {}).get("name")
        if deadline is not None and not complete:
            if ro.deployment_complete(d, status):
                msg = (
                    f'ReplicaSet "{rs_name}" has successfully progressed.'
                    if rs_name
                    else "Deployment has successfully progressed."
                )
                ro.set_condition(
                    status, ro.new_condition("Progressing", "True", ro.NEW_RS_AVAILABLE, msg)
                )
            elif ro.deployment_progressing(d, status):
                msg = (
                    f'ReplicaSet "{rs_name}" is progressing.'
                    if rs_name
                    else "Deployment is progressing."
                )
                cond = ro.new_condition("Progressing", "True", ro.RS_UPDATED, msg)
                if current is not None:
                    if current.get("status") == "True":
                        cond["lastTransitionTime"] = current.get("lastTransitionTime")
                    ro.remove_condition(status, "Progressing")
                ro.set_condition(status, cond)
            elif ro.deployment_timed_out(d, status):
                msg = (
                    f'ReplicaSet "{rs_name}" has timed out progressing.'
                    if rs_name
                    else "Deployment has timed out progressing."
                )
                ro.set_condition(
                    status, ro.new_condition("Progressing", "False", ro.TIMED_OUT, msg)
                )
        await self._write_status(d, status)
        return self._requeue_stuck(d, status)

    @staticmethod
    def _requeue_stuck(d: Obj, status: Obj) -> float | None:
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
