"""Which Deployment a ReplicaSet or pod event concerns: the controller's informer handlers.

Why a module of its own: a Deployment must be synced not only when it changes but when one of
its ReplicaSets does (created, resized, its status moved, adopted or released) and, for
Recreate, when one of its old pods is gone. Mapping those events back to the owning Deployment
is ``addReplicaSet`` / ``updateReplicaSet`` / ``deleteReplicaSet`` / ``deletePod`` in
``pkg/controller/deployment/deployment_controller.go``.

What it owns: the lookup from a ReplicaSet to its controlling Deployment (by its controller
reference, or — for an orphan — every Deployment whose selector matches it, so one of them may
adopt it), and the handlers that enqueue the keys found.

What it does not guarantee: handlers see the informer's view, which may lag the server; an
event whose owner is not in the cache yet enqueues nothing (the owner's own add event will).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from api.registry import REGISTRY
from api.selectors import label_selector_from_dict
from client.informer import Informer
from services.controller_manager import rollout as ro
from services.controller_manager.controller_ref import (
    controller_ref,
    labels_of,
    resolve_controller_ref,
)

__all__ = ["DeploymentTriggers"]

Obj = dict[str, Any]

DEPLOYMENTS = REGISTRY.require("apps", "Deployment")


class DeploymentTriggers:
    """Informer handlers that enqueue (through ``enqueue``) the Deployments an event concerns."""

    def __init__(
        self,
        *,
        deployments: Informer,
        rss: Informer,
        enqueue: Callable[[Obj], None],
    ) -> None:
        self.deployments = deployments
        self.rss = rss
        self.enqueue = enqueue

    def _resolve(self, namespace: str, ref: dict[str, Any] | None) -> Obj | None:
        return resolve_controller_ref(
            ref, namespace=namespace, rt=DEPLOYMENTS, owners=self.deployments
        )

    def _enqueue_owner(self, namespace: str, ref: dict[str, Any] | None) -> None:
        d = self._resolve(namespace, ref)
        if d is not None:
            self.enqueue(d)

    def _matching(self, rs: Obj) -> list[Obj]:
        namespace = rs["metadata"].get("namespace") or ""
        labels = labels_of(rs)
        out = []
        for d in self.deployments.by_index("namespace", namespace):
            selector = label_selector_from_dict((d.get("spec") or {}).get("selector"))
            if not selector.empty and selector.matches(labels):
                out.append(d)
        return out

    def rs_added(self, rs: Obj) -> None:
        ref = controller_ref(rs)
        if ref is not None:
            self._enqueue_owner(rs["metadata"].get("namespace") or "", ref)
            return
        for d in self._matching(rs):
            self.enqueue(d)

    def rs_updated(self, old: Obj, new: Obj) -> None:
        if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
            return
        namespace = new["metadata"].get("namespace") or ""
        cur, prev = controller_ref(new), controller_ref(old)
        changed = (cur or {}).get("uid") != (prev or {}).get("uid")
        if changed and prev is not None:
            self._enqueue_owner(namespace, prev)
        if cur is not None:
            self._enqueue_owner(namespace, cur)
            return
        if changed or labels_of(old) != labels_of(new):
            for d in self._matching(new):
                self.enqueue(d)

    def rs_deleted(self, rs: Obj) -> None:
        self._enqueue_owner(rs["metadata"].get("namespace") or "", controller_ref(rs))

    def pod_deleted(self, pod: Obj) -> None:
        """Recreate waits for the old pods to be gone: a pod deletion may unblock it."""
        namespace = pod["metadata"].get("namespace") or ""
        ref = controller_ref(pod)
        if ref is None or ref.get("kind") != "ReplicaSet":
            return
        rs = self.rss.get(f"{namespace}/{ref.get('name')}")
        if rs is None:
            return
        d = self._resolve(namespace, controller_ref(rs))
        if d is not None and ro.is_recreate(d):
            self.enqueue(d)
