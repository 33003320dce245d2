"""The garbage collector: deletes dependents whose owners are gone, honouring the three
propagation policies, as ``pkg/controller/garbagecollector`` does.

Why: ``ownerReferences`` make objects into a graph (a Deployment owns ReplicaSets, which own
pods; a Node owns its Lease). Deleting an owner must, by default, delete its dependents —
without the apiserver doing it inline and without every controller doing it on its own.

The graph is the shared informer caches themselves: every monitored resource (every served
kind that can be listed and watched, except Events) is indexed by ``ownerReferences[].uid``,
so "the dependents of X" is an index lookup. Two work queues of object identities
(apiVersion, kind, namespace, name, uid):

* **attempt to delete** — an object is queued when it appears or changes with an owner that is
  not in the cache or is being deleted in the foreground, when one of its owners disappears,
  and (for owners in foreground deletion) the owner itself. Processing reads the object fresh
  and classifies each owner with a fresh read when the cache does not have it (Kubernetes'
  ``isDangling``: a cache miss is never trusted to mean "gone"):
  - some owner still exists and is not deleting in the foreground ("solid"): only the
    references to dangling or foreground-deleting owners are removed;
  - otherwise, if an owner is deleting in the foreground and the object has dependents of its
    own: delete it with ``Foreground`` (after unblocking a circular wait);
  - otherwise delete it, propagating what its own finalizers ask (``orphan`` → Orphan,
    ``foregroundDeletion`` → Foreground, else Background). Deletes carry a uid precondition.
* an object **deleting its dependents** (``deletionTimestamp`` + ``foregroundDeletion``)
  queues those dependents that block it (``blockOwnerDeletion: true``); when none is left,
  the finalizer is removed and the apiserver deletes the object;
* **attempt to orphan** — an owner with ``deletionTimestamp`` + ``orphan``: its reference is
  removed from every dependent, then the ``orphan`` finalizer from the owner.

Owners known to be absent (a 404, a uid mismatch, an observed deletion) are remembered by uid
(an LRU of 500, Kubernetes' size), since a uid never comes back.

Limits: Events are not monitored (nothing owns them in practice, and they are the busiest
kind); an ownerReference to a kind kubelite does not serve is treated as a live owner (never
collected) and logged; the cluster-scoped/namespaced owner mismatch checks and their warning
events are not implemented.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import OrderedDict
from collections.abc import Collection
from typing import Any, Literal, NamedTuple

from api.errors import Conflict, NotFound
from api.registry import REGISTRY, ResourceType
from client.controller import Controller
from client.informer import Informer
from client.rest import ApiClient
from client.workqueue import WorkQueue
from services.controller_manager.informers import OWNER_UID_INDEX, UID_INDEX, SharedInformers
from services.controller_manager.retry_on_conflict import update_with_retry

__all__ = ["FOREGROUND", "ORPHAN", "GarbageCollector", "Identity", "monitored_resources"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Policy = Literal["Orphan", "Background", "Foreground"]

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"
ABSENT_OWNER_CACHE_SIZE = 500


class Identity(NamedTuple):
    api_version: str
    kind: str
    namespace: str | None
    name: str
    uid: str

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where} ({self.uid})"


def monitored_resources() -> list[ResourceType]:
    """Every served kind the collector watches: listable, watchable, and not Events."""
    return [
        rt
        for rt in REGISTRY
        if "watch" in rt.verbs
        and "list" in rt.verbs
        and not (rt.group == "" and rt.kind == "Event")
    ]


def _identity(rt: ResourceType, obj: Obj) -> Identity:
    meta = obj.get("metadata") or {}
    return Identity(
        rt.api_version,
        rt.kind,
        meta.get("namespace") if rt.namespaced else None,
        str(meta.get("name") or ""),
        str(meta.get("uid") or ""),
    )


def _refs(obj: Obj) -> list[dict[str, Any]]:
    return [
        r for r in (obj.get("metadata") or {}).get("ownerReferences") or [] if isinstance(r, dict)
    ]


def _finalizers(obj: Obj) -> list[str]:
    return list((obj.get("metadata") or {}).get("finalizers") or [])


def _deleting(obj: Obj) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def deleting_dependents(obj: Obj) -> bool:
    """In foreground deletion: being deleted, and waiting for its dependents to go first."""
    return _deleting(obj) and FOREGROUND in _finalizers(obj)


def orphaning(obj: Obj) -> bool:
    return _deleting(obj) and ORPHAN in _finalizers(obj)


class GarbageCollector:
    def __init__(self, *, client: ApiClient, informers: SharedInformers, workers: int = 20) -> None:
        self.name = "garbagecollector"
        self.client = client
        self.workers = workers
        self.monitors: dict[tuple[str, str], tuple[ResourceType, Informer]] = {}
        for rt in monitored_resources():
            informer = informers.get(rt)
            self.monitors[(rt.api_version, rt.kind)] = (rt, informer)
            informer.add_handler(
                on_add=functools.partial(self._changed, rt, None),
                on_update=functools.partial(self._changed, rt),
                on_delete=functools.partial(self._deleted, rt),
            )
        self.attempt_to_delete: WorkQueue[Identity] = WorkQueue(name="garbage collector: delete")
        self.attempt_to_orphan: WorkQueue[Identity] = WorkQueue(name="garbage collector: orphan")
        self._absent: OrderedDict[str, None] = OrderedDict()
        self._unknown_kinds: set[tuple[str, str]] = set()

    async def run(self) -> None:
        informers = [informer for _, informer in self.monitors.values()]
        controllers = [
            Controller(name="garbagecollector-delete", queue=self.attempt_to_delete,
                       reconcile=self._attempt_to_delete, workers=self.workers,
                       wait_for=informers),
            Controller(name="garbagecollector-orphan", queue=self.attempt_to_orphan,
                       reconcile=self._attempt_to_orphan, workers=self.workers,
                       wait_for=informers),
        ]  # fmt: skip
        tasks = [asyncio.create_task(c.run(), name=c.name) for c in controllers]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- the graph, read from the caches --------------------------------------------------

    def _monitor(self, api_version: str, kind: str) -> tuple[ResourceType, Informer] | None:
        return self.monitors.get((api_version, kind))

    def dependents(self, uid: str) -> list[tuple[ResourceType, Obj]]:
        return [
            (rt, obj)
            for rt, informer in self.monitors.values()
            for obj in informer.by_index(OWNER_UID_INDEX, uid)
        ]

    def _cached_owner(self, ref: dict[str, Any]) -> Obj | None:
        found = self._monitor(str(ref.get("apiVersion")), str(ref.get("kind")))
        if found is None:
            return None
        owners = found[1].by_index(UID_INDEX, str(ref.get("uid")))
        return owners[0] if owners else None

    def _mark_absent(self, uid: str) -> None:
        self._absent[uid] = None
        self._absent.move_to_end(uid)
        while len(self._absent) > ABSENT_OWNER_CACHE_SIZE:
            self._absent.popitem(last=False)

    # -- event handlers -------------------------------------------------------------------

    def _changed(self, rt: ResourceType, old: Obj | None, new: Obj) -> None:
        ident = _identity(rt, new)
        if orphaning(new):
            self.attempt_to_orphan.add(ident)
        if deleting_dependents(new):
            self.attempt_to_delete.add(ident)
            for dep_rt, dep in self.dependents(ident.uid):
                self.attempt_to_delete.add(_identity(dep_rt, dep))
        refs = _refs(new)
        for ref in refs:
            if str(ref.get("uid")) in self._absent:
                self.attempt_to_delete.add(ident)
                break
            owner = self._cached_owner(ref)
            if owner is None or deleting_dependents(owner):
                self.attempt_to_delete.add(ident)
                break
        if old is not None:
            # references removed from a dependent may unblock an owner deleting in foreground
            kept = {str(r.get("uid")) for r in refs}
            for ref in _refs(old):
                if str(ref.get("uid")) in kept:
                    continue
                owner = self._cached_owner(ref)
                if owner is not None and deleting_dependents(owner):
                    self._enqueue_owner(ref, owner)

    def _deleted(self, rt: ResourceType, obj: Obj) -> None:
        ident = _identity(rt, obj)
        self._mark_absent(ident.uid)
        for dep_rt, dep in self.dependents(ident.uid):
            self.attempt_to_delete.add(_identity(dep_rt, dep))
        for ref in _refs(obj):
            owner = self._cached_owner(ref)
            if owner is not None and deleting_dependents(owner):
                self._enqueue_owner(ref, owner)

    def _enqueue_owner(self, ref: dict[str, Any], owner: Obj) -> None:
        found = self._monitor(str(ref.get("apiVersion")), str(ref.get("kind")))
        if found is not None:
            self.attempt_to_delete.add(_identity(found[0], owner))

    # -- attempt to delete ----------------------------------------------------------------

    async def _get_live(self, ident: Identity) -> tuple[ResourceType, Obj] | None:
        found = self._monitor(ident.api_version, ident.kind)
        if found is None:
            return None
        rt = found[0]
        try:
            obj = await self.client.get(rt, ident.name, namespace=ident.namespace)
        except NotFound:
            return None
        if (obj.get("metadata") or {}).get("uid") != ident.uid:
            return None
        return rt, obj

    async def _attempt_to_delete(self, ident: Identity) -> None:
        live = await self._get_live(ident)
        if live is None:
            return
        rt, obj = live
        if deleting_dependents(obj):
            await self._process_deleting_dependents(ident, rt)
            return
        if _deleting(obj):
            return  # already on its way out, with nothing for us to wait on
        refs = _refs(obj)
        if not refs:
            return
        solid: list[dict[str, Any]] = []
        dangling: list[dict[str, Any]] = []
        waiting: list[dict[str, Any]] = []
        for ref in refs:
            state = await self._classify(ref, namespace=ident.namespace)
            {"solid": solid, "dangling": dangling, "waiting": waiting}[state].append(ref)
        if solid:
            if dangling or waiting:
                gone = {str(r.get("uid")) for r in [*dangling, *waiting]}
                log.info("%s: removing references to owners %s that are gone or going",
                         ident, ", ".join(sorted(gone)))  # fmt: skip
                await self._edit_refs(rt, ident, drop=gone)
            return
        if waiting and self.dependents(ident.uid):
            if any(deleting_dependents(dep) for _, dep in self.dependents(ident.uid)):
                # a dependent waits on us while we wait on our owner: stop blocking the owner
                await self._edit_refs(rt, ident, unblock={str(r.get("uid")) for r in waiting})
            await self._delete(rt, ident, "Foreground")
            return
        finalizers = _finalizers(obj)
        policy: Policy = (
            "Orphan"
            if ORPHAN in finalizers
            else "Foreground"
            if FOREGROUND in finalizers
            else "Background"
        )
        await self._delete(rt, ident, policy)

    async def _classify(
        self, ref: dict[str, Any], *, namespace: str | None
    ) -> Literal["solid", "dangling", "waiting"]:
        uid = str(ref.get("uid"))
        if uid in self._absent:
            return "dangling"
        owner = self._cached_owner(ref)
        if owner is None:
            key = (str(ref.get("apiVersion")), str(ref.get("kind")))
            found = self._monitor(*key)
            if found is None:
                if key not in self._unknown_kinds:
                    self._unknown_kinds.add(key)
                    log.warning("ownerReference to %s %s, a kind kubelite does not serve; "
                                "treating such owners as present", key[1], key[0])  # fmt: skip
                return "solid"
            rt = found[0]
            try:
                owner = await self.client.get(
                    rt, str(ref.get("name")), namespace=namespace if rt.namespaced else None
                )
            except NotFound:
                self._mark_absent(uid)
                return "dangling"
            if (owner.get("metadata") or {}).get("uid") != uid:
                self._mark_absent(uid)
                return "dangling"
        return "waiting" if deleting_dependents(owner) else "solid"

    async def _delete(self, rt: ResourceType, ident: Identity, policy: Policy) -> None:
        log.info("deleting %s (owners gone), propagation %s", ident, policy)
        try:
            await self.client.delete(
                rt,
                ident.name,
                namespace=ident.namespace,
                propagation_policy=policy,
                preconditions={"uid": ident.uid},
            )
        except (NotFound, Conflict):
            return  # gone already, or a namesake with another uid

    async def _edit_refs(
        self,
        rt: ResourceType,
        ident: Identity,
        *,
        drop: Collection[str] = (),
        unblock: Collection[str] = (),
    ) -> None:
        def edit(fresh: Obj) -> bool:
            meta = fresh["metadata"]
            if meta.get("uid") != ident.uid:
                return False
            refs = _refs(fresh)
            new_refs = []
            for ref in refs:
                uid = str(ref.get("uid"))
                if uid in drop:
                    continue
                if uid in unblock and ref.get("blockOwnerDeletion"):
                    ref = {**ref, "blockOwnerDeletion": False}
                new_refs.append(ref)
            if new_refs == refs:
                return False
            if new_refs:
                meta["ownerReferences"] = new_refs
            else:
                meta.pop("ownerReferences", None)
            return True

        try:
            await update_with_retry(
                self.client, rt, namespace=ident.namespace, name=ident.name, mutate=edit
            )
        except NotFound:
            return

    async def _remove_finalizer(self, rt: ResourceType, ident: Identity, finalizer: str) -> None:
        def edit(fresh: Obj) -> bool:
            meta = fresh["metadata"]
            finalizers = list(meta.get("finalizers") or [])
            if meta.get("uid") != ident.uid or finalizer not in finalizers:
                return False
            meta["finalizers"] = [f for f in finalizers if f != finalizer]
            return True

        try:
            await update_with_retry(
                self.client, rt, namespace=ident.namespace, name=ident.name, mutate=edit
            )
        except NotFound:
            return
        log.info("%s: removed finalizer %s", ident, finalizer)

    async def _process_deleting_dependents(self, ident: Identity, rt: ResourceType) -> None:
        blocking = []
        for dep_rt, dep in self.dependents(ident.uid):
            ref = next((r for r in _refs(dep) if str(r.get("uid")) == ident.uid), None)
            if ref is not None and ref.get("blockOwnerDeletion"):
                blocking.append((dep_rt, dep))
        if not blocking:
            await self._remove_finalizer(rt, ident, FOREGROUND)
            return
        log.debug("%s waits for %d blocking dependents", ident, len(blocking))
        for dep_rt, dep in blocking:
            if not deleting_dependents(dep):
                self.attempt_to_delete.add(_identity(dep_rt, dep))

    # -- attempt to orphan ----------------------------------------------------------------

    async def _attempt_to_orphan(self, ident: Identity) -> None:
        live = await self._get_live(ident)
        if live is None:
            return
        rt, obj = live
        if not orphaning(obj):
            return
        dependents = self.dependents(ident.uid)
        log.info("%s: orphaning %d dependents", ident, len(dependents))
        await asyncio.gather(
            *(self._edit_refs(dep_rt, _identity(dep_rt, dep), drop={ident.uid})
              for dep_rt, dep in dependents)
        )  # fmt: skip
        await self._remove_finalizer(rt, ident, ORPHAN)
