"""The informer: a reflector feeding an indexed cache and the component's event handlers.

Why: controllers want "what does the cluster look like" (the cache) and "tell me when something
changes" (handlers), without each of them listing and watching on its own. This is client-go's
``SharedIndexInformer`` cut down to what kubelite needs:

* ``Informer(client, rt, field_selector=..., indexers=...)``; ``add_handler(on_add=...,
  on_update=..., on_delete=...)`` or ``add_handler(on_change=...)``; ``await informer.run()`` (or ``informer.start()`` for a
  named task); ``await informer.wait_synced()``; then read with ``get(key)``, ``list()``,
  ``by_index("nodeName", "node1")``.
* Built-in indexes: ``namespace`` always, ``nodeName`` (``spec.nodeName``) for pods.
* Handlers see *transitions of the cache*, each exactly once and in order: ``on_add(obj)``,
  ``on_update(old, new)``, ``on_delete(obj)``. A watch ADDED for a cached key is an update; a
  DELETED for an unknown key is ignored. On a relist (``replace``) the informer diffs: new keys
  are adds, changed resourceVersions updates, and keys that vanished while the reflector was
  away are deletes (their last known state, as client-go's ``DeletedFinalStateUnknown``
  carries). Unchanged objects raise nothing. ``on_change(obj)`` is the shorthand for the
  common handler that only enqueues: called on add, on update (with the new object) and on
  delete.
* ``resync_period``: every period, ``on_update(obj, obj)`` for every cached object — a replay of
  the *cache*, never a relist (controllers use it to retry level-triggered work).
* A handler added after sync first gets ``on_add`` for every cached object.
* ``transform``: client-go's ``SetTransform`` — called on every object the reflector delivers
  (listed, added, modified, deleted) before the cache stores it or a handler sees it. Its use is
  memory: ``strip_managed_fields`` drops ``metadata.managedFields`` (often a third of a pod's
  JSON), as kube-controller-manager's and kube-scheduler's informers do. Writing such an object
  back is safe: an update that carries no ``managedFields`` key keeps the stored ones, in
  Kubernetes and in kubelite. The key is deleted, not emptied: kubelite's apiserver takes an
  empty list as a reset (Kubernetes keeps the stored ones then too).

Contracts and limits:

* **Cached objects are read-only.** Handlers and readers get the cached dicts themselves;
  deep-copy before modifying (see ``client.cache``).
* Handlers run synchronously in the informer's task: they must be quick and must not block —
  typically they compute a key and ``queue.add(key)``. A handler that raises is logged and the
  others still run; the cache is already updated by then.
* One informer per (resource, selector) per process; sharing between controllers is done by
  passing the instance around (there is no factory that deduplicates).
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from api.registry import ResourceType
from client.cache import (
    NAMESPACE_INDEX,
    NODE_NAME_INDEX,
    Indexer,
    IndexFunc,
    index_by_namespace,
    index_by_node_name,
    object_key,
)
from client.reflector import Reflector, ReflectorOptions
from client.rest import ApiClient
from client.watch import WatchEvent
from component.tasks import TaskGroup

__all__ = ["Informer", "OnAdd", "OnDelete", "OnUpdate", "Transform", "strip_managed_fields"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
OnAdd = Callable[[Obj], None]
OnUpdate = Callable[[Obj, Obj], None]
OnDelete = Callable[[Obj], None]
Transform = Callable[[Obj], Obj]


def strip_managed_fields(obj: Obj) -> Obj:
    """``obj`` without ``metadata.managedFields`` (the key deleted, in place: the object is the
    reflector's own, freshly decoded). Kubernetes' controller-manager and scheduler trim their
    informers' objects the same way; nothing they do reads field ownership."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


@dataclass(frozen=True, slots=True)
class _Handler:
    on_add: OnAdd | None
    on_update: OnUpdate | None
    on_delete: OnDelete | None


def _rv(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class Informer:
    def __init__(
        self,
        client: ApiClient,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        resync_period: float | None = None,
        reflector_options: ReflectorOptions | None = None,
        name: str | None = None,
        transform: Transform | None = None,
    ) -> None:
        self.rt = rt
        self.transform = transform
        all_indexers: dict[str, IndexFunc] = {NAMESPACE_INDEX: index_by_namespace}
        if rt.kind == "Pod" and not rt.group:
            all_indexers[NODE_NAME_INDEX] = index_by_node_name
        all_indexers.update(indexers or {})
        self.indexer = Indexer(all_indexers)
        self.resync_period = resync_period
        self.reflector = Reflector(
            client,
            rt,
            sink=self,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            options=reflector_options,
            name=name,
        )
        self.name = self.reflector.name
        self._handlers: list[_Handler] = []
        self._synced = asyncio.Event()

    # -- handlers -------------------------------------------------------------------------

    def add_handler(
        self,
        *,
        on_add: OnAdd | None = None,
        on_update: OnUpdate | None = None,
        on_delete: OnDelete | None = None,
        on_change: OnAdd | None = None,
    ) -> None:
        if on_change is not None:
            if on_add or on_update or on_delete:
                raise TypeError("on_change stands for on_add, on_update and on_delete together")
            changed = on_change
            on_add, on_delete = changed, changed
            on_update = lambda _old, new: changed(new)  # noqa: E731
        handler = _Handler(on_add, on_update, on_delete)
        self._handlers.append(handler)
        if on_add is not None:
            for obj in self.indexer.list():
                self._call(on_add, obj)

    def _call(self, fn: Callable[..., None], *args: Obj) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("informer %s: handler %r failed; continuing", self.name, fn)

    def _added(self, obj: Obj) -> None:
        for h in self._handlers:
            if h.on_add is not None:
                self._call(h.on_add, obj)

    def _updated(self, old: Obj, new: Obj) -> None:
        for h in self._handlers:
            if h.on_update is not None:
                self._call(h.on_update, old, new)

    def _deleted(self, obj: Obj) -> None:
        for h in self._handlers:
            if h.on_delete is not None:
                self._call(h.on_delete, obj)

    # -- the reflector's sink -------------------------------------------------------------

    def replace(self, objects: builtins.list[Obj], resource_version: str) -> None:
        seen: set[str] = set()
        transform = self.transform
        for listed in objects:
            obj = transform(listed) if transform is not None else listed
            key = object_key(obj)
            seen.add(key)
            old = self.indexer.upsert(key, obj)
            if old is None:
                self._added(obj)
            elif _rv(old) != _rv(obj):
                self._updated(old, obj)
        for key in [k for k in self.indexer.keys() if k not in seen]:
            gone = self.indexer.delete(key)
            if gone is not None:
                self._deleted(gone)
        if not self._synced.is_set():
            log.info(
                "informer %s synced: %d objects at resourceVersion %s",
                self.name, len(self.indexer), resource_version,
            )  # fmt: skip
            self._synced.set()

    def apply(self, event: WatchEvent) -> None:
        obj = event.object if self.transform is None else self.transform(event.object)
        key = object_key(obj)
        if event.type == "DELETED":
            gone = self.indexer.delete(key)
            if gone is not None:
                self._deleted(obj)
            return
        old = self.indexer.upsert(key, obj)
        if old is None:
            self._added(obj)
        else:
            self._updated(old, obj)

    # -- running --------------------------------------------------------------------------

    async def run(self) -> None:
        """Run the reflector (and the resync timer) until cancelled.

        Both loops run forever: if one ends, it is logged, the other is cancelled and its
        exception (or ``component.errors.TaskEnded``) is raised here."""
        async with TaskGroup(f"informer {self.name}", logger=log) as tasks:
            tasks.start(f"reflector {self.name}", self.reflector.run())
            if self.resync_period:
                tasks.start(f"resync {self.name}", self._resync())
            await tasks.wait()

    def start(self) -> asyncio.Task[None]:
        """``run()`` as a named task owned by the caller (cancel it to stop)."""
        return asyncio.create_task(self.run(), name=f"informer {self.name}")

    async def _resync(self) -> None:
        assert self.resync_period
        await self._synced.wait()
        while True:
            await asyncio.sleep(self.resync_period)
            for _, obj in self.indexer.items():
                self._updated(obj, obj)

    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    # -- reads (read-only objects: see the module docstring) ------------------------------

    def get(self, key: str) -> Obj | None:
        """By ``namespace/name`` (or ``name`` for cluster-scoped kinds)."""
        return self.indexer.get(key)

    def list(self) -> builtins.list[Obj]:
        return self.indexer.list()

    def keys(self) -> builtins.list[str]:
        return self.indexer.keys()

    def by_index(self, index: str, value: str) -> builtins.list[Obj]:
        return self.indexer.by_index(index, value)

    @property
    def last_sync_resource_version(self) -> str:
        return self.reflector.last_sync_resource_version
