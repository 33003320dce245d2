"""Controller references: who controls an object, and claiming (adopt / release) by selector.

Why: a ReplicaSet owns the pods that carry an ownerReference to it with ``controller: true``,
not merely the pods its selector matches. Ownership is what lets two controllers with
overlapping selectors coexist, lets the garbage collector find dependents, and lets a pod be
taken out of service by relabelling it. Kubernetes' ``ControllerRefManager`` rules, kept here:

* an object controlled by *this* owner whose labels still match stays claimed; one that stopped
  matching is **released** (our ownerReference removed) — unless the owner is being deleted;
* an **orphan** (no controller reference) that matches is **adopted** (our reference added,
  ``controller: true``, ``blockOwnerDeletion: true``) — unless the owner or the orphan is being
  deleted, and only after a fresh read of the owner confirms it still exists with the same uid
  and is not being deleted (``can_adopt``: the cache may be stale, and adopting for a dead owner
  would hand the pod to the garbage collector);
* an object controlled by *another* owner is never touched.

Writes are read-modify-CAS-write (``update_with_retry``), so a concurrent adopter loses cleanly:
whoever wrote first owns the object and the other sees a controller reference that is not its
own. Objects are the informer's read-only dicts; nothing here mutates them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from api.errors import NotFound
from api.registry import ResourceType
from api.selectors import LabelSelector
from client.rest import ApiClient
from services.controller_manager.retry_on_conflict import update_with_retry

__all__ = [
    "OwnerGone",
    "claim",
    "controller_ref",
    "is_being_deleted",
    "labels_of",
    "new_controller_ref",
]

log = logging.getLogger(__name__)

Obj = dict[str, Any]


class OwnerGone(Exception):
    """The owner is gone or being deleted (checked with a fresh read): adopt nothing."""


def controller_ref(obj: Obj) -> dict[str, Any] | None:
    """The ownerReference with ``controller: true``, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None


def new_controller_ref(owner: Obj, rt: ResourceType) -> dict[str, Any]:
    meta = owner.get("metadata") or {}
    return {
        "apiVersion": rt.api_version,
        "kind": rt.kind,
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def resolve_controller_ref(
    ref: dict[str, Any] | None, *, namespace: str, rt: ResourceType, owners: Any
) -> Obj | None:
    """The owner ``ref`` points at, if it is of kind ``rt`` and that very object (same uid) is
    in the ``owners`` cache (anything with ``get("ns/name")``); else None."""
    if ref is None or ref.get("kind") != rt.kind:
        return None
    if str(ref.get("apiVersion") or "").rpartition("/")[0] != rt.group:
        return None
    owner: Obj | None = owners.get(f"{namespace}/{ref.get('name')}")
    if owner is None or owner["metadata"].get("uid") != ref.get("uid"):
        return None
    return owner


def is_being_deleted(obj: Obj) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def labels_of(obj: Obj) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


async def claim(
    client: ApiClient,
    *,
    owner: Obj,
    owner_rt: ResourceType,
    child_rt: ResourceType,
    selector: LabelSelector,
    candidates: Iterable[Obj],
    can_adopt: Callable[[], Awaitable[None]],
) -> list[Obj]:
    """The candidates this owner controls after adopting matching orphans and releasing strays.

    ``can_adopt()`` raises ``OwnerGone`` when adopting must not happen; it is awaited at most
    once, and only if there is an orphan to adopt.
    """
    owner_meta = owner.get("metadata") or {}
    uid = owner_meta.get("uid")
    owner_deleting = is_being_deleted(owner)
    claimed: list[Obj] = []
    adopt_checked = False
    for obj in candidates:
        ref = controller_ref(obj)
        matches = selector.matches(labels_of(obj))
        if ref is not None:
            if ref.get("uid") != uid:
                continue
            if matches:
                claimed.append(obj)
            elif not owner_deleting:
                await _release(client, child_rt, obj, owner_uid=str(uid))
            continue
        if owner_deleting or not matches or is_being_deleted(obj):
            continue
        if not adopt_checked:
            await can_adopt()  # raises OwnerGone: adopt nothing in this sync
            adopt_checked = True
        adopted = await _adopt(client, child_rt, obj, ref=new_controller_ref(owner, owner_rt))
        if adopted is not None:
            claimed.append(adopted)
    return claimed


async def _adopt(
    client: ApiClient, rt: ResourceType, obj: Obj, *, ref: dict[str, Any]
) -> Obj | None:
    meta = obj["metadata"]
    uid = meta.get("uid")

    def add_ref(fresh: Obj) -> bool:
        fmeta = fresh["metadata"]
        if fmeta.get("uid") != uid or controller_ref(fresh) is not None:
            return False
        if fmeta.get("deletionTimestamp"):
            return False
        fmeta["ownerReferences"] = [*(fmeta.get("ownerReferences") or []), dict(ref)]
        return True

    try:
        written = await update_with_retry(
            client, rt, namespace=meta.get("namespace"), name=meta["name"], mutate=add_ref
        )
    except NotFound:
        return None
    mine = controller_ref(written)
    if mine is None or mine.get("uid") != ref["uid"] or written["metadata"].get("uid") != uid:
        return None
    log.info(
        "%s %s/%s adopted %s %s",
        ref["kind"], meta.get("namespace"), ref["name"], rt.kind, meta["name"],
    )  # fmt: skip
    return written


async def _release(client: ApiClient, rt: ResourceType, obj: Obj, *, owner_uid: str) -> None:
    meta = obj["metadata"]
    uid = meta.get("uid")

    def drop_ref(fresh: Obj) -> bool:
        fmeta = fresh["metadata"]
        refs = fmeta.get("ownerReferences") or []
        kept = [r for r in refs if r.get("uid") != owner_uid]
        if fmeta.get("uid") != uid or len(kept) == len(refs):
            return False
        if kept:
            fmeta["ownerReferences"] = kept
        else:
            fmeta.pop("ownerReferences", None)
        return True

    try:
        await update_with_retry(
            client, rt, namespace=meta.get("namespace"), name=meta["name"], mutate=drop_ref
        )
    except NotFound:
        return
    log.info("released %s %s/%s: its labels no longer match", rt.kind, meta.get("namespace"),
             meta["name"])  # fmt: skip
