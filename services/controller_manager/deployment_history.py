"""A Deployment's revision history: which ReplicaSet is new, its revision, and pruning.

Why a module of its own: ``kubectl rollout history`` and ``kubectl rollout undo`` work on the
ReplicaSets a Deployment keeps, and on their ``deployment.kubernetes.io/revision`` annotations.
Those numbers are what a rollback relies on, so the rules that hand them out live together,
following ``getAllReplicaSetsAndSyncRevision`` and ``cleanupDeployment`` in
``pkg/controller/deployment/sync.go``:

* The **new** ReplicaSet is the oldest one whose template equals the Deployment's (ignoring the
  hash label); all others are **old**. Its revision is one more than the highest old revision —
  which is why ``kubectl rollout undo`` (a patch of the Deployment with an old ReplicaSet's
  template and annotations) revives that ReplicaSet under a new revision, keeping the old
  number in ``revision-history``. The Deployment's own revision annotation follows its new
  ReplicaSet. Deployment annotations (but ``ANNOTATIONS_TO_SKIP``) are copied to the new
  ReplicaSet, ``change-cause`` included.
* A new ReplicaSet is named ``<deployment>-<pod-template-hash>``, selects and labels its pods
  with that hash, and starts at the size a rollout may give it at once. A name taken by a
  ReplicaSet with another template is a hash collision: ``status.collisionCount`` goes up and
  the sync is retried under a new hash.
* Old ReplicaSets scaled to zero beyond ``revisionHistoryLimit`` are deleted, oldest revision
  first.

What it does not guarantee: revisions are decided from the informer cache; two controllers
deciding at once are kept apart by compare-and-swap writes (a loser gets Conflict), not here.
The deprecated ``rollbackTo`` API is not served.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from api.errors import AlreadyExists, Conflict, NotFound
from api.registry import REGISTRY
from client.cache import object_key
from client.events import EventRecorder
from client.rest import ApiClient
from services.controller_manager import rollout as ro
from services.controller_manager.controller_ref import (
    controller_ref,
    is_being_deleted,
    new_controller_ref,
)

__all__ = ["RevisionHistory", "stamp_new_rs_annotations"]

log = logging.getLogger("services.controller_manager.deployment")

Obj = dict[str, Any]

RSS = REGISTRY.require("apps", "ReplicaSet")
DEPLOYMENTS = REGISTRY.require("apps", "Deployment")


def stamp_new_rs_annotations(d: Obj, rs: Obj, *, revision: int, exists: bool) -> bool:
    """Copy ``d``'s annotations to its new ReplicaSet and raise its revision to ``revision``
    (the previous one joins ``revision-history``); whether anything changed."""
    changed = False
    annotations = ro.annotations_for_write(rs)
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
    if old_revision < revision:
        annotations[ro.REVISION] = str(revision)
        changed = True
        if old:
            history = annotations.get(ro.REVISION_HISTORY)
            annotations[ro.REVISION_HISTORY] = f"{history},{old}" if history else old
    if not exists:
        changed |= ro.set_replicas_annotations(d, rs)
    return changed


def _next_revision(old_rss: list[Obj]) -> int:
    return max((ro.revision(rs) for rs in old_rss), default=0) + 1


def _has_progress_deadline(d: Obj) -> bool:
    return (d.get("spec") or {}).get("progressDeadlineSeconds") is not None


def _replica_set_for(d: Obj, *, pod_hash: str) -> Obj:
    """The new ReplicaSet's body, still at 0 replicas and without annotations."""
    meta = d["metadata"]
    spec = d.get("spec") or {}
    template = copy.deepcopy(spec.get("template") or {})
    template.setdefault("metadata", {}).setdefault("labels", {})[ro.HASH_LABEL] = pod_hash
    selector = copy.deepcopy(spec.get("selector") or {})
    selector.setdefault("matchLabels", {})[ro.HASH_LABEL] = pod_hash
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{meta['name']}-{pod_hash}",
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


class RevisionHistory:
    """Finds, creates and prunes the ReplicaSets of Deployments, keeping their revisions."""

    def __init__(self, *, client: ApiClient, recorder: EventRecorder) -> None:
        self.client = client
        self.recorder = recorder

    async def new_and_old(self, d: Obj, rs_list: list[Obj]) -> tuple[Obj | None, list[Obj]]:
        """The new ReplicaSet (brought up to date; None if there is none yet) and the old ones."""
        template = (d.get("spec") or {}).get("template")
        same = sorted(
            (
                rs
                for rs in rs_list
                if ro.equal_ignoring_hash((rs.get("spec") or {}).get("template"), template)
            ),
            key=ro.creation_order,
        )
        existing = same[0] if same else None
        old_rss = [rs for rs in rs_list if rs is not existing]
        if existing is None:
            d.setdefault("status", {})  # as Kubernetes' sync does: written with the status
            return None, old_rss
        return await self._sync_existing(d, existing, old_rss), old_rss

    async def _sync_existing(self, d: Obj, rs: Obj, old_rss: list[Obj]) -> Obj:
        new_revision = _next_revision(old_rss)
        spec = d.get("spec") or {}
        status = d.setdefault("status", {})
        changed = stamp_new_rs_annotations(d, rs, revision=new_revision, exists=True)
        min_ready = spec.get("minReadySeconds") or 0
        if changed or ((rs.get("spec") or {}).get("minReadySeconds") or 0) != min_ready:
            rs["spec"]["minReadySeconds"] = min_ready
            rs = await self.client.update(RSS, rs)
        await self._set_deployment_revision(
            d, ro.annotations_for_write(rs).get(ro.REVISION, str(new_revision))
        )
        if _has_progress_deadline(d) and ro.get_condition(status, "Progressing") is None:
            ro.set_condition(status, ro.new_condition(
                "Progressing", "True", ro.FOUND_NEW_RS,
                f'Found new replica set "{rs["metadata"]["name"]}"'))  # fmt: skip
        return rs

    async def create_new(self, d: Obj, old_rss: list[Obj]) -> Obj:
        """Create the ReplicaSet of ``d``'s current template, as large as a rollout allows now."""
        new_revision = _next_revision(old_rss)
        meta = d["metadata"]
        status = d.setdefault("status", {})
        pod_hash = ro.pod_template_hash(
            (d.get("spec") or {}).get("template") or {}, status.get("collisionCount")
        )
        rs = _replica_set_for(d, pod_hash=pod_hash)
        name = rs["metadata"]["name"]
        rs["spec"]["replicas"] = ro.new_rs_new_replicas(d, [*old_rss, rs], rs)
        stamp_new_rs_annotations(d, rs, revision=new_revision, exists=False)
        try:
            created: Obj = await self.client.create(RSS, rs)
        except AlreadyExists:
            return await self._name_taken(d, name)
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
        if _has_progress_deadline(d):
            ro.set_condition(status, ro.new_condition(
                "Progressing", "True", ro.NEW_RS_CREATED, f'Created new replica set "{name}"'))  # fmt: skip
        return created

    async def _name_taken(self, d: Obj, name: str) -> Obj:
        """Ours from an earlier sync the cache has not shown yet, or a hash collision."""
        meta = d["metadata"]
        status = d.setdefault("status", {})
        found: Obj = await self.client.get(RSS, name, namespace=meta["namespace"])
        ref = controller_ref(found)
        if (
            ref is not None
            and ref.get("uid") == meta.get("uid")
            and ro.equal_ignoring_hash(
                (found.get("spec") or {}).get("template"), (d.get("spec") or {}).get("template")
            )
        ):
            return found  # we created it before and the cache has not shown it yet
        status["collisionCount"] = int(status.get("collisionCount") or 0) + 1
        await self.client.update_status(DEPLOYMENTS, d)
        raise Conflict(
            f'hash collision for replica set "{name}"; retrying with a new hash'
        ) from None

    async def _set_deployment_revision(self, d: Obj, revision: str) -> None:
        if (d["metadata"].get("annotations") or {}).get(ro.REVISION) == revision:
            return
        ro.annotations_for_write(d)[ro.REVISION] = revision
        written = await self.client.update(DEPLOYMENTS, d)
        d["metadata"] = written["metadata"]

    async def cleanup(self, d: Obj, old_rss: list[Obj]) -> None:
        """Delete old ReplicaSets scaled to zero beyond ``revisionHistoryLimit``."""
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
