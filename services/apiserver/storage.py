"""The typed object layer over the store: JSON objects in, objects with resourceVersion out.

Why: the store deals in opaque bytes and revisions; handlers deal in Kubernetes objects. This
layer is the only code that crosses between the two, so the rules that tie them live in one place:

* the stored value is the object's JSON **without** ``metadata.resourceVersion``; every object
  read back gets ``metadata.resourceVersion = str(mod_revision)`` stamped on (as Kubernetes does
  over etcd), and a DELETED event's object carries the deletion's revision; it also gets the
  fields Kubernetes always serialises that it was stored without (``api.defaults
  .fill_serialised``), as decoding into Go structs gives them back;
* store errors become ``Status`` errors named for the resource (``pods "x" not found``,
  ``AlreadyExists``, ``Conflict``, ``Expired``);
* ``guaranteed_update`` is the only read-modify-write: read, let the caller compute the new
  object from the current one, compare-and-swap on the revision read, and on a lost race read
  again and recompute. No handler checks and then writes.
* the one generic deletion rule of Kubernetes' registry: an update that leaves an object with a
  ``deletionTimestamp``, zero grace and no finalizers deletes it instead of writing it.

A guaranteed update starts from the watch cache's state of the key when it has one (``cached``),
as Kubernetes' does (``GuaranteedUpdate`` with the cacher's object as its first guess): most
writes then cost no store read. The cache may lag the store, so that first state is only a
guess: a lost compare-and-swap, a refusal of ``mutate`` or an update that would change nothing
re-reads the store and decides again on the current state; no answer is ever given from a
state the store has left.

Limits: reads are not cached here (the watch cache serves ``resourceVersion=0`` reads), and an
update that changes nothing is not written (its resourceVersion stays), as in Kubernetes —
unless the stored value is stale (``encryption.StaleValue``: encrypted with an older key), so a
rewrite re-encrypts it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from api.defaults import fill_serialised
from api.errors import AlreadyExists, Conflict, Expired, NotFound, StatusError
from api.registry import ResourceType
from services.apiserver.codec import dumps_kept, loads
from services.apiserver.encryption import StaleValue
from store.base import (
    Compacted,
    KeyExists,
    KeyNotFound,
    KeyValue,
    RevisionMismatch,
    Store,
)

__all__ = [
    "ListPage",
    "ObjectStorage",
    "UpdateResult",
    "check_rv_precondition",
    "decode",
    "encode",
    "should_delete",
    "too_old",
]

Obj = dict[str, Any]
Mutate = Callable[[Obj], Awaitable[Obj | None]]
"""Given the current object (a private copy), return the object to write, or None for no change."""

Cached = Callable[[str], KeyValue | None]
"""The watch cache's latest state of a key as a store value (None: not cached, or no cache)."""

MAX_UPDATE_ATTEMPTS = 50
"""A guaranteed update retries on lost races; past this many, the key is hot beyond reason."""


def encode(obj: Obj) -> bytes:
    """The stored form: the object's JSON without ``metadata.resourceVersion``."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "resourceVersion" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "resourceVersion"}}
    return dumps_kept(obj)


def decode(kv: KeyValue, *, revision: int | None = None) -> Obj:
    """The object stored in ``kv``, stamped with ``revision`` (default: its ``mod_revision``)."""
    obj: Obj = loads(kv.value)
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    meta["resourceVersion"] = str(kv.mod_revision if revision is None else revision)
    fill_serialised(obj.get("kind"), obj)  # objects stored before a field was always written
    return obj


def too_old(requested: int, oldest: int) -> Expired:
    """The 410 a client gets for a revision outside the retained history."""
    return Expired(f"too old resource version: {requested} ({oldest})")


@dataclass(frozen=True, slots=True)
class ListPage:
    items: list[Obj]
    revision: int
    last_key: str | None
    """The key of the last item read from the store (continue after it)."""
    more: bool


@dataclass(frozen=True, slots=True)
class UpdateResult:
    obj: Obj
    """The object as stored (or, if deleted, as it was at its deletion's revision)."""
    deleted: bool = False
    changed: bool = True
    created: bool = False
    """The object was absent and ``create`` made it (a create-on-update)."""


def _rv_of(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def should_delete(obj: Obj) -> bool:
    """A terminating object with zero grace and no finalizers left is gone.

    A namespace also waits for its ``spec.finalizers`` (the namespace controller's).
    """
    meta = obj.get("metadata") or {}
    if obj.get("kind") == "Namespace" and (obj.get("spec") or {}).get("finalizers"):
        return False
    return (
        bool(meta.get("deletionTimestamp"))
        and not meta.get("finalizers")
        and meta.get("deletionGracePeriodSeconds") in (0, None)
    )


class ObjectStorage:
    """Objects of one resource type in the store."""

    def __init__(
        self,
        store: Store,
        rt: ResourceType,
        *,
        ttl: float | None = None,
        cached: Cached | None = None,
    ) -> None:
        self.store = store
        self.rt = rt
        self.ttl = ttl
        """Seconds the store may keep an object after its last write (Events: ``--event-ttl``;
        on etcd a lease). None for every other kind: they live until deleted."""
        self.cached = cached
        """Where a guaranteed update takes its first guess of the current state from."""

    def key(self, namespace: str | None, name: str) -> str:
        return self.rt.key(namespace, name)

    def not_found(self, name: str) -> NotFound:
        return NotFound.of(self.rt.plural, name, group=self.rt.group)

    def conflict(self, name: str, detail: str | None = None) -> Conflict:
        return Conflict.of(self.rt.plural, name, group=self.rt.group, detail=detail)

    async def get(self, namespace: str | None, name: str) -> Obj:
        kv = await self.store.get(self.key(namespace, name))
        if kv is None:
            raise self.not_found(name)
        return decode(kv)

    async def get_or_none(self, namespace: str | None, name: str) -> Obj | None:
        kv = await self.store.get(self.key(namespace, name))
        return None if kv is None else decode(kv)

    async def list(
        self,
        namespace: str | None,
        *,
        revision: int = 0,
        start_after: str | None = None,
        limit: int = 0,
    ) -> ListPage:
        """One page of objects in key order; ``Compacted`` becomes a 410."""
        try:
            result = await self.store.list(
                self.rt.prefix(namespace), revision=revision, start_after=start_after, limit=limit
            )
        except Compacted as exc:
            raise too_old(exc.requested, exc.compacted) from None
        items = [decode(kv) for kv in result.items]
        last_key = result.items[-1].key if result.items else start_after
        return ListPage(items=items, revision=result.revision, last_key=last_key, more=result.more)

    async def create(self, obj: Obj) -> Obj:
        """Store a new object; returns ``obj`` itself, stamped with its resourceVersion."""
        meta = obj["metadata"]
        try:
            kv = await self._create(self.key(meta.get("namespace"), meta["name"]), encode(obj))
        except KeyExists:
            raise AlreadyExists.of(self.rt.plural, meta["name"], group=self.rt.group) from None
        meta["resourceVersion"] = str(kv.mod_revision)  # what decode(kv) gives, without parsing
        return obj

    async def guaranteed_update(
        self,
        namespace: str | None,
        name: str,
        mutate: Mutate,
        *,
        create: Callable[[], Awaitable[Obj]] | None = None,
    ) -> UpdateResult:
        """Read-modify-CAS until it sticks. ``mutate`` raises ``StatusError`` to refuse.

        ``create`` (for kinds that allow create-on-update) is called when the object is absent;
        without it an absent object is a 404.
        """
        key = self.key(namespace, name)
        kv = self.cached(key) if self.cached is not None else None
        fresh = kv is None  # False while kv is the cache's guess, which may lag the store
        if fresh:
            kv = await self.store.get(key)
        for _ in range(MAX_UPDATE_ATTEMPTS):
            if kv is None:
                if create is None:
                    raise self.not_found(name)
                try:
                    return UpdateResult(obj=await self._create_from(create), created=True)
                except AlreadyExists:
                    kv = await self.store.get(key)
                    continue
            current = decode(kv)
            try:
                new = await mutate(decode(kv))
            except StatusError:
                if fresh:
                    raise
                kv, fresh = await self.store.get(key), True  # refused a guess: ask the store
                continue
            if new is not None:
                new_meta = new.get("metadata")
                if isinstance(new_meta, dict):
                    new_meta["resourceVersion"] = str(kv.mod_revision)
            if new is None or (new == current and not isinstance(kv, StaleValue)):
                if fresh:
                    return UpdateResult(obj=current, changed=False)
                kv, fresh = await self.store.get(key), True  # nothing to write to a guess
                continue
            try:
                if should_delete(new) and not should_delete(current):
                    deleted = await self.store.delete(key, expected_revision=kv.mod_revision)
                    new["metadata"]["resourceVersion"] = str(deleted.mod_revision)
                    return UpdateResult(obj=new, deleted=True)
                stored = await self._update(key, encode(new), expected_revision=kv.mod_revision)
            except RevisionMismatch as exc:
                kv, fresh = exc.current, True
                continue
            except KeyNotFound:
                kv, fresh = None, True
                continue
            new["metadata"]["resourceVersion"] = str(stored.mod_revision)
            return UpdateResult(obj=new)
        raise self.conflict(name, "too many concurrent writers; please try again")

    async def _create(self, key: str, value: bytes) -> KeyValue:
        if self.ttl is None:  # only Events carry a ttl; every other write is as it always was
            return await self.store.create(key, value)
        return await self.store.create(key, value, ttl=self.ttl)

    async def _update(self, key: str, value: bytes, *, expected_revision: int) -> KeyValue:
        if self.ttl is None:
            return await self.store.update(key, value, expected_revision=expected_revision)
        return await self.store.update(
            key, value, expected_revision=expected_revision, ttl=self.ttl
        )

    async def _create_from(self, create: Callable[[], Awaitable[Obj]]) -> Obj:
        return await self.create(await create())

    async def delete(self, namespace: str | None, name: str, *, expected_rv: int) -> Obj:
        """Remove the object if it is still at ``expected_rv``; returns its final state."""
        try:
            kv = await self.store.delete(self.key(namespace, name), expected_revision=expected_rv)
        except KeyNotFound:
            raise self.not_found(name) from None
        except RevisionMismatch:
            raise self.conflict(name) from None
        return decode(kv)


def check_rv_precondition(storage: ObjectStorage, current: Obj, wanted: str | None) -> None:
    """409 if the caller named a resourceVersion and the object moved on (optimistic lock)."""
    if wanted and wanted != _rv_of(current):
        raise storage.conflict(str((current.get("metadata") or {}).get("name") or ""))
