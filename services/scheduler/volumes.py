"""The scheduler's view of storage: claims, volumes and classes, fed by their list-watches.

Why: the VolumeBinding plugin asks, for every node a cycle examines, whether the pod's claims
can be met there — the bound volume's node affinity, the Available volumes of a class, the
class's binding mode and provisioner. A cycle never awaits, so the answers must come from
memory: the scheduler's PersistentVolumeClaim, PersistentVolume and StorageClass informers
(``service.py``) keep this cache current, as the pod and node informers keep ``cache.py``'s.
Every ``set_*`` returns the ``ClusterEvent`` it amounts to, so parked pods a claim, volume or
class change may help are retried (kube-scheduler registers PVC/PV/StorageClass Add and
Update for VolumeBinding).

It also keeps the one piece of storage state the scheduler invents: a claim's *assumed*
selected node. Between a cycle choosing a node for a pod with an unbound WaitForFirstConsumer
claim and the watch reporting the ``volume.kubernetes.io/selected-node`` annotation written for
it, a second pod sharing that claim must be held to the same node (kube-scheduler's PVC assume
cache). The assumption ends when the watch brings a claim that says where it goes (annotated or
bound), or when the binding cycle that made it fails (``forget_selected_node``).

And it lets a binding cycle await a claim's progress (``wait_until``): every change to the
cache wakes the waiters, who re-check their condition; nothing polls the API.

Limits: objects are the informers' dicts, read-only. Volumes are indexed by class only; a
cluster with thousands of volumes of one class pays a scan per node examined.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from api.storage import SELECTED_NODE_ANNOTATION
from services.scheduler.queue import ClusterEvent

__all__ = [
    "CLAIM_CHANGE",
    "CLASS_CHANGE",
    "VOLUME_CHANGE",
    "VolumeCache",
    "claim_key",
]

Obj = Mapping[str, Any]

_VOLUME_BINDING = frozenset({"VolumeBinding"})
CLAIM_CHANGE = ClusterEvent("PersistentVolumeClaimChange", _VOLUME_BINDING)
VOLUME_CHANGE = ClusterEvent("PersistentVolumeChange", _VOLUME_BINDING)
CLASS_CHANGE = ClusterEvent("StorageClassChange", _VOLUME_BINDING)


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _name(obj: Obj) -> str:
    return str(_meta(obj).get("name") or "")


def claim_key(obj: Obj) -> str:
    meta = _meta(obj)
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


def volume_class(pv: Obj) -> str:
    return str((pv.get("spec") or {}).get("storageClassName") or "")


def claim_says_where(claim: Obj) -> bool:
    """Bound, or annotated with its selected node: an assumption about it is now superseded."""
    annotations = _meta(claim).get("annotations") or {}
    return bool((claim.get("spec") or {}).get("volumeName")) or (
        SELECTED_NODE_ANNOTATION in annotations
    )


class VolumeCache:
    def __init__(self) -> None:
        self._claims: dict[str, Obj] = {}
        self._volumes: dict[str, Obj] = {}
        self._volumes_by_class: dict[str, dict[str, Obj]] = {}
        self._classes: dict[str, Obj] = {}
        self._assumed_nodes: dict[str, str] = {}
        """Claim key -> the node a scheduling cycle chose for it, not yet seen annotated."""
        self._changed = asyncio.Event()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # ---- informer-facing -------------------------------------------------------------------

    def set_claim(self, obj: Obj) -> ClusterEvent:
        key = claim_key(obj)
        self._claims[key] = obj
        if claim_says_where(obj):
            self._assumed_nodes.pop(key, None)
        self._wake()
        return CLAIM_CHANGE

    def remove_claim(self, obj: Obj) -> None:
        key = claim_key(obj)
        self._claims.pop(key, None)
        self._assumed_nodes.pop(key, None)
        self._wake()

    def set_volume(self, obj: Obj) -> ClusterEvent:
        name = _name(obj)
        old = self._volumes.get(name)
        if old is not None:
            self._volumes_by_class.get(volume_class(old), {}).pop(name, None)
        self._volumes[name] = obj
        self._volumes_by_class.setdefault(volume_class(obj), {})[name] = obj
        self._wake()
        return VOLUME_CHANGE

    def remove_volume(self, obj: Obj) -> None:
        name = _name(obj)
        old = self._volumes.pop(name, None)
        if old is not None:
            self._volumes_by_class.get(volume_class(old), {}).pop(name, None)
        self._wake()

    def set_class(self, obj: Obj) -> ClusterEvent:
        self._classes[_name(obj)] = obj
        self._wake()
        return CLASS_CHANGE

    def remove_class(self, obj: Obj) -> None:
        self._classes.pop(_name(obj), None)
        self._wake()

    # ---- reads -----------------------------------------------------------------------------

    def claim(self, namespace: str, name: str) -> Obj | None:
        return self._claims.get(f"{namespace}/{name}")

    def volume(self, name: str) -> Obj | None:
        return self._volumes.get(name)

    def volumes_of_class(self, class_name: str) -> Iterable[Obj]:
        return (self._volumes_by_class.get(class_name) or {}).values()

    def storage_class(self, name: str) -> Obj | None:
        return self._classes.get(name)

    # ---- the scheduler's own assumption ------------------------------------------------------

    def selected_node(self, claim: Obj) -> str:
        """The node ``claim`` is held to: its annotation, else a cycle's assumption, else ""."""
        annotations = _meta(claim).get("annotations") or {}
        selected = annotations.get(SELECTED_NODE_ANNOTATION)
        if selected is not None:
            return str(selected)
        return self._assumed_nodes.get(claim_key(claim), "")

    def assume_selected_node(self, key: str, node: str) -> None:
        self._assumed_nodes[key] = node

    def forget_selected_node(self, key: str, node: str) -> None:
        """Drop the assumption that ``key`` goes to ``node`` (a newer one for another stays)."""
        if self._assumed_nodes.get(key) == node:
            del self._assumed_nodes[key]

    # ---- waiting -----------------------------------------------------------------------------

    async def wait_until(self, check: Callable[[], bool]) -> None:
        """Return once ``check()`` is true, re-checked on every change to the cache; an exception
        from ``check`` ends the wait with it. Bound it with ``asyncio.timeout``."""
        while not check():
            await self._changed.wait()
