"""The objects a node's pods reference — ConfigMaps, Secrets, PVCs, PVs — each watched by name.

Why: env ``valueFrom``/``envFrom`` and configMap, secret and persistentVolumeClaim volumes read
objects the pod names. Reading them with a GET per sync would poll the apiserver; and a pod
waiting for a missing ConfigMap must start *as soon as* it appears. So, like the kubelet's
watch-based ConfigMap/Secret managers (``pkg/kubelet/util/manager/watch_based_manager.go``),
each referenced object gets one informer of its own — a list-watch with
``fieldSelector=metadata.name=<name>`` in its namespace — shared by every pod of the node that
references it, started at the first reference and stopped when the last pod lets go. Any change
of the object (created, updated, deleted) wakes the pods that reference it (``on_change``).

What it owns: ``ObjectRef`` (which object), ``ObjectCache.get`` (the cached object or None,
after the watch has synced; registers the pod's interest), ``release`` (a pod is gone) and
``close`` (every watch stops).

What it does not guarantee: ``get`` waits at most ``SYNC_WAIT`` for a new watch's first list,
then raises ``ObjectCacheError`` with the message the kubelet uses ("failed to sync configmap
cache: timed out waiting for the condition"); watches stop at once when unreferenced (the
kubelet keeps them a little longer to avoid churn); cached objects are shared and read-only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from api.registry import REGISTRY, ResourceType
from client.informer import Informer
from client.rest import ApiClient

__all__ = ["SYNC_WAIT", "ObjectCache", "ObjectCacheError", "ObjectRef"]

log = logging.getLogger("kubelet.objects")

Obj = dict[str, Any]

SYNC_WAIT = 10.0
"""Seconds a first ``get`` waits for a new watch's list (the kubelet's manager waits 1 s per
try and the pod sync retries; one longer wait here, since a failed sync backs off)."""


@dataclass(frozen=True, slots=True, order=True)
class ObjectRef:
    """One object a pod references: ``configmaps``, ``secrets``, ``persistentvolumeclaims``
    (namespaced) or ``persistentvolumes`` (``namespace`` empty)."""

    resource: str
    namespace: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def rt(self) -> ResourceType:
        rt = REGISTRY.get("", "v1", self.resource)
        assert rt is not None, self.resource
        return rt


class ObjectCacheError(Exception):
    """The object could not be read (its watch did not sync in time)."""


@dataclass(slots=True)
class _Watch:
    informer: Informer
    task: asyncio.Task[None]
    pods: set[str] = field(default_factory=set)


class ObjectCache:
    """Per-referenced-object watches for one node's pods."""

    def __init__(self, client: ApiClient, *, on_change: Callable[[str], None]) -> None:
        self._client = client
        self._on_change = on_change
        self._watches: dict[ObjectRef, _Watch] = {}

    async def get(self, ref: ObjectRef, *, pod: str) -> Obj | None:
        """The object as last seen by its watch (None: it does not exist); ``pod`` now
        references it and is woken when it changes."""
        watch = self._watches.get(ref) or self._watch(ref)
        watch.pods.add(pod)
        if not watch.informer.has_synced:
            try:
                async with asyncio.timeout(SYNC_WAIT):
                    await watch.informer.wait_synced()
            except TimeoutError:
                kind = ref.rt().singular
                raise ObjectCacheError(
                    f"failed to sync {kind} cache: timed out waiting for the condition"
                ) from None
        return watch.informer.get(ref.key)

    def release(self, pod: str) -> None:
        """``pod`` references nothing any more; watches nobody needs stop."""
        for ref, watch in list(self._watches.items()):
            watch.pods.discard(pod)
            if not watch.pods:
                watch.task.cancel()
                del self._watches[ref]

    async def close(self) -> None:
        tasks = [w.task for w in self._watches.values()]
        self._watches.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _watch(self, ref: ObjectRef) -> _Watch:
        informer = Informer(
            self._client,
            ref.rt(),
            namespace=ref.namespace or None,
            field_selector=f"metadata.name={ref.name}",
            name=f"{ref.resource} {ref.key}",
        )
        watch = _Watch(informer=informer, task=informer.start())

        def changed(*_objs: Obj) -> None:
            for uid in list(watch.pods):
                self._on_change(uid)

        informer.add_handler(on_add=changed, on_update=changed, on_delete=changed)
        self._watches[ref] = watch
        log.debug("watching %s %s", ref.resource, ref.key)
        return watch
