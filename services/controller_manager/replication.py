"""The replica-set controller: keeps ``replicas`` pods alive for every ReplicationController
(core/v1) and every ReplicaSet (apps/v1) — one implementation, two instances.

Why one: Kubernetes itself runs the ReplicationController through the ReplicaSet code (the
only difference is the selector's shape: a plain label map vs ``matchLabels``/
``matchExpressions``). This module follows ``pkg/controller/replicaset/replica_set.go``:

* **Level-triggered.** Handlers only turn pod and owner events into owner keys on a work queue;
  ``sync(key)`` reads the caches and converges: claim pods (adopt matching orphans, release
  pods that stopped matching — ``controller_ref``), count the *active* ones, create or delete
  the difference, then write ``status`` (replicas, fullyLabeledReplicas, readyReplicas,
  availableReplicas, observedGeneration, a ``ReplicaFailure`` condition when creating or
  deleting failed).
* **Expectations.** Before creating N pods the controller records that it expects N
  creations (before deleting, exactly which pods it expects to vanish); the pod handlers count
  them off as the informer sees them. Until they are all seen, ``sync`` recomputes status but
  makes no new diff, so a cache that lags behind our own writes can never make us create more
  pods than asked (nor delete twice). A write that failed is counted off at once.
* **Slow start.** Creations go in batches of 1, 2, 4, ... and stop at the first failure, so a
  template the apiserver rejects costs one request per retry, not ``replicas`` requests; the
  key is retried with backoff and a ``FailedCreate`` event / condition says why.
* **Burst.** At most ``burst_replicas`` (500) creations or deletions per sync.
* **Deletion order** when scaling down: ``pod_state.rank_for_deletion`` (unscheduled,
  pending, not ready, crowded, newest first).

Events (component ``replicaset-controller`` / ``replication-controller``): ``SuccessfulCreate``
"Created pod: NAME", ``FailedCreate`` "Error creating: ...", ``SuccessfulDelete`` "Deleted pod:
NAME", ``FailedDelete`` "Error deleting: ...".

Limits: expectations live in this process (a restarted controller trusts its freshly synced
cache, which is what Kubernetes does); pods of sibling ReplicaSets are not consulted when ranking
victims; no ``terminatingReplicas`` status field.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from api.errors import Conflict, Forbidden, NotFound, StatusError
from api.meta import now_time
from api.registry import REGISTRY, ResourceType
from api.selectors import LabelSelector, label_selector_from_dict, label_selector_from_set
from client.cache import object_key, split_key
from client.controller import Controller
from client.events import EventRecorder
from client.expectations import Expectations
from client.rest import ApiClient
from client.workqueue import WorkQueue
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
from services.controller_manager.pod_state import (
    is_active,
    is_available,
    is_ready,
    rank_for_deletion,
)
from services.controller_manager.retry_on_conflict import update_with_retry

__all__ = [
    "REPLICASET",
    "REPLICATIONCONTROLLER",
    "ReplicaKind",
    "ReplicaSetController",
    "pod_from_template",
    "slow_start_batch",
]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

BURST_REPLICAS = 500
"""Kubernetes' BurstReplicas: the most pods one sync creates or deletes."""
SLOW_START_INITIAL_BATCH = 1
"""Kubernetes' SlowStartInitialBatchSize."""


PODS = REGISTRY.require("", "Pod")


@dataclass(frozen=True, slots=True)
class ReplicaKind:
    """What differs between the ReplicationController and the ReplicaSet."""

    rt: ResourceType
    name: str
    """The controller's name (``--controllers``, logs, queue)."""
    component: str
    """The event source component, as Kubernetes names it."""
    selector_of: Callable[[Obj], LabelSelector]


def _rc_selector(owner: Obj) -> LabelSelector:
    selector = (owner.get("spec") or {}).get("selector")
    if not selector:
        return LabelSelector.nothing()  # validation forbids it; never match every pod
    return label_selector_from_set(selector)


def _rs_selector(owner: Obj) -> LabelSelector:
    return label_selector_from_dict((owner.get("spec") or {}).get("selector"))


REPLICATIONCONTROLLER = ReplicaKind(
    rt=REGISTRY.require("", "ReplicationController"),
    name="replicationcontroller",
    component="replication-controller",
    selector_of=_rc_selector,
)
REPLICASET = ReplicaKind(
    rt=REGISTRY.require("apps", "ReplicaSet"),
    name="replicaset",
    component="replicaset-controller",
    selector_of=_rs_selector,
)


def pod_from_template(owner: Obj, owner_rt: ResourceType) -> Obj:
    """A new pod for ``owner``: its template's labels, annotations, finalizers and spec,
    ``generateName: <owner>-``, and a controller reference to the owner."""
    meta = owner["metadata"]
    template = (owner.get("spec") or {}).get("template") or {}
    tmeta = template.get("metadata") or {}
    pod_meta: Obj = {
        "generateName": f"{meta['name']}-",
        "namespace": meta.get("namespace"),
        "labels": dict(tmeta.get("labels") or {}),
        "ownerReferences": [new_controller_ref(owner, owner_rt)],
    }
    if tmeta.get("annotations"):
        pod_meta["annotations"] = dict(tmeta["annotations"])
    if tmeta.get("finalizers"):
        pod_meta["finalizers"] = list(tmeta["finalizers"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": pod_meta,
        "spec": copy.deepcopy(template.get("spec") or {}),
    }


async def slow_start_batch(
    count: int, *, initial: int, fn: Callable[[], Any]
) -> tuple[int, BaseException | None]:
    """Call ``fn`` ``count`` times in batches of ``initial``, doubling, stopping at a failed batch.

    Returns (successes, first error or None). Calls in one batch run concurrently.
    """
    remaining, successes = count, 0
    batch = min(remaining, initial)
    while batch > 0:
        results = await asyncio.gather(*(fn() for _ in range(batch)), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        successes += batch - len(errors)
        for err in errors:
            if isinstance(err, asyncio.CancelledError):
                raise err
        if errors:
            return successes, errors[0]
        remaining -= batch
        batch = min(2 * batch, remaining)
    return successes, None


def _message(exc: BaseException) -> str:
    return exc.message if isinstance(exc, StatusError) else str(exc)


def _namespace_terminating(exc: BaseException) -> bool:
    if not isinstance(exc, Forbidden):
        return False
    if any(c.get("reason") == "NamespaceTerminating" for c in exc.causes):
        return True
    return "being terminated" in exc.message


class ReplicaSetController:
    """One instance per kind; ``await run()`` until cancelled."""

    def __init__(
        self,
        *,
        client: ApiClient,
        kind: ReplicaKind,
        informers: SharedInformers,
        recorder: EventRecorder,
        workers: int = 5,
        burst_replicas: int = BURST_REPLICAS,
    ) -> None:
        self.client = client
        self.kind = kind
        self.name = kind.name
        self.recorder = recorder
        self.workers = workers
        self.burst_replicas = burst_replicas
        self.pods = informers.get(PODS)
        self.owners = informers.get(kind.rt)
        self.queue: WorkQueue[str] = WorkQueue(name=kind.name)
        self.expectations = Expectations()
        self.owners.add_handler(
            on_add=self._owner_added, on_update=self._owner_updated, on_delete=self._owner_deleted
        )
        self.pods.add_handler(
            on_add=self._pod_added, on_update=self._pod_updated, on_delete=self._pod_deleted
        )

    async def run(self) -> None:
        await Controller(
            name=self.name,
            queue=self.queue,
            reconcile=self.sync,
            workers=self.workers,
            wait_for=[self.pods, self.owners],
        ).run()

    # -- event handlers: events -> owner keys ---------------------------------------------

    def _owner_added(self, owner: Obj) -> None:
        self.queue.add(object_key(owner))

    def _owner_updated(self, old: Obj, new: Obj) -> None:
        if old["metadata"].get("uid") != new["metadata"].get("uid"):
            self._owner_deleted(old)
        self.queue.add(object_key(new))

    def _owner_deleted(self, owner: Obj) -> None:
        key = object_key(owner)
        self.expectations.forget(key)
        self.queue.add(key)

    def _resolve(self, namespace: str, ref: dict[str, Any] | None) -> Obj | None:
        """The owner a controller reference points at, if it is one of ours and in the cache."""
        return resolve_controller_ref(ref, namespace=namespace, rt=self.kind.rt, owners=self.owners)

    def _matching_owners(self, pod: Obj) -> list[Obj]:
        namespace = pod["metadata"].get("namespace") or ""
        labels = labels_of(pod)
        return [
            o
            for o in self.owners.by_index("namespace", namespace)
            if self.kind.selector_of(o).matches(labels)
        ]

    def _pod_added(self, pod: Obj) -> None:
        if is_being_deleted(pod):
            # A restarted controller may first see a pod already being deleted.
            self._pod_deleted(pod)
            return
        namespace = pod["metadata"].get("namespace") or ""
        ref = controller_ref(pod)
        if ref is not None:
            owner = self._resolve(namespace, ref)
            if owner is not None:
                key = object_key(owner)
                self.expectations.creation_observed(key)
                self.queue.add(key)
            return
        for owner in self._matching_owners(pod):
            self.queue.add(object_key(owner))

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
            return  # a resync replay: nothing changed
        namespace = new["metadata"].get("namespace") or ""
        labels_changed = labels_of(old) != labels_of(new)
        if is_being_deleted(new):
            self._pod_deleted(new)
            if labels_changed:
                self._pod_deleted(old)
            return
        cur_ref, old_ref = controller_ref(new), controller_ref(old)
        ref_changed = (cur_ref or {}).get("uid") != (old_ref or {}).get("uid")
        if ref_changed and old_ref is not None:
            previous = self._resolve(namespace, old_ref)
            if previous is not None:
                self.queue.add(object_key(previous))
        if cur_ref is not None:
            owner = self._resolve(namespace, cur_ref)
            if owner is not None:
                key = object_key(owner)
                self.queue.add(key)
                min_ready = int((owner.get("spec") or {}).get("minReadySeconds") or 0)
                if min_ready > 0 and not is_ready(old) and is_ready(new):
                    # check again once the pod has been ready long enough to be available
                    self.queue.add_after(key, float(min_ready) + 1.0)
            return
        if labels_changed or ref_changed:
            for owner in self._matching_owners(new):
                self.queue.add(object_key(owner))

    def _pod_deleted(self, pod: Obj) -> None:
        namespace = pod["metadata"].get("namespace") or ""
        owner = self._resolve(namespace, controller_ref(pod))
        if owner is None:
            return
        key = object_key(owner)
        self.expectations.deletion_observed(key, object_key(pod))
        self.queue.add(key)

    # -- reconcile ------------------------------------------------------------------------

    async def sync(self, key: str) -> float | None:
        owner = self.owners.get(key)
        if owner is None:
            self.expectations.forget(key)
            return None
        # Read the expectations before the cache: an event landing in between only makes us
        # wait for one more sync, never act on a cache older than the expectations.
        satisfied = self.expectations.satisfied(key)
        namespace, _ = split_key(key)
        selector = self.kind.selector_of(owner)
        candidates = [p for p in self.pods.by_index("namespace", namespace or "") if is_active(p)]
        try:
            pods = await claim(
                self.client,
                owner=owner,
                owner_rt=self.kind.rt,
                child_rt=PODS,
                selector=selector,
                candidates=candidates,
                can_adopt=lambda: self._can_adopt(owner),
            )
        except OwnerGone:
            return None
        manage_error: BaseException | None = None
        if satisfied and not is_being_deleted(owner):
            try:
                await self._manage_replicas(key, owner, pods)
            except (ConnectionError, StatusError) as exc:
                manage_error = exc
        await self._update_status(owner, pods, manage_error)
        if manage_error is not None:
            raise manage_error
        spec = owner.get("spec") or {}
        min_ready = int(spec.get("minReadySeconds") or 0)
        if min_ready > 0:
            replicas = int(spec.get("replicas", 1))
            ready = sum(1 for p in pods if is_ready(p))
            available = sum(1 for p in pods if is_available(p, min_ready_seconds=min_ready))
            if ready == replicas and available != replicas:
                return float(min_ready)
        return None

    async def _can_adopt(self, owner: Obj) -> None:
        meta = owner["metadata"]
        try:
            fresh = await self.client.get(self.kind.rt, meta["name"], namespace=meta["namespace"])
        except NotFound:
            raise OwnerGone(meta["name"]) from None
        if fresh["metadata"].get("uid") != meta.get("uid") or is_being_deleted(fresh):
            raise OwnerGone(meta["name"])

    async def _manage_replicas(self, key: str, owner: Obj, pods: list[Obj]) -> None:
        replicas = int((owner.get("spec") or {}).get("replicas", 1))
        diff = len(pods) - replicas
        if diff < 0:
            await self._create(key, owner, min(-diff, self.burst_replicas))
        elif diff > 0:
            await self._delete(key, owner, pods, min(diff, self.burst_replicas))

    async def _create(self, key: str, owner: Obj, count: int) -> None:
        kind = self.kind
        log.info("%s %s: too few replicas, creating %d pod(s)", kind.rt.kind, key, count)
        self.expectations.expect_creations(key, count)
        body = pod_from_template(owner, kind.rt)
        namespace = owner["metadata"]["namespace"]

        async def create_one() -> None:
            try:
                created = await self.client.create(PODS, body, namespace=namespace)
            except (ConnectionError, StatusError) as exc:
                if _namespace_terminating(exc):
                    return  # the namespace is going away; every further create fails too
                self.recorder.event(
                    owner, "Warning", "FailedCreate", f"Error creating: {_message(exc)}"
                )
                raise
            self.recorder.event(
                owner, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}"
            )

        successes, error = await slow_start_batch(
            count, initial=SLOW_START_INITIAL_BATCH, fn=create_one
        )
        for _ in range(count - successes):
            # never going to be observed: failed, or skipped after a failed batch
            self.expectations.creation_failed(key)
        if error is not None:
            log.warning(
                "%s %s: created %d of %d pods, then failed: %s; will retry with backoff",
                kind.rt.kind, key, successes, count, _message(error),
            )  # fmt: skip
            raise error

    async def _delete(self, key: str, owner: Obj, pods: list[Obj], count: int) -> None:
        victims = rank_for_deletion(pods)[:count]
        log.info("%s %s: too many replicas, deleting %d pod(s)", self.kind.rt.kind, key, count)
        self.expectations.expect_deletions(key, [object_key(p) for p in victims])

        async def delete_one(pod: Obj) -> None:
            meta = pod["metadata"]
            try:
                await self.client.delete(
                    PODS,
                    meta["name"],
                    namespace=meta["namespace"],
                    preconditions={"uid": meta["uid"]},
                )
            except (NotFound, Conflict):
                # already gone (or replaced by a namesake): it will never be observed as ours
                self.expectations.deletion_failed(key, object_key(pod))
                return
            except (ConnectionError, StatusError) as exc:
                self.expectations.deletion_failed(key, object_key(pod))
                self.recorder.event(
                    owner, "Warning", "FailedDelete", f"Error deleting: {_message(exc)}"
                )
                raise
            self.recorder.event(owner, "Normal", "SuccessfulDelete", f"Deleted pod: {meta['name']}")

        results = await asyncio.gather(*(delete_one(p) for p in victims), return_exceptions=True)
        for result in results:
            if isinstance(result, asyncio.CancelledError):
                raise result
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]

    # -- status ---------------------------------------------------------------------------

    def calculate_status(
        self, owner: Obj, pods: list[Obj], manage_error: BaseException | None
    ) -> Obj:
        spec = owner.get("spec") or {}
        min_ready = int(spec.get("minReadySeconds") or 0)
        template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        now = datetime.now(UTC)
        fully_labeled = sum(
            1 for p in pods if all(labels_of(p).get(k) == v for k, v in template_labels.items())
        )
        ready = sum(1 for p in pods if is_ready(p))
        available = sum(1 for p in pods if is_available(p, min_ready_seconds=min_ready, now=now))
        status = copy.deepcopy(owner.get("status") or {})
        status["replicas"] = len(pods)
        for field, value in (
            ("fullyLabeledReplicas", fully_labeled),
            ("readyReplicas", ready),
            ("availableReplicas", available),
        ):
            if value:
                status[field] = value
            else:
                status.pop(field, None)  # omitempty, as Kubernetes writes them
        generation = owner["metadata"].get("generation")
        if generation is not None:
            status["observedGeneration"] = generation
        conditions = [
            c for c in status.get("conditions") or [] if c.get("type") != "ReplicaFailure"
        ]
        failure = next(
            (c for c in status.get("conditions") or [] if c.get("type") == "ReplicaFailure"), None
        )
        if manage_error is not None:
            if failure is None:
                diff = len(pods) - int(spec.get("replicas", 1))
                failure = {
                    "type": "ReplicaFailure",
                    "status": "True",
                    "lastTransitionTime": now_time(),
                    "reason": "FailedCreate" if diff < 0 else "FailedDelete",
                    "message": _message(manage_error),
                }
            conditions.append(failure)
        if conditions:
            status["conditions"] = conditions
        else:
            status.pop("conditions", None)
        return status

    async def _update_status(
        self, owner: Obj, pods: list[Obj], manage_error: BaseException | None
    ) -> None:
        status = self.calculate_status(owner, pods, manage_error)
        if status == (owner.get("status") or {}):
            return
        meta = owner["metadata"]

        def set_status(fresh: Obj) -> bool:
            if fresh["metadata"].get("uid") != meta.get("uid"):
                return False
            if fresh.get("status") == status:
                return False
            fresh["status"] = status
            return True

        try:
            await update_with_retry(
                self.client,
                self.kind.rt,
                namespace=meta["namespace"],
                name=meta["name"],
                mutate=set_status,
                subresource="status",
            )
        except NotFound:
            return
