"""The namespace controller: deleting a namespace deletes everything in it, then the namespace.

Why: ``kubectl delete namespace x`` only marks it (``deletionTimestamp``, phase
``Terminating``); the apiserver keeps it while its ``spec.finalizers`` holds ``kubernetes``
and refuses new content in it meanwhile. This controller (``pkg/controller/namespace``) then:

1. deletes every namespaced kind in it — ``deletecollection`` where the kind serves it, else
   list and delete one by one — with the default (background) propagation, so pods go through
   their graceful deletion and the garbage collector sees owners go;
2. lists what is left; while anything remains (pods still terminating, objects held by
   finalizers) it sets the ``NamespaceContentRemaining`` / ``NamespaceFinalizersRemaining``
   conditions and waits — woken by the deletion events of the shared informers, with a
   fallback retry in case content sits in a kind no informer watches (Events);
3. once empty, removes ``kubernetes`` from ``spec.finalizers`` through ``.../finalize``, and
   the apiserver deletes the namespace.

Limits: the kinds come from the registry kubelite serves (no discovery of aggregated APIs);
no per-kind deletion-time estimate beyond the fallback.
"""

from __future__ import annotations

import logging
from typing import Any

from api.errors import MethodNotAllowed, NotFound, StatusError
from api.meta import now_time
from api.registry import REGISTRY, ResourceType
from client.controller import Controller
from client.rest import ApiClient, resource_path
from client.workqueue import WorkQueue
from services.controller_manager.informers import SharedInformers
from services.controller_manager.retry_on_conflict import update_with_retry

__all__ = ["FINALIZER", "NamespaceController", "namespaced_kinds"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

FINALIZER = "kubernetes"
CONTENT_RETRY = 5.0
"""Seconds before looking again at a namespace whose content is still going (a fallback:
deletion events of watched kinds wake it sooner)."""


def namespaced_kinds() -> list[ResourceType]:
    return [rt for rt in REGISTRY if rt.namespaced and "delete" in rt.verbs and "list" in rt.verbs]


class NamespaceController:
    def __init__(self, *, client: ApiClient, informers: SharedInformers, workers: int = 10) -> None:
        self.name = "namespace"
        self.client = client
        self.workers = workers
        ns_rt = REGISTRY.by_kind("", "Namespace")
        assert ns_rt is not None
        self.ns_rt = ns_rt
        self.namespaces = informers.get(ns_rt)
        self.queue: WorkQueue[str] = WorkQueue(name="namespace")
        self.namespaces.add_handler(on_add=self._enqueue, on_update=lambda _o, n: self._enqueue(n))
        self._watched = []
        for rt in namespaced_kinds():
            if rt.group == "" and rt.kind == "Event":
                continue  # events are swept by deletecollection and the fallback retry
            informer = informers.get(rt)
            informer.add_handler(on_delete=self._content_gone)
            self._watched.append(informer)

    async def run(self) -> None:
        await Controller(
            name=self.name,
            queue=self.queue,
            reconcile=self.sync,
            workers=self.workers,
            wait_for=[self.namespaces, *self._watched],
        ).run()

    def _enqueue(self, ns: Obj) -> None:
        if ns["metadata"].get("deletionTimestamp"):
            self.queue.add(ns["metadata"]["name"])

    def _content_gone(self, obj: Obj) -> None:
        namespace: str | None = (obj.get("metadata") or {}).get("namespace")
        if not namespace:
            return
        ns = self.namespaces.get(namespace)
        if ns is not None and ns["metadata"].get("deletionTimestamp"):
            self.queue.add(namespace)

    async def sync(self, name: str) -> float | None:
        ns = self.namespaces.get(name)
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return None
        if FINALIZER not in ((ns.get("spec") or {}).get("finalizers") or []):
            return None
        remaining, finalizers = await self._delete_content(name)
        if remaining:
            await self._set_conditions(name, remaining, finalizers)
            log.info("namespace %s: waiting for %d object(s) to go (%s)", name,
                     sum(remaining.values()), ", ".join(f"{k}: {v}" for k, v in sorted(remaining.items())))  # fmt: skip
            return CONTENT_RETRY

        def finalize(fresh: Obj) -> bool:
            spec = fresh.setdefault("spec", {})
            current = list(spec.get("finalizers") or [])
            if FINALIZER not in current:
                return False
            spec["finalizers"] = [f for f in current if f != FINALIZER]
            return True

        try:
            await update_with_retry(
                self.client,
                self.ns_rt,
                namespace=None,
                name=name,
                mutate=finalize,
                subresource="finalize",
            )
        except NotFound:
            return None
        log.info("namespace %s: empty; finalized, the apiserver removes it now", name)
        return None

    async def _delete_content(self, namespace: str) -> tuple[dict[str, int], dict[str, int]]:
        """Delete every namespaced kind; (what remains per plural, finalizers holding it)."""
        remaining: dict[str, int] = {}
        finalizers: dict[str, int] = {}
        for rt in namespaced_kinds():
            path = resource_path(rt, namespace=namespace)
            if "deletecollection" in rt.verbs:
                try:
                    await self.client.request(
                        "DELETE", path, body={"kind": "DeleteOptions", "apiVersion": "v1"}
                    )
                except (MethodNotAllowed, NotFound):
                    await self._delete_each(rt, namespace)
            else:
                await self._delete_each(rt, namespace)
            items = (await self.client.list(rt, namespace=namespace))["items"]
            if items:
                remaining[rt.plural] = len(items)
                for item in items:
                    for f in (item.get("metadata") or {}).get("finalizers") or []:
                        finalizers[f] = finalizers.get(f, 0) + 1
        return remaining, finalizers

    async def _delete_each(self, rt: ResourceType, namespace: str) -> None:
        for item in (await self.client.list(rt, namespace=namespace))["items"]:
            meta = item.get("metadata") or {}
            if meta.get("deletionTimestamp"):
                continue
            try:
                await self.client.delete(rt, meta["name"], namespace=namespace)
            except NotFound:
                continue

    async def _set_conditions(
        self, name: str, remaining: dict[str, int], finalizers: dict[str, int]
    ) -> None:
        content = ", ".join(
            f"{plural} has {n} resource instances" for plural, n in sorted(remaining.items())
        )
        wanted = [
            {
                "type": "NamespaceContentRemaining",
                "status": "True",
                "reason": "SomeResourcesRemain",
                "message": f"Some resources are remaining: {content}",
            }
        ]
        if finalizers:
            held = ", ".join(
                f"{f} in {n} resource instances" for f, n in sorted(finalizers.items())
            )
            wanted.append(
                {
                    "type": "NamespaceFinalizersRemaining",
                    "status": "True",
                    "reason": "SomeFinalizersRemain",
                    "message": f"Some content in the namespace has finalizers remaining: {held}",
                }
            )

        def set_conditions(fresh: Obj) -> bool:
            status = fresh.setdefault("status", {})
            current = {c.get("type"): c for c in status.get("conditions") or []}
            changed = False
            for cond in wanted:
                old = current.get(cond["type"])
                if old is not None and all(old.get(k) == v for k, v in cond.items()):
                    continue
                current[cond["type"]] = {**cond, "lastTransitionTime": now_time()}
                changed = True
            if changed:
                status["conditions"] = list(current.values())
            return changed

        try:
            await update_with_retry(
                self.client,
                self.ns_rt,
                namespace=None,
                name=name,
                mutate=set_conditions,
                subresource="status",
            )
        except (NotFound, StatusError) as exc:
            log.debug("namespace %s: could not record conditions: %r", name, exc)
