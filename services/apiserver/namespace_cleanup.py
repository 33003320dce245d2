"""Emptying terminating namespaces: the namespace controller's job, done in-process.

Why: deleting a namespace only marks it ``Terminating`` (``deletionTimestamp`` set,
``spec.finalizers: [kubernetes]``); in Kubernetes the controller-manager's namespace controller
then deletes everything in it and, once it is empty, removes the ``kubernetes`` finalizer
through ``.../finalize`` — which deletes the namespace. kubelite's controller-manager has no
namespace controller, so the apiserver runs this small one itself (a named task owned by the
app), so that ``kubectl delete namespace x`` finishes.

How: it watches namespaces through the watch cache. For each terminating namespace still
carrying the ``kubernetes`` finalizer it deletes every object of every namespaced resource in
it, with the ordinary deletion protocol (pods bound to a node terminate gracefully and are
finished by their kubelet; objects with finalizers wait for them). While any namespace is still
draining it looks again every ``recheck`` seconds — the one poll, needed because the objects
it waits for are of every kind; once the namespace is empty it removes the finalizer.

Limits: no ``NamespaceDeletionContentFailure`` conditions on the namespace; objects whose
finalizers are never removed keep their namespace Terminating, as in Kubernetes.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any, NoReturn

from api.errors import Conflict, NotFound, StatusError
from api.meta import DeleteOptions
from services.apiserver.context import ApiContext
from services.apiserver.deletion import NAMESPACE_FINALIZER, delete_object
from services.apiserver.predicate import Predicate
from services.apiserver.watchcache import WatcherClosed

__all__ = ["drain_namespace", "run_namespace_cleanup"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]


def _awaits_cleanup(ns: Obj) -> bool:
    meta = ns.get("metadata") or {}
    finalizers = (ns.get("spec") or {}).get("finalizers") or []
    return bool(meta.get("deletionTimestamp")) and NAMESPACE_FINALIZER in finalizers


async def drain_namespace(ctx: ApiContext, name: str) -> bool:
    """Delete what is left in namespace ``name``; finalize it once empty. True when done."""
    remaining = 0
    for rt in ctx.registry:
        if not rt.namespaced or "delete" not in rt.verbs:
            continue
        page = await ctx.storage(rt).list(name)
        for obj in page.items:
            remaining += 1
            meta = obj["metadata"]
            if meta.get("deletionTimestamp"):
                continue  # already terminating: its kubelet or finalizers finish it
            try:
                await delete_object(ctx, rt, name, meta["name"], DeleteOptions())
            except (NotFound, Conflict):
                continue
    if remaining:
        return False
    ns_rt = ctx.resource("", "namespaces")

    async def finalize(current: Obj) -> Obj | None:
        if not _awaits_cleanup(current):
            return None
        new = copy.deepcopy(current)
        spec = new.setdefault("spec", {})
        spec["finalizers"] = [f for f in spec.get("finalizers") or [] if f != NAMESPACE_FINALIZER]
        return new

    try:
        await ctx.storage(ns_rt).guaranteed_update(None, name, finalize)
    except NotFound:
        pass
    log.info("namespace %s is empty; finalized", name)
    return True


async def run_namespace_cleanup(ctx: ApiContext, *, recheck: float = 1.0) -> NoReturn:
    """Forever: drain every terminating namespace (see the module docstring)."""
    ns_rt = ctx.resource("", "namespaces")
    cache = ctx.cache(ns_rt)
    assert cache is not None
    await cache.ready.wait()
    everything = Predicate.parse(ns_rt, namespace=None)
    pending: set[str] = set()
    while True:
        watcher = cache.watch_from_state(everything)
        try:
            while True:
                batch = await watcher.next_batch(max_wait=recheck if pending else None)
                for delivery in batch:
                    if delivery.event is None:
                        continue
                    ns = delivery.event.obj
                    name = str((ns.get("metadata") or {}).get("name"))
                    if delivery.type != "DELETED" and _awaits_cleanup(ns):
                        pending.add(name)
                    else:
                        pending.discard(name)
                for name in sorted(pending):
                    try:
                        if await drain_namespace(ctx, name):
                            pending.discard(name)
                    except StatusError as err:
                        log.warning(
                            "draining namespace %s: %s; will retry in %.0f s", name, err, recheck
                        )
        except WatcherClosed as closed:
            if cache.stopped:
                await asyncio.Future()  # shutting down: wait to be cancelled
            log.info("namespace watch ended (%s); watching again", closed.reason)
        finally:
            watcher.close("namespace cleanup restarting")
