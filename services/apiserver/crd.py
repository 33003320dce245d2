"""The CRD controller inside the apiserver: each established CRD's kind served at once.

Why: in Kubernetes the apiextensions apiserver runs, in the apiserver process, a naming
controller (``NamesAccepted``, name conflicts), an establishing controller (``Established``), a
handler that serves every established CRD's kind, and the finalizer controller that empties a
deleted CRD before it goes. This is those four, over kubelite's watch cache of CRDs:

* names: a CRD whose plural, singular, kind, list kind or short names are taken in its group by
  another CRD (or by a built-in kind) gets ``NamesAccepted=False`` with Kubernetes' reason
  (``PluralConflict``, ``KindConflict``, ``ListKindConflict``, ``ShortNamesConflict``) and
  message (``"widgets" is already in use``), and is not served; otherwise ``acceptedNames`` and
  ``NamesAccepted=True`` (``NoConflicts``);
* serving: one registry entry per served version (``ResourceType.custom``), one ``ObjectStorage``
  and one ``WatchCache`` per kind (the cache is loaded before the kind is routed), discovery and
  OpenAPI refreshed (``on_change``); then ``Established=True`` (``InitialNamesAccepted``), so a
  client that waits for ``Established`` finds the kind served. ``storedVersions`` lists every
  version used as storage;
* deletion: a CRD being deleted gets ``Terminating=True``; its objects are deleted (one with
  finalizers is marked and waited for), then its kind is unrouted and the
  ``customresourcecleanup.apiextensions.k8s.io`` finalizer removed, which deletes the CRD.

At start (``load``) every stored CRD is served before the apiserver answers, so after a restart
(or a kill -9) clients find their kinds at once. Then ``run`` follows the CRD watch for ever.

The registry the app serves is its own copy (``make_app``), so two apps in one process do not
share custom kinds. Components (scheduler, controller-manager) never see them.

Limits: the cache of a kind whose CRD goes away is dropped with its open watches (their clients
re-watch and get 404); name conflicts are checked against CRDs seen by this apiserver.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, NoReturn

from aiohttp import web

from api.apiextensions import (
    CLEANUP_FINALIZER,
    GROUP,
    CustomObject,
    condition,
    custom_resource,
    names_of,
    served_versions,
    set_condition,
    storage_version,
)
from api.errors import Conflict, NotFound
from api.meta import now_time
from api.registry import ResourceType, Subresource
from services.apiserver.context import ApiContext
from services.apiserver.predicate import Predicate
from services.apiserver.storage import ObjectStorage
from services.apiserver.watchcache import WatchCache, WatcherClosed

__all__ = ["CUSTOM_TARGET", "CustomResourceDefinitions", "resource_types", "warn_deprecated"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

CUSTOM_TARGET: web.RequestKey[ResourceType] = web.RequestKey("custom_target", ResourceType)
"""The custom ``ResourceType`` a request addresses (``rest`` sets it)."""


def resource_types(crd: Obj) -> list[ResourceType]:
    """One registry entry per served version of an accepted CRD, under its accepted names."""
    spec = crd.get("spec") or {}
    names = (crd.get("status") or {}).get("acceptedNames") or names_of(crd)
    group, kind = str(spec.get("group")), str(names.get("kind"))
    out = []
    for version in served_versions(crd):
        custom = custom_resource(crd, version)
        subresources = []
        if custom.has_status:
            subresources.append(Subresource("status", kind, group=group, version=version["name"]))
        if custom.scale is not None:
            subresources.append(Subresource("scale", "Scale", group="autoscaling"))
        out.append(
            ResourceType(
                group=group,
                version=str(version["name"]),
                kind=kind,
                plural=str(names.get("plural")),
                singular=str(names.get("singular") or kind.lower()),
                namespaced=spec.get("scope") == "Namespaced",
                model=CustomObject,
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=tuple(subresources),
                custom=custom,
            )
        )
    return out


async def warn_deprecated(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: a request to a deprecated CRD version gets its warning."""
    rt = request.get(CUSTOM_TARGET)
    if rt is not None and rt.custom is not None and rt.custom.deprecation_warning:
        text = rt.custom.deprecation_warning.replace("\\", "\\\\").replace('"', '\\"')
        response.headers.add("Warning", f'299 - "{text}"')


def _conflict(crd: Obj, others: list[Obj], builtin: list[ResourceType]) -> tuple[str, str] | None:
    """(reason, message) of the first name ``crd`` wants that is taken in its group."""
    group = (crd.get("spec") or {}).get("group")
    names = names_of(crd)
    taken: dict[str, set[Any]] = {"plural": set(), "kind": set(), "listKind": set(), "short": set()}
    for other in others:
        if (other.get("spec") or {}).get("group") != group:
            continue
        accepted = (other.get("status") or {}).get("acceptedNames") or {}
        taken["plural"] |= {accepted.get("plural"), accepted.get("singular")} - {None}
        taken["kind"].add(accepted.get("kind"))
        taken["listKind"].add(accepted.get("listKind"))
        taken["short"] |= set(accepted.get("shortNames") or ())
    for rt in builtin:
        if rt.group == group:
            taken["plural"] |= {rt.plural, rt.singular}
            taken["kind"].add(rt.kind)
            taken["listKind"].add(rt.list_kind)
            taken["short"] |= set(rt.short_names)
    for key, reason in (("plural", "PluralConflict"), ("singular", "SingularConflict")):
        if names.get(key) in taken["plural"]:
            return reason, f'"{names.get(key)}" is already in use'
    for short in names.get("shortNames") or ():
        if short in taken["short"]:
            return "ShortNamesConflict", f'"{short}" is already in use'
    if names.get("kind") in taken["kind"]:
        return "KindConflict", f'"{names.get("kind")}" is already in use'
    if names.get("listKind") in taken["listKind"]:
        return "ListKindConflict", f'"{names.get("listKind")}" is already in use'
    return None


class CustomResourceDefinitions:
    """Follows the CRDs; see the module docstring. ``load`` once, then ``run``."""

    def __init__(self, ctx: ApiContext, *, on_change: Callable[[], None]) -> None:
        self.ctx = ctx
        self.on_change = on_change
        self.rt = ctx.resource(GROUP, "customresourcedefinitions")
        self.storage = ctx.storage(self.rt)
        self._builtin = [rt for rt in ctx.registry if rt.custom is None or rt.custom.builtin]
        self._served: dict[str, list[ResourceType]] = {}
        """CRD name -> its registry entries."""
        self._caches: dict[str, asyncio.Task[None]] = {}
        """CRD name -> the feeding task of its kind's watch cache."""
        self._cleanups: dict[str, asyncio.Task[None]] = {}
        """CRD name -> the task that syncs a deleted CRD again when its kind's objects move."""
        self._failed: asyncio.Future[NoReturn] = asyncio.get_running_loop().create_future()

    @property
    def _cache(self) -> WatchCache:
        cache = self.ctx.cache(self.rt)
        assert cache is not None, "the CRD kind has a watch cache"
        return cache

    async def load(self) -> None:
        """Serve every CRD stored now (the CRD watch cache must be loaded)."""
        events, _ = self._cache.snapshot(Predicate(rt=self.rt))
        for event in events:
            await self.sync(str(event.obj["metadata"]["name"]))

    async def run(self) -> NoReturn:
        """Forever: every CRD that changes is synced. The kinds' caches stop with this task."""
        try:
            while True:
                watcher = self._cache.watch_from_state(Predicate(rt=self.rt))
                try:
                    while True:
                        batch = await watcher.next_batch(max_wait=None)
                        names = {str(d.event.obj["metadata"]["name"]) for d in batch if d.event}
                        for name in sorted(names):
                            await self._sync_logged(name)
                        if self._failed.done():
                            await self._failed
                except WatcherClosed as closed:
                    if self._cache.stopped:
                        # shutting down: the app's task group cancels this task next
                        await asyncio.get_running_loop().create_future()
                    log.warning("CRD watch ended (%s); watching again from the cache", closed)
                finally:
                    watcher.close("the CRD controller stopped")
        finally:
            for task in self._cleanups.values():
                task.cancel()
            for name in list(self._caches):
                await self._stop_cache(name)

    async def _sync_logged(self, name: str) -> None:
        try:
            await self.sync(name)
        except (Conflict, NotFound) as err:
            # the CRD moved on while we worked: its next event syncs it again
            log.info("CRD %s: %s; will sync again on its next change", name, err.message)

    async def sync(self, name: str) -> None:
        """Bring CRD ``name``'s conditions and served kind in line with the CRD."""
        crd = await self.storage.get_or_none(None, name)
        if crd is None:
            await self._unserve(name)
            return
        if (crd.get("metadata") or {}).get("deletionTimestamp"):
            await self._terminate(crd)
            return
        others = [
            e.obj
            for e in self._cache.snapshot(Predicate(rt=self.rt))[0]
            if e.obj["metadata"]["name"] != name
        ]
        conflict = _conflict(crd, others, self._builtin)
        if conflict is not None:
            await self._write_status(name, names_accepted=conflict)
            await self._unserve(name)
            return
        crd = await self._write_status(name, names_accepted=None)
        await self._serve(crd)
        await self._write_status(name, names_accepted=None, established=True)

    # -- status ---------------------------------------------------------------------------------

    async def _write_status(
        self, name: str, *, names_accepted: tuple[str, str] | None, established: bool = False
    ) -> Obj:
        now = now_time()

        async def mutate(current: Obj) -> Obj:
            if names_accepted is not None:
                set_condition(
                    current,
                    "NamesAccepted",
                    "False",
                    reason=names_accepted[0],
                    message=names_accepted[1],
                    now=now,
                )
                if condition(current, "Established") is None:
                    set_condition(
                        current,
                        "Established",
                        "False",
                        reason="NotAccepted",
                        message="not all names are accepted",
                        now=now,
                    )
                return current
            status = current.setdefault("status", {})
            status["acceptedNames"] = dict(names_of(current))
            stored = list(status.get("storedVersions") or [])
            if storage_version(current) not in stored:
                stored.append(storage_version(current))
            status["storedVersions"] = stored
            set_condition(
                current,
                "NamesAccepted",
                "True",
                reason="NoConflicts",
                message="no conflicts found",
                now=now,
            )
            if established:
                set_condition(
                    current,
                    "Established",
                    "True",
                    reason="InitialNamesAccepted",
                    message="the initial names have been accepted",
                    now=now,
                )
            return current

        result = await self.storage.guaranteed_update(None, name, mutate)
        return result.obj

    # -- serving ------------------------------------------------------------------------------

    async def _serve(self, crd: Obj) -> None:
        name = str(crd["metadata"]["name"])
        types = resource_types(crd)
        if types == self._served.get(name):
            return
        old = self._served.get(name, [])
        storage_rt = next(
            (rt for rt in types if rt.version == storage_version(crd)), types[0] if types else None
        )
        if storage_rt is None:
            await self._unserve(name)
            return
        if old and (old[0].group, old[0].plural) != (storage_rt.group, storage_rt.plural):
            await self._unserve(name)
            old = []
        key = (storage_rt.group, storage_rt.plural)
        self.ctx.storages[key] = self.ctx.new_storage(storage_rt)
        if name not in self._caches:
            cache = WatchCache(
                self.ctx.store,
                storage_rt,
                capacity=self.ctx.options.watch_cache_capacity,
                queue_size=self.ctx.options.watch_queue_size,
            )
            self.ctx.caches[key] = cache
            self._caches[name] = self._start_cache(name, cache)
            await cache.ready.wait()
        for rt in old:
            self.ctx.registry.unregister(rt)
        for rt in types:
            self.ctx.registry.register(rt)
        self._served[name] = types
        log.info(
            "serving %s.%s (versions %s)",
            storage_rt.plural,
            storage_rt.group,
            ", ".join(rt.version for rt in types),
        )
        self.on_change()

    def _start_cache(self, name: str, cache: WatchCache) -> asyncio.Task[None]:
        task = asyncio.create_task(
            cache.run(), name=f"watch-cache-{cache.rt.plural}.{cache.rt.group}"
        )

        def ended(done: asyncio.Task[None]) -> None:
            if done.cancelled() or self._caches.get(name) is not done:
                return
            error = done.exception() or RuntimeError(f"the watch cache of {name} stopped")
            log.error("the watch cache of %s ended: %s; the CRD controller stops", name, error)
            if not self._failed.done():
                self._failed.set_exception(error)

        task.add_done_callback(ended)
        return task

    async def _stop_cache(self, name: str) -> None:
        task = self._caches.pop(name, None)
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _unserve(self, name: str) -> None:
        types = self._served.pop(name, [])
        for rt in types:
            self.ctx.registry.unregister(rt)
        if types:
            key = (types[0].group, types[0].plural)
            cache = self.ctx.caches.pop(key, None)
            if cache is not None:
                cache.close_all(f"the CustomResourceDefinition {name} is gone")
            self.ctx.storages.pop(key, None)
            log.info("no longer serving %s", name)
            self.on_change()
        await self._stop_cache(name)

    # -- deletion -----------------------------------------------------------------------------

    async def _terminate(self, crd: Obj) -> None:
        name = str(crd["metadata"]["name"])
        now = now_time()

        async def terminating(current: Obj) -> Obj:
            set_condition(
                current,
                "Terminating",
                "True",
                reason="InstanceDeletionInProgress",
                message="CustomResource deletion is in progress",
                now=now,
            )
            return current

        await self.storage.guaranteed_update(None, name, terminating)
        types = self._served.get(name) or resource_types(crd)
        if types and (types[0].group, types[0].plural) in self.ctx.storages:
            remaining = await self._delete_objects(
                self.ctx.storages[(types[0].group, types[0].plural)]
            )
            if remaining:
                log.info("CRD %s: %d object(s) wait for their finalizers", name, remaining)
                return  # their deletion is an event of the kind's cache; see _watch_remaining
        await self._unserve(name)

        async def release(current: Obj) -> Obj:
            meta = current["metadata"]
            meta["finalizers"] = [f for f in meta.get("finalizers") or [] if f != CLEANUP_FINALIZER]
            set_condition(
                current,
                "Terminating",
                "True",
                reason="InstanceDeletionCompleted",
                message="removed all instances",
                now=now,
            )
            return current

        await self.storage.guaranteed_update(None, name, release)

    async def _delete_objects(self, storage: ObjectStorage) -> int:
        """Delete every object of a kind; those with finalizers are marked deleting. Returns how
        many are left."""
        page = await storage.list(None)
        left = 0
        for obj in page.items:
            meta = obj["metadata"]
            if meta.get("finalizers"):
                left += 1
                if not meta.get("deletionTimestamp"):
                    await self._mark_deleting(storage, obj)
                continue
            with contextlib.suppress(NotFound, Conflict):
                await storage.delete(
                    meta.get("namespace"), meta["name"], expected_rv=int(meta["resourceVersion"])
                )
        if left:
            self._watch_remaining(storage)
        return left

    async def _mark_deleting(self, storage: ObjectStorage, obj: Obj) -> None:
        now = now_time()

        async def mark(current: Obj) -> Obj:
            current["metadata"].setdefault("deletionTimestamp", now)
            current["metadata"].setdefault("deletionGracePeriodSeconds", 0)
            return current

        with contextlib.suppress(NotFound):
            await storage.guaranteed_update(
                obj["metadata"].get("namespace"), obj["metadata"]["name"], mark
            )

    def _watch_remaining(self, storage: ObjectStorage) -> None:
        """Sync the CRD again once its kind's cache moves (an object lost its finalizers)."""
        cache = self.ctx.caches.get((storage.rt.group, storage.rt.plural))
        crd_name = f"{storage.rt.plural}.{storage.rt.group}"
        if cache is None:
            return

        async def again() -> None:
            await cache.wait_until(cache.revision + 1)
            del self._cleanups[crd_name]
            await self._sync_logged(crd_name)

        if crd_name not in self._cleanups:
            self._cleanups[crd_name] = asyncio.create_task(again(), name=f"crd-cleanup-{crd_name}")
