"""The StatefulSet controller: pods with stable names, network identity and storage, started,
stopped and updated in order (``pkg/controller/statefulset/stateful_set.go``).

Why: a ReplicaSet's pods are interchangeable; a StatefulSet's are not. ``web-1`` is always
``web-1``, with hostname ``web-1`` under the set's Service, and always mounts the claim
``data-web-1`` — so a database replica that is rescheduled comes back to its own data. This
module is the controller's shell, as Kubernetes' ``StatefulSetController`` is:

* informers on StatefulSets, pods, PersistentVolumeClaims and ControllerRevisions (shared);
* handlers turn events into set keys: a pod's controller (or, for an orphan, every set whose
  selector matches it), a claim's sets by selector (a claim going away may unblock a pod);
  a pod that turns ready under ``minReadySeconds`` is looked at again once it can be
  available;
* ``sync(key)`` claims the set's ControllerRevisions and its pods (adopting orphans that match
  the selector *and* are named like its members, releasing those whose labels stopped
  matching — ``controller_ref``), then hands them to ``StatefulSetControl`` for one round
  (``statefulset_control``: revisions, ordered creation and deletion, rolling update,
  status). A set not fully available with ``minReadySeconds`` is looked at again after that
  many seconds.

The rules of identity and storage are in ``statefulset_pods``, claim retention in
``statefulset_claims``, the writes and their events in ``statefulset_pod_control``.

Limits: no expectations (as in Kubernetes, the fixed names are the guard: a pod created twice
is AlreadyExists, and the round is retried); a pod of the set controlled by it but no longer
named like a member is ignored rather than released; ``--concurrent-statefulset-syncs`` is
fixed at Kubernetes' default of 5.
"""

from __future__ import annotations

import logging
from typing import Any

from api.errors import NotFound
from api.selectors import label_selector_from_dict
from client.cache import object_key
from client.controller import Controller
from client.events import EventRecorder
from client.rest import ApiClient
from client.workqueue import WorkQueue
from services.controller_manager.controller_history import CONTROLLER_REVISIONS, ControllerHistory
from services.controller_manager.controller_ref import (
    OwnerGone,
    claim,
    controller_ref,
    is_being_deleted,
    labels_of,
    resolve_controller_ref,
)
from services.controller_manager.informers import SharedInformers
from services.controller_manager.pod_state import is_ready
from services.controller_manager.statefulset_control import StatefulSetControl
from services.controller_manager.statefulset_pod_control import CLAIMS, PODS, StatefulPodControl
from services.controller_manager.statefulset_pods import STATEFULSETS, is_member

__all__ = ["StatefulSetController"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

CONCURRENT_SYNCS = 5
"""Kubernetes' ``--concurrent-statefulset-syncs`` default."""


def _namespace(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def _min_ready(sts: Obj) -> int:
    return int((sts.get("spec") or {}).get("minReadySeconds") or 0)


class StatefulSetController:
    """``await run()`` until cancelled."""

    def __init__(
        self,
        *,
        client: ApiClient,
        informers: SharedInformers,
        recorder: EventRecorder,
        workers: int = CONCURRENT_SYNCS,
    ) -> None:
        self.name = "statefulset"
        self.client = client
        self.workers = workers
        self.sets = informers.get(STATEFULSETS)
        self.pods = informers.get(PODS)
        self.claims = informers.get(CLAIMS)
        self.revisions = informers.get(CONTROLLER_REVISIONS)
        self.history = ControllerHistory(client=client, informer=self.revisions)
        self.control = StatefulSetControl(
            client=client,
            pods=StatefulPodControl(client=client, recorder=recorder, claims=self.claims),
            history=self.history,
        )
        self.queue: WorkQueue[str] = WorkQueue(name="statefulset")
        self.sets.add_handler(on_change=self._enqueue)
        self.pods.add_handler(
            on_add=self._pod_added, on_update=self._pod_updated, on_delete=self._pod_deleted
        )
        self.claims.add_handler(on_add=self._claim_changed, on_delete=self._claim_changed)

    async def run(self) -> None:
        await Controller(
            name=self.name,
            queue=self.queue,
            reconcile=self.sync,
            workers=self.workers,
            wait_for=[self.sets, self.pods, self.claims, self.revisions],
        ).run()

    # -- event handlers: events -> set keys -----------------------------------------------

    def _enqueue(self, sts: Obj) -> None:
        self.queue.add(object_key(sts))

    def _owner_of(self, pod: Obj) -> Obj | None:
        return resolve_controller_ref(
            controller_ref(pod), namespace=_namespace(pod), rt=STATEFULSETS, owners=self.sets
        )

    def _matching_sets(self, obj: Obj) -> list[Obj]:
        labels = labels_of(obj)
        return [
            s
            for s in self.sets.by_index("namespace", _namespace(obj))
            if label_selector_from_dict((s.get("spec") or {}).get("selector")).matches(labels)
        ]

    def _pod_added(self, pod: Obj) -> None:
        if controller_ref(pod) is not None:
            owner = self._owner_of(pod)
            if owner is not None:
                self._enqueue(owner)
            return
        for sts in self._matching_sets(pod):
            self._enqueue(sts)

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
            return  # a resync replay: nothing changed
        old_owner = self._owner_of(old)
        owner = self._owner_of(new)
        if old_owner is not None and old_owner is not owner:
            self._enqueue(old_owner)
        if owner is not None:
            self._enqueue(owner)
            if _min_ready(owner) > 0 and not is_ready(old) and is_ready(new):
                # look again once it has been ready long enough to be available
                self.queue.add_after(object_key(owner), float(_min_ready(owner)) + 1.0)
            return
        if controller_ref(new) is None and labels_of(old) != labels_of(new):
            for sts in self._matching_sets(new):
                self._enqueue(sts)

    def _pod_deleted(self, pod: Obj) -> None:
        owner = self._owner_of(pod)
        if owner is not None:
            self._enqueue(owner)

    def _claim_changed(self, claim_obj: Obj) -> None:
        for sts in self._matching_sets(claim_obj):
            if (sts.get("spec") or {}).get("volumeClaimTemplates"):
                self._enqueue(sts)

    # -- reconcile ------------------------------------------------------------------------

    async def sync(self, key: str) -> float | None:
        sts = self.sets.get(key)
        if sts is None:
            return None
        selector = label_selector_from_dict((sts.get("spec") or {}).get("selector"))
        namespace = _namespace(sts)

        async def can_adopt() -> None:
            await self._can_adopt(sts)

        try:
            revisions = await self.history.claim(
                sts, STATEFULSETS, selector=selector, can_adopt=can_adopt
            )
            pods = await claim(
                self.client,
                owner=sts,
                owner_rt=STATEFULSETS,
                child_rt=PODS,
                selector=selector,
                candidates=[
                    p for p in self.pods.by_index("namespace", namespace) if is_member(sts, p)
                ],
                can_adopt=can_adopt,
            )
            status = await self.control.update(sts, pods, revisions)
        except (OwnerGone, NotFound):
            # the set went away mid-round (or what the round wrote to did): the informer's
            # next event says what is left to do
            return None
        min_ready = _min_ready(sts)
        replicas = int((sts.get("spec") or {}).get("replicas", 1))
        if min_ready > 0 and status.get("availableReplicas", 0) != replicas:
            return float(min_ready)
        return None

    async def _can_adopt(self, sts: Obj) -> None:
        """Adopt only for the set that really exists now (a fresh read, not the cache)."""
        meta = sts["metadata"]
        try:
            fresh = await self.client.get(STATEFULSETS, meta["name"], namespace=meta["namespace"])
        except NotFound:
            raise OwnerGone(meta["name"]) from None
        if fresh["metadata"].get("uid") != meta.get("uid") or is_being_deleted(fresh):
            raise OwnerGone(meta["name"])
