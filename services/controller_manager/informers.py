"""One informer per resource for the whole controller-manager: client-go's SharedInformerFactory.

Why: the replication, deployment, node-lifecycle, garbage-collector and namespace controllers
all read pods; four of them read ReplicaSets or nodes. Each list-watching on its own would
multiply the apiserver's watch load and the process's memory for nothing. ``SharedInformers``
hands every controller the same ``client.Informer`` for a resource (optionally one namespace),
with every index any of them asked for, and starts them all together.

* ``informers.get(rt, namespace=None, indexers={...})`` before ``start()``: the informer for
  that resource; later callers get the same object (their extra indexes are added to it).
* ``informers.start()`` starts each informer as a named task; ``await wait_synced()``;
  ``await stop()`` cancels them all.
* Built-in index ``OWNER_UID_INDEX`` (``ownerReferences[].uid``) and ``UID_INDEX``: the garbage
  collector's dependency graph and the namespace-agnostic lookups are just these indexes.
* Every cached object is stored without ``metadata.managedFields``
  (``client.informer.strip_managed_fields``), as kube-controller-manager's informer factory
  trims them: no controller reads field ownership, and an update written from a cached copy
  carries no ``managedFields`` key, so the apiserver keeps the stored ones.

Limits: informers must all be requested before ``start()`` (indexes cannot be added to a
filled cache); a resource asked for both cluster-wide and per namespace gets two informers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from api.registry import ResourceType
from client.cache import IndexFunc
from client.informer import Informer, strip_managed_fields
from client.rest import ApiClient

__all__ = ["OWNER_UID_INDEX", "UID_INDEX", "SharedInformers", "index_by_owner_uid", "index_by_uid"]

log = logging.getLogger(__name__)

OWNER_UID_INDEX = "ownerUID"
UID_INDEX = "uid"


def index_by_owner_uid(obj: Mapping[str, Any]) -> list[str]:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return [str(r["uid"]) for r in refs if isinstance(r, Mapping) and r.get("uid")]


def index_by_uid(obj: Mapping[str, Any]) -> list[str]:
    uid = (obj.get("metadata") or {}).get("uid")
    return [str(uid)] if uid else []


_DEFAULT_INDEXERS: dict[str, IndexFunc] = {
    OWNER_UID_INDEX: index_by_owner_uid,
    UID_INDEX: index_by_uid,
}


class SharedInformers:
    def __init__(self, client: ApiClient, *, resync_period: float | None = None) -> None:
        self.client = client
        self.resync_period = resync_period
        self._informers: dict[tuple[str, str, str | None], Informer] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def get(
        self,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
    ) -> Informer:
        key = (rt.group, rt.plural, namespace)
        informer = self._informers.get(key)
        if informer is None:
            if self._tasks:
                raise RuntimeError(f"informer for {rt.plural} requested after start()")
            informer = Informer(
                self.client,
                rt,
                namespace=namespace,
                indexers={**_DEFAULT_INDEXERS, **(indexers or {})},
                resync_period=self.resync_period,
                transform=strip_managed_fields,
            )
            self._informers[key] = informer
        else:
            for name, fn in (indexers or {}).items():
                informer.indexer.add_indexer(name, fn)
        return informer

    def all(self) -> list[Informer]:
        return list(self._informers.values())

    def start(self) -> None:
        for informer in self._informers.values():
            self._tasks.append(informer.start())
        log.info("started %d shared informers", len(self._tasks))

    async def wait_synced(self) -> None:
        await asyncio.gather(*(i.wait_synced() for i in self._informers.values()))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
