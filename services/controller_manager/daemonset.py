"""The DaemonSet controller: one pod per eligible node, rolled over revision by revision.

Why: a DaemonSet is how node agents (log shippers, network plugins, monitoring) run. This
follows ``pkg/controller/daemon/daemon_controller.go`` and ``update.go``; ``sync(key)`` is:

1. **History** (``controller_history``): claim the DaemonSet's ControllerRevisions, find the
   one whose data is the current template (creating it, under a bumped
   ``status.collisionCount`` if its name is taken, or renumbering it above every old revision
   after a rollback); its ``controller-revision-hash`` label is the hash new pods carry.
2. **Manage**: claim pods (adopt/release by selector and controller reference) and group them
   by their target node (bound, or pinned by node affinity). For every node,
   ``daemonset_placement.node_should_run`` decides: create a pod where one should run and none
   is; delete pods where none may continue; keep one pod per node (two while surging: the
   oldest new and the oldest old); delete failed pods with a per-node back-off (1 s doubling
   to 15 min, a ``FailedDaemonPod`` warning each time); delete pods whose node is gone — at
   once (grace period 0), since no kubelet will confirm them: Kubernetes leaves that to its
   pod garbage collector, which kubelite does not have.
   Creations go in slow-start batches, at most ``burst_replicas`` per sync.
3. **RollingUpdate** (``daemonset_update``), once every earlier create and delete has been
   observed (expectations, as the replica-set controller keeps them): delete old pods and
   surge new ones within ``maxUnavailable``/``maxSurge``. ``OnDelete`` does nothing here: a
   pod gets the new template only when someone deletes the old one.
4. **Cleanup**: delete old revisions beyond ``revisionHistoryLimit`` that no pod still runs.
5. **Status**: desired/current/misscheduled/ready/available/unavailable/updated numbers and
   ``observedGeneration`` (left alone while expectations are pending); with
   ``minReadySeconds`` the key is checked again once ready pods should have become available.

Events (component ``daemonset-controller``): ``SuccessfulCreate`` "Created pod: NAME",
``FailedCreate`` "Error creating: ...", ``SuccessfulDelete`` "Deleted pod: NAME",
``FailedDelete`` "Error deleting: ...", ``FailedDaemonPod`` "Found failed daemon pod NS/NAME on
node NODE, will try to kill it".

Limits: expectations and failed-pod back-offs live in this process (a restarted controller
trusts its freshly synced cache, as Kubernetes does); a DaemonSet being deleted is left to the
garbage collector; no ``DaemonSet`` conditions are written (Kubernetes writes none either).
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from api.errors import Conflict, NotFound, StatusError
from api.registry import REGISTRY
from api.selectors import LabelSelector, label_selector_from_dict
from client.cache import object_key
from client.controller import Controller
from client.events import EventRecorder
from client.expectations import Expectations
from client.rest import ApiClient
from client.workqueue import WorkQueue
from services.controller_manager import controller_history as ch
from services.controller_manager import daemonset_update
from services.controller_manager.controller_ref import (
    OwnerGone,
    claim,
    controller_ref,
    is_being_deleted,
    labels_of,
    resolve_controller_ref,
)
from services.controller_manager.daemonset_placement import (
    REVISION_HASH_LABEL,
    daemon_pod,
    is_updated,
    node_should_run,
    target_node,
    template_generation,
)
from services.controller_manager.informers import SharedInformers
from services.controller_manager.pod_state import is_available, is_ready
from services.controller_manager.replication import slow_start_batch
from services.controller_manager.retry_on_conflict import update_with_retry

__all__ = ["DAEMONSETS", "DaemonSetController", "FailedPodBackoff"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

DAEMONSETS = REGISTRY.require("apps", "DaemonSet")
PODS = REGISTRY.require("", "Pod")
NODES = REGISTRY.require("", "Node")

BURST_REPLICAS = 250
"""Kubernetes' daemon ``BurstReplicas``: the most pods one sync creates or deletes."""
FAILED_POD_BACKOFF = (1.0, 900.0)
"""``failedPodsBackoff``: 1 s, doubling, at most 15 min between deleting failed pods."""


@dataclass(slots=True)
class _Entry:
    delay: float
    last: float


class FailedPodBackoff:
    """Per-key back-off (client-go's ``flowcontrol.Backoff``) on the monotonic clock."""

    def __init__(self, *, initial: float, cap: float) -> None:
        self.initial, self.cap = initial, cap
        self._entries: dict[str, _Entry] = {}

    def in_backoff(self, key: str, now: float) -> float | None:
        """The remaining wait if ``key`` was last stepped less than its delay ago."""
        entry = self._entries.get(key)
        if entry is None or now - entry.last >= entry.delay:
            return None
        return entry.delay - (now - entry.last)

    def step(self, key: str, now: float) -> None:
        entry = self._entries.get(key)
        if entry is None or now - entry.last > 2 * self.cap:
            self._entries[key] = _Entry(self.initial, now)
        else:
            entry.delay, entry.last = min(entry.delay * 2, self.cap), now

    def forget_prefix(self, prefix: str) -> None:
        for key in [k for k in self._entries if k.startswith(prefix)]:
            del self._entries[key]


def _selector(ds: Obj) -> LabelSelector:
    return label_selector_from_dict((ds.get("spec") or {}).get("selector"))


def _is_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _creation_order(pod: Obj) -> tuple[int, str, str]:
    """``podByCreationTimestampAndPhase``: bound pods first, then oldest, then by name."""
    meta = pod["metadata"]
    bound = 0 if (pod.get("spec") or {}).get("nodeName") else 1
    return bound, str(meta.get("creationTimestamp") or ""), str(meta.get("name") or "")


def _message(exc: BaseException) -> str:
    return exc.message if isinstance(exc, StatusError) else str(exc)


def _is_rolling(ds: Obj) -> bool:
    strategy = (ds.get("spec") or {}).get("updateStrategy") or {}
    return bool(strategy.get("type", "RollingUpdate") == "RollingUpdate")


class DaemonSetController:
    """``await run()`` until cancelled."""

    name = "daemonset"

    def __init__(
        self,
        *,
        client: ApiClient,
        informers: SharedInformers,
        recorder: EventRecorder,
        workers: int = 2,
        burst_replicas: int = BURST_REPLICAS,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.workers = workers
        self.burst_replicas = burst_replicas
        self.daemonsets = informers.get(DAEMONSETS)
        self.pods = informers.get(PODS)
        self.nodes = informers.get(NODES)
        self.revisions = informers.get(ch.CONTROLLER_REVISIONS)
        self.history = ch.ControllerHistory(client=client, informer=self.revisions)
        self.queue: WorkQueue[str] = WorkQueue(name=self.name)
        self.expectations = Expectations()
        self.failed_backoff = FailedPodBackoff(
            initial=FAILED_POD_BACKOFF[0], cap=FAILED_POD_BACKOFF[1]
        )
        self.daemonsets.add_handler(
            on_add=self._ds_added, on_update=self._ds_updated, on_delete=self._ds_deleted
        )
        self.pods.add_handler(
            on_add=self._pod_added, on_update=self._pod_updated, on_delete=self._pod_deleted
        )
        self.nodes.add_handler(
            on_add=self._node_added, on_update=self._node_updated, on_delete=self._node_deleted
        )
        self.revisions.add_handler(on_change=self._revision_changed)

    async def run(self) -> None:
        await Controller(
            name=self.name,
            queue=self.queue,
            reconcile=self.sync,
            workers=self.workers,
            wait_for=[self.daemonsets, self.pods, self.nodes, self.revisions],
        ).run()

    # -- event handlers: events -> DaemonSet keys -----------------------------------------

    def _ds_added(self, ds: Obj) -> None:
        self.queue.add(object_key(ds))

    def _ds_updated(self, old: Obj, new: Obj) -> None:
        if old["metadata"].get("uid") != new["metadata"].get("uid"):
            self._ds_deleted(old)
        self.queue.add(object_key(new))

    def _ds_deleted(self, ds: Obj) -> None:
        key = object_key(ds)
        self.expectations.forget(key)
        self.failed_backoff.forget_prefix(f"{ds['metadata'].get('uid')}/")
        self.queue.add(key)

    def _owner_of(self, obj: Obj) -> Obj | None:
        namespace = obj["metadata"].get("namespace") or ""
        return resolve_controller_ref(
            controller_ref(obj), namespace=namespace, rt=DAEMONSETS, owners=self.daemonsets
        )

    def _matching(self, obj: Obj) -> list[Obj]:
        namespace = obj["metadata"].get("namespace") or ""
        labels = labels_of(obj)
        return [
            ds
            for ds in self.daemonsets.by_index("namespace", namespace)
            if _selector(ds).matches(labels)
        ]

    def _pod_added(self, pod: Obj) -> None:
        if is_being_deleted(pod):
            self._pod_deleted(pod)  # a restarted controller may first see it this way
            return
        if controller_ref(pod) is not None:
            owner = self._owner_of(pod)
            if owner is not None:
                key = object_key(owner)
                self.expectations.creation_observed(key)
                self.queue.add(key)
            return
        for ds in self._matching(pod):
            self.queue.add(object_key(ds))

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
            return
        if is_being_deleted(new):
            self._pod_deleted(new)
            return
        old_owner, owner = self._owner_of(old), self._owner_of(new)
        if old_owner is not None and old_owner is not owner:
            self.queue.add(object_key(old_owner))
        if owner is not None:
            key = object_key(owner)
            self.queue.add(key)
            min_ready = int((owner.get("spec") or {}).get("minReadySeconds") or 0)
            if min_ready > 0 and not is_ready(old) and is_ready(new):
                self.queue.add_after(key, float(min_ready) + 1.0)
            return
        if controller_ref(new) is None and labels_of(old) != labels_of(new):
            for ds in self._matching(new):
                self.queue.add(object_key(ds))

    def _pod_deleted(self, pod: Obj) -> None:
        owner = self._owner_of(pod)
        if owner is None:
            return
        key = object_key(owner)
        self.expectations.deletion_observed(key, object_key(pod))
        self.queue.add(key)

    def _node_added(self, node: Obj) -> None:
        for ds in self.daemonsets.list():
            if node_should_run(node, ds)[0]:
                self.queue.add(object_key(ds))

    def _node_updated(self, old: Obj, new: Obj) -> None:
        for ds in self.daemonsets.list():
            if node_should_run(old, ds) != node_should_run(new, ds):
                self.queue.add(object_key(ds))

    def _node_deleted(self, node: Obj) -> None:
        for ds in self.daemonsets.list():
            self.queue.add(object_key(ds))  # its pods there, if any, are deleted by the sync

    def _revision_changed(self, revision: Obj) -> None:
        owner = self._owner_of(revision)
        if owner is not None:
            self.queue.add(object_key(owner))
        elif controller_ref(revision) is None:
            for ds in self._matching(revision):
                self.queue.add(object_key(ds))

    # -- reconcile ------------------------------------------------------------------------

    async def sync(self, key: str) -> float | None:
        ds = self.daemonsets.get(key)
        if ds is None:
            self.expectations.forget(key)
            return None
        if is_being_deleted(ds):
            return None  # the garbage collector removes its pods and revisions
        ds = copy.deepcopy(ds)
        try:
            current, old = await self._construct_history(ds)
        except OwnerGone:
            return None
        hash_ = labels_of(current).get(REVISION_HASH_LABEL, "")
        if not self.expectations.satisfied(key):
            return await self._update_status(ds, hash_, observe_generation=False)
        requeue: list[float] = []
        error: BaseException | None = None
        try:
            requeue += await self._manage(key, ds, hash_)
            if _is_rolling(ds) and self.expectations.satisfied(key):
                await self._rolling_update(key, ds, hash_)
            await self._cleanup_history(ds, current, old)
        except OwnerGone:
            return None
        except (ConnectionError, StatusError) as exc:
            error = exc
        after_status = await self._update_status(ds, hash_, observe_generation=True)
        if error is not None:
            raise error
        delays = [d for d in (*requeue, after_status) if d is not None]
        return min(delays) if delays else None

    async def _can_adopt(self, ds: Obj) -> None:
        meta = ds["metadata"]
        try:
            fresh = await self.client.get(DAEMONSETS, meta["name"], namespace=meta["namespace"])
        except NotFound:
            raise OwnerGone(meta["name"]) from None
        if fresh["metadata"].get("uid") != meta.get("uid") or is_being_deleted(fresh):
            raise OwnerGone(meta["name"])

    # -- history --------------------------------------------------------------------------

    async def _construct_history(self, ds: Obj) -> tuple[Obj, list[Obj]]:
        """(the current revision, the old ones): ``constructHistory``."""
        revisions = await self.history.claim(
            ds, DAEMONSETS, selector=_selector(ds), can_adopt=lambda: self._can_adopt(ds)
        )
        data = ch.template_patch(ds)
        matching = [r for r in revisions if ch.data_equal(r, data)]
        old = [r for r in revisions if not ch.data_equal(r, data)]
        next_revision = ch.max_revision(old) + 1
        if not matching:
            return await self._snapshot(ds, data, next_revision), old
        current = await self._dedup(ds, matching)
        if int(current.get("revision") or 0) < next_revision:
            current = await self.history.update_revision(current, next_revision)
        return current, old

    async def _snapshot(self, ds: Obj, data: Obj, revision: int) -> Obj:
        status = ds.setdefault("status", {})
        collisions = int(status.get("collisionCount") or 0)
        body = ch.new_revision(
            ds,
            DAEMONSETS,
            data=data,
            revision=revision,
            collision_count=collisions,
            hash_label=REVISION_HASH_LABEL,
        )
        created, used = await self.history.create(
            ds, body, collision_count=collisions, hash_label=REVISION_HASH_LABEL
        )
        if used != collisions:
            await self._set_collision_count(ds, used)
        log.info("daemon set %s: revision %d is %s", object_key(ds), revision,
                 created["metadata"]["name"])  # fmt: skip
        return created

    async def _set_collision_count(self, ds: Obj, count: int) -> None:
        meta = ds["metadata"]
        ds["status"]["collisionCount"] = count

        def bump(fresh: Obj) -> bool:
            fstatus = fresh.setdefault("status", {})
            if fresh["metadata"].get("uid") != meta.get("uid"):
                return False
            if int(fstatus.get("collisionCount") or 0) >= count:
                return False
            fstatus["collisionCount"] = count
            return True

        await update_with_retry(
            self.client,
            DAEMONSETS,
            namespace=meta["namespace"],
            name=meta["name"],
            mutate=bump,
            subresource="status",
        )

    async def _dedup(self, ds: Obj, matching: list[Obj]) -> Obj:
        """Keep the highest-numbered of several equal revisions; relabel pods off the rest."""
        keep = ch.sort_by_revision(matching)[-1]
        keep_hash = labels_of(keep).get(REVISION_HASH_LABEL, "")
        for dup in matching:
            if dup is keep:
                continue
            dup_hash = labels_of(dup).get(REVISION_HASH_LABEL)
            for pod in self._owned_pods(ds):
                if labels_of(pod).get(REVISION_HASH_LABEL) == dup_hash:
                    await self._relabel(pod, keep_hash)
            await self.history.delete(dup)
        return keep

    async def _relabel(self, pod: Obj, hash_: str) -> None:
        uid = pod["metadata"].get("uid")

        def set_hash(fresh: Obj) -> bool:
            labels = fresh["metadata"].setdefault("labels", {})
            if fresh["metadata"].get("uid") != uid or labels.get(REVISION_HASH_LABEL) == hash_:
                return False
            labels[REVISION_HASH_LABEL] = hash_
            return True

        try:
            await update_with_retry(
                self.client,
                PODS,
                namespace=pod["metadata"].get("namespace"),
                name=pod["metadata"]["name"],
                mutate=set_hash,
            )
        except NotFound:
            return

    async def _cleanup_history(self, ds: Obj, current: Obj, old: list[Obj]) -> None:
        limit = (ds.get("spec") or {}).get("revisionHistoryLimit")
        if limit is None:
            return
        live_hashes = {labels_of(p).get(REVISION_HASH_LABEL) for p in self._owned_pods(ds)}
        live = {current["metadata"]["name"]} | {
            r["metadata"]["name"]
            for r in old
            if labels_of(r).get(REVISION_HASH_LABEL) in live_hashes
        }
        await self.history.truncate(old, limit=int(limit), live=live)

    # -- pods by node ---------------------------------------------------------------------

    def _owned_pods(self, ds: Obj) -> list[Obj]:
        uid = ds["metadata"].get("uid")
        return [
            p
            for p in self.pods.by_index("namespace", ds["metadata"].get("namespace") or "")
            if (controller_ref(p) or {}).get("uid") == uid
        ]

    @staticmethod
    def _by_node(pods: list[Obj]) -> dict[str, list[Obj]]:
        """``getNodesToDaemonPods``: pods by target node, oldest first; terminal pods already
        being deleted are left out (their replacement may start)."""
        by_node: dict[str, list[Obj]] = defaultdict(list)
        for pod in pods:
            if _is_terminal(pod) and is_being_deleted(pod):
                continue
            node = target_node(pod)
            if node is None:
                log.warning("daemon pod %s has no target node; ignoring it", object_key(pod))
                continue
            by_node[node].append(pod)
        for node_pods in by_node.values():
            node_pods.sort(key=_creation_order)
        return dict(by_node)

    async def _claimed_by_node(self, ds: Obj) -> dict[str, list[Obj]]:
        namespace = ds["metadata"].get("namespace") or ""
        pods = await claim(
            self.client,
            owner=ds,
            owner_rt=DAEMONSETS,
            child_rt=PODS,
            selector=_selector(ds),
            candidates=self.pods.by_index("namespace", namespace),
            can_adopt=lambda: self._can_adopt(ds),
        )
        return self._by_node(pods)

    # -- manage ---------------------------------------------------------------------------

    async def _manage(self, key: str, ds: Obj, hash_: str) -> list[float]:
        """Create and delete so each node has the pods it should; the back-off delays of
        failed pods left for later."""
        node_pods = await self._claimed_by_node(ds)
        to_create: list[str] = []
        to_delete: list[Obj] = []
        delays: list[float] = []
        node_names = set()
        for node in self.nodes.list():
            name = node["metadata"]["name"]
            node_names.add(name)
            should_run, should_continue = node_should_run(node, ds)
            pods = node_pods.get(name, [])
            if should_run and not pods:
                to_create.append(name)
            elif should_continue:
                doomed, delay = self._excess_or_failed(ds, name, pods, hash_)
                to_delete += doomed
                if delay is not None:
                    delays.append(delay)
            else:
                to_delete += [p for p in pods if not is_being_deleted(p)]
        gone = [p for name, pods in node_pods.items() if name not in node_names for p in pods]
        await self._sync_nodes(key, ds, [*to_delete, *gone], to_create, hash_, forced=len(gone))
        return delays

    def _excess_or_failed(
        self, ds: Obj, node: str, pods: list[Obj], hash_: str
    ) -> tuple[list[Obj], float | None]:
        doomed: list[Obj] = []
        running: list[Obj] = []
        delay: float | None = None
        now = asyncio.get_running_loop().time()
        backoff_key = f"{ds['metadata'].get('uid')}/{node}"
        for pod in pods:
            if is_being_deleted(pod):
                continue
            if (pod.get("status") or {}).get("phase") != "Failed":
                running.append(pod)
                continue
            wait = self.failed_backoff.in_backoff(backoff_key, now)
            if wait is not None:
                log.info("deleting failed pod %s on node %s is limited by back-off; "
                         "will try again in %.1fs", object_key(pod), node, wait)  # fmt: skip
                delay = wait
                continue
            self.failed_backoff.step(backoff_key, now)
            message = (
                f"Found failed daemon pod {object_key(pod)} on node {node}, will try to kill it"
            )
            log.info("daemon set %s: %s", object_key(ds), message)
            self.recorder.event(ds, "Warning", "FailedDaemonPod", message)
            doomed.append(pod)
        if _surges(ds):
            # while surging, one new and one old pod may share a node: keep the oldest of each
            seen_new = seen_old = False
            generation = template_generation(ds)
            for pod in running:
                if is_updated(pod, hash_, generation):
                    doomed += [pod] if seen_new else []
                    seen_new = True
                else:
                    doomed += [pod] if seen_old else []
                    seen_old = True
        else:
            doomed += running[1:]  # the oldest stays
        return doomed, delay

    async def _sync_nodes(
        self,
        key: str,
        ds: Obj,
        to_delete: list[Obj],
        to_create: list[str],
        hash_: str,
        *,
        forced: int = 0,
    ) -> None:
        """Create a pod on each of ``to_create`` and delete ``to_delete``, within the burst;
        the last ``forced`` of ``to_delete`` are on nodes that are gone and are deleted at
        once (grace period 0: no kubelet will ever confirm them — Kubernetes' pod garbage
        collector does this there, and kubelite has none)."""
        force = {object_key(p) for p in to_delete[len(to_delete) - forced :]}
        to_create = to_create[: self.burst_replicas]
        to_delete = to_delete[: self.burst_replicas]
        if not to_create and not to_delete:
            return
        self.expectations.expect_creations(key, len(to_create))
        self.expectations.expect_deletions(
            key, [object_key(p) for p in to_delete if not is_being_deleted(p)]
        )
        create_error = await self._create(key, ds, to_create, hash_)
        delete_error = await self._delete(key, ds, to_delete, force=force)
        if create_error is not None:
            raise create_error
        if delete_error is not None:
            raise delete_error

    async def _create(
        self, key: str, ds: Obj, nodes: list[str], hash_: str
    ) -> BaseException | None:
        if not nodes:
            return None
        log.info("daemon set %s: creating pods on %s", key, ", ".join(nodes))
        pending = iter(nodes)
        namespace = ds["metadata"]["namespace"]

        async def create_one() -> None:
            body = daemon_pod(ds, DAEMONSETS, node=next(pending), hash_=hash_)
            try:
                created = await self.client.create(PODS, body, namespace=namespace)
            except (ConnectionError, StatusError) as exc:
                self.recorder.event(ds, "Warning", "FailedCreate", f"Error creating: {_message(exc)}")  # fmt: skip
                raise
            self.recorder.event(
                ds, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}"
            )

        successes, error = await slow_start_batch(len(nodes), initial=1, fn=create_one)
        for _ in range(len(nodes) - successes):
            self.expectations.creation_failed(key)
        if error is not None:
            log.warning("daemon set %s: created %d of %d pods, then failed: %s; will retry "
                        "with backoff", key, successes, len(nodes), _message(error))  # fmt: skip
        return error

    async def _delete(
        self, key: str, ds: Obj, pods: list[Obj], *, force: set[str]
    ) -> BaseException | None:
        async def delete_one(pod: Obj) -> None:
            meta = pod["metadata"]
            try:
                await self.client.delete(
                    PODS,
                    meta["name"],
                    namespace=meta["namespace"],
                    grace_period_seconds=0 if object_key(pod) in force else None,
                    preconditions={"uid": meta["uid"]},
                )
            except (NotFound, Conflict):
                self.expectations.deletion_failed(key, object_key(pod))
                return
            except (ConnectionError, StatusError) as exc:
                self.expectations.deletion_failed(key, object_key(pod))
                self.recorder.event(ds, "Warning", "FailedDelete", f"Error deleting: {_message(exc)}")  # fmt: skip
                raise
            if not is_being_deleted(pod):
                self.recorder.event(
                    ds, "Normal", "SuccessfulDelete", f"Deleted pod: {meta['name']}"
                )

        results = await asyncio.gather(*(delete_one(p) for p in pods), return_exceptions=True)
        for result in results:
            if isinstance(result, asyncio.CancelledError):
                raise result
        return next((r for r in results if isinstance(r, BaseException)), None)

    # -- rolling update -------------------------------------------------------------------

    async def _rolling_update(self, key: str, ds: Obj, hash_: str) -> None:
        node_pods = self._by_node(self._owned_pods(ds))
        should_run = {n["metadata"]["name"] for n in self.nodes.list() if node_should_run(n, ds)[0]}
        for name in should_run:
            node_pods.setdefault(name, [])
        to_delete, to_create = daemonset_update.plan(
            ds,
            node_pods,
            should_run=should_run,
            hash_=hash_,
            generation=template_generation(ds),
            now=datetime.now(UTC),
        )
        if to_delete or to_create:
            log.info("daemon set %s: rolling update deletes %d old pod(s), surges onto %d "
                     "node(s)", key, len(to_delete), len(to_create))  # fmt: skip
        await self._sync_nodes(key, ds, to_delete, to_create, hash_)

    # -- status ---------------------------------------------------------------------------

    def calculate_status(self, ds: Obj, hash_: str, *, observe_generation: bool) -> Obj:
        node_pods = self._by_node(self._owned_pods(ds))
        min_ready = int((ds.get("spec") or {}).get("minReadySeconds") or 0)
        generation = template_generation(ds)
        now = datetime.now(UTC)
        desired = current = misscheduled = ready = available = updated = 0
        for node in self.nodes.list():
            should_run, _ = node_should_run(node, ds)
            pods = node_pods.get(node["metadata"]["name"], [])
            if should_run:
                desired += 1
                if pods:
                    current += 1
                    pod = pods[0]
                    ready += int(is_ready(pod))
                    available += int(is_available(pod, min_ready_seconds=min_ready, now=now))
                    updated += int(is_updated(pod, hash_, generation))
            elif pods:
                misscheduled += 1
        status = copy.deepcopy(ds.get("status") or {})
        status.update(
            desiredNumberScheduled=desired,
            currentNumberScheduled=current,
            numberMisscheduled=misscheduled,
            numberReady=ready,
            numberAvailable=available,
            numberUnavailable=desired - available,
            updatedNumberScheduled=updated,
        )
        if observe_generation and ds["metadata"].get("generation") is not None:
            status["observedGeneration"] = ds["metadata"]["generation"]
        return status

    async def _update_status(
        self, ds: Obj, hash_: str, *, observe_generation: bool
    ) -> float | None:
        """Write the status if it changed; when to look again for ``minReadySeconds``."""
        status = self.calculate_status(ds, hash_, observe_generation=observe_generation)
        if status != (ds.get("status") or {}):
            meta = ds["metadata"]
            counts = {k: v for k, v in status.items() if k != "collisionCount"}

            def set_status(fresh: Obj) -> bool:
                if fresh["metadata"].get("uid") != meta.get("uid"):
                    return False
                merged = {**(fresh.get("status") or {}), **counts}
                if merged == fresh.get("status"):
                    return False
                fresh["status"] = merged
                return True

            try:
                await update_with_retry(
                    self.client,
                    DAEMONSETS,
                    namespace=meta["namespace"],
                    name=meta["name"],
                    mutate=set_status,
                    subresource="status",
                )
            except NotFound:
                return None
        min_ready = int((ds.get("spec") or {}).get("minReadySeconds") or 0)
        if min_ready > 0 and status["numberReady"] != status["numberAvailable"]:
            return float(min_ready)
        return None


def _surges(ds: Obj) -> bool:
    """``AllowsSurge``: a RollingUpdate whose ``maxSurge`` is not zero."""
    if not _is_rolling(ds):
        return False
    rolling = ((ds.get("spec") or {}).get("updateStrategy") or {}).get("rollingUpdate") or {}
    return str(rolling.get("maxSurge") or 0).strip() not in ("0", "0%")
