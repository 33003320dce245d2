"""The informer's indexed cache: objects by key, and by any number of secondary indexes.

Why: controllers reconcile from a local cache, not from the apiserver, and they mostly ask
"which pods are on node1", "which pods are in namespace x" — so the cache keeps indexes that
answer in O(matches), like client-go's ``ThreadSafeStore`` + ``Indexers``.

* Keys are client-go's ``MetaNamespaceKeyFunc``: ``namespace/name``, or ``name`` for
  cluster-scoped objects (``object_key``); ``split_key`` undoes it.
* An index function maps an object to the index values it belongs under (``list[str]``, may be
  empty). Built in: ``index_by_namespace`` and ``index_by_node_name`` (``spec.nodeName``; an
  unscheduled pod is under ``""``).

**Objects are stored as received and are read-only by contract.** ``get``/``list``/``by_index``
return the cached dicts themselves, not copies (copying every read would cost more than the
rest of a controller). Mutating one corrupts every other reader's view: copy
(``copy.deepcopy``) before changing anything you intend to write back.

Not thread-safe (one event loop); indexes must be registered before the first object arrives.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = [
    "IndexFunc",
    "Indexer",
    "index_by_namespace",
    "index_by_node_name",
    "object_key",
    "split_key",
]

IndexFunc = Callable[[Mapping[str, Any]], list[str]]

NAMESPACE_INDEX = "namespace"
NODE_NAME_INDEX = "nodeName"


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name``, or ``name`` for cluster-scoped objects."""
    meta = obj.get("metadata") or {}
    ns, name = meta.get("namespace"), meta.get("name") or ""
    return f"{ns}/{name}" if ns else str(name)


def split_key(key: str) -> tuple[str | None, str]:
    """``"ns/name"`` -> ``("ns", "name")``; ``"name"`` -> ``(None, "name")``."""
    ns, sep, name = key.partition("/")
    return (ns, name) if sep else (None, ns)


def index_by_namespace(obj: Mapping[str, Any]) -> list[str]:
    ns = (obj.get("metadata") or {}).get("namespace")
    return [str(ns)] if ns else []


def index_by_node_name(obj: Mapping[str, Any]) -> list[str]:
    return [str((obj.get("spec") or {}).get("nodeName") or "")]


class Indexer:
    def __init__(self, indexers: Mapping[str, IndexFunc] | None = None) -> None:
        self._items: dict[str, dict[str, Any]] = {}
        self._indexers: dict[str, IndexFunc] = dict(indexers or {})
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}

    def add_indexer(self, name: str, fn: IndexFunc) -> None:
        if self._items:
            raise RuntimeError("add indexers before the cache holds objects")
        self._indexers[name] = fn
        self._indices[name] = {}

    # -- writes (the informer's only) -----------------------------------------------------

    def upsert(self, key: str, obj: dict[str, Any]) -> dict[str, Any] | None:
        """Store ``obj`` under ``key``; returns the object it replaced."""
        old = self._items.get(key)
        self._items[key] = obj
        self._reindex(key, old, obj)
        return old

    def delete(self, key: str) -> dict[str, Any] | None:
        old = self._items.pop(key, None)
        if old is not None:
            self._reindex(key, old, None)
        return old

    def clear(self) -> None:
        self._items.clear()
        for index in self._indices.values():
            index.clear()

    def _reindex(
        self, key: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
    ) -> None:
        for name, fn in self._indexers.items():
            index = self._indices[name]
            old_values = fn(old) if old is not None else []
            new_values = fn(new) if new is not None else []
            if old_values == new_values:
                continue
            for value in old_values:
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
            for value in new_values:
                index.setdefault(value, set()).add(key)

    # -- reads ----------------------------------------------------------------------------

    def get(self, key: str) -> dict[str, Any] | None:
        return self._items.get(key)

    def list(self) -> builtins.list[dict[str, Any]]:
        return list(self._items.values())

    def keys(self) -> builtins.list[str]:
        return list(self._items)

    def items(self) -> Iterator[tuple[str, dict[str, Any]]]:
        return iter(list(self._items.items()))

    def index_keys(self, index: str, value: str) -> builtins.list[str]:
        if index not in self._indices:
            raise KeyError(f"no index named {index!r}")
        return sorted(self._indices[index].get(value, ()))

    def by_index(self, index: str, value: str) -> builtins.list[dict[str, Any]]:
        return [self._items[k] for k in self.index_keys(index, value)]

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items
