"""ControllerRevision history: the pod-template snapshots DaemonSets and StatefulSets keep.

Why a module of its own: a DaemonSet and a StatefulSet (unlike a Deployment, whose history is
its ReplicaSets) record each version of their pod template as an ``apps/v1``
ControllerRevision, and ``kubectl rollout history|undo`` read those objects directly. Both
controllers need the same rules, so they live here once, following
``pkg/controller/history/controller_history.go`` and the two controllers' ``getPatch``:

* **data** — ``template_patch(owner)`` is what Kubernetes stores: a strategic-merge patch
  ``{"spec": {"template": {..., "$patch": "replace"}}}`` that, applied to the owner, restores
  that template (this is exactly what ``kubectl rollout undo`` sends back).
* **names** — ``revision_hash(data, collision_count)``: FNV-32a over the data's canonical JSON
  (plus the collision count as a probe), decimal, spelled in Kubernetes' vowel-free
  ``SafeEncodeString`` alphabet; ``revision_name(owner_name, hash)`` is ``<owner>-<hash>``
  with the prefix cut to 223 characters. The hash values differ from Kubernetes' (which
  hashes Go bytes); their form and role are the same.
* **new revisions** — ``new_revision(owner, owner_rt, data=..., revision=n, ...)`` builds the
  object: the template's labels plus ``hash_label=<hash>`` (DaemonSets use
  ``controller-revision-hash``, StatefulSets ``controller.kubernetes.io/hash``, the default),
  the owner's annotations, a controller reference to the owner.
* **comparing** — ``equal_revision(a, b)``: different hash labels mean different; otherwise
  equal canonical data (``null``/``{}``/``[]`` read as absent, as Go's semantic equality has
  it). ``find_equal_revisions`` keeps the input order; ``sort_by_revision`` orders by
  ``revision``, then creation time, then name; ``max_revision`` (0 for none) + 1 is the next
  revision number.
* **I/O** — ``ControllerHistory(client=..., informer=...)`` over the shared ControllerRevision
  informer: ``claim`` (adopt matching orphans, release strays; ``controller_ref.claim``'s
  rules), ``create`` (retries under a bumped collision count while the name is taken by
  different data, and returns the count it settled on so the caller can record it in
  ``status.collisionCount``; a revision with equal data already there is returned as is),
  ``update_revision`` (raise an existing revision's number, re-reading on Conflict),
  ``delete``, and ``truncate`` (delete the oldest revisions that no live pod or status names,
  beyond ``revisionHistoryLimit``).

What it does not guarantee: decisions come from the informer cache, so two syncs that race
can both decide to create; the apiserver's AlreadyExists and compare-and-swap writes keep the
outcome single, not this module. ``truncate`` keeps ``limit`` revisions besides the live ones
(StatefulSet's rule); Kubernetes' DaemonSet counts live ones in its limit, so it may keep one
or two fewer than this does.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import Any

from api.errors import AlreadyExists, Conflict, NotFound
from api.registry import REGISTRY, ResourceType
from api.selectors import LabelSelector
from client.informer import Informer
from client.rest import ApiClient
from services.controller_manager.controller_ref import claim, new_controller_ref
from services.controller_manager.retry_on_conflict import update_with_retry

__all__ = [
    "CONTROLLER_REVISIONS",
    "HASH_LABEL",
    "ControllerHistory",
    "data_equal",
    "equal_revision",
    "find_equal_revisions",
    "max_revision",
    "new_revision",
    "revision_hash",
    "revision_name",
    "sort_by_revision",
    "template_patch",
]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

CONTROLLER_REVISIONS = REGISTRY.require("apps", "ControllerRevision")

HASH_LABEL = "controller.kubernetes.io/hash"
"""Kubernetes' ``ControllerRevisionHashLabel``: the hash of a revision's data."""

MAX_PREFIX = 223
"""A revision name is at most 253 characters: prefix, dash and a hash of up to 29."""

MAX_CREATE_ATTEMPTS = 10
"""Names taken by different data this many times in a row are no longer bad luck."""

_SAFE_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"


# -- data, hashes and names ------------------------------------------------------------------


def template_patch(owner: Obj) -> Obj:
    """The data Kubernetes snapshots: a patch that puts ``owner``'s template back, whole."""
    template = dict((owner.get("spec") or {}).get("template") or {})
    template["$patch"] = "replace"
    return {"spec": {"template": template}}


def _drop_empty(value: Any) -> Any:
    """``null``, ``{}`` and ``[]`` read as absent (kubectl sends ``creationTimestamp: null``)."""
    if isinstance(value, dict):
        out = {k: _drop_empty(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not None and v != {} and v != []}
    if isinstance(value, list):
        return [_drop_empty(v) for v in value]
    return value


def _canonical(data: Any) -> bytes:
    return json.dumps(_drop_empty(data), sort_keys=True, separators=(",", ":")).encode()


def _fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for byte in data:
        h ^= byte
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def revision_hash(data: Any, collision_count: int | None = None) -> str:
    """A short, vowel-free hash of ``data``; a collision count changes it."""
    raw = _canonical(data)
    if collision_count:
        raw += str(collision_count).encode()
    return "".join(_SAFE_ALPHANUMS[ord(c) % len(_SAFE_ALPHANUMS)] for c in str(_fnv32a(raw)))


def revision_name(prefix: str, hash_: str) -> str:
    return f"{prefix[:MAX_PREFIX]}-{hash_}"


def new_revision(
    owner: Obj,
    owner_rt: ResourceType,
    *,
    data: Obj,
    revision: int,
    collision_count: int | None = None,
    hash_label: str = HASH_LABEL,
) -> Obj:
    """A ControllerRevision (not yet created) of ``data`` controlled by ``owner``."""
    meta = owner["metadata"]
    template = (owner.get("spec") or {}).get("template") or {}
    hash_ = revision_hash(data, collision_count)
    labels = {**((template.get("metadata") or {}).get("labels") or {}), hash_label: hash_}
    rev_meta: Obj = {
        "name": revision_name(meta["name"], hash_),
        "namespace": meta.get("namespace"),
        "labels": labels,
        "ownerReferences": [new_controller_ref(owner, owner_rt)],
    }
    if meta.get("annotations"):
        rev_meta["annotations"] = dict(meta["annotations"])
    return {
        "apiVersion": CONTROLLER_REVISIONS.api_version,
        "kind": CONTROLLER_REVISIONS.kind,
        "metadata": rev_meta,
        "data": data,
        "revision": revision,
    }


# -- comparing and ordering ------------------------------------------------------------------


def _labels(rev: Obj) -> dict[str, str]:
    return (rev.get("metadata") or {}).get("labels") or {}


def equal_revision(a: Obj | None, b: Obj | None, *, hash_label: str = HASH_LABEL) -> bool:
    """Both None, or both hold equal data (different hash labels settle it early)."""
    if a is None or b is None:
        return a is b
    ha, hb = _labels(a).get(hash_label), _labels(b).get(hash_label)
    if ha is not None and hb is not None and ha != hb:
        return False
    return _canonical(a.get("data")) == _canonical(b.get("data"))


def data_equal(rev: Obj, data: Any) -> bool:
    """Whether ``rev`` snapshots ``data`` (e.g. ``template_patch(owner)``)."""
    return _canonical(rev.get("data")) == _canonical(data)


def find_equal_revisions(
    revisions: Iterable[Obj], needle: Obj, *, hash_label: str = HASH_LABEL
) -> list[Obj]:
    return [r for r in revisions if equal_revision(r, needle, hash_label=hash_label)]


def _revision_number(rev: Obj) -> int:
    return int(rev.get("revision") or 0)


def sort_by_revision(revisions: Iterable[Obj]) -> list[Obj]:
    """Oldest first: by revision number, then creation time, then name."""
    return sorted(
        revisions,
        key=lambda r: (
            _revision_number(r),
            str((r.get("metadata") or {}).get("creationTimestamp") or ""),
            str((r.get("metadata") or {}).get("name") or ""),
        ),
    )


def max_revision(revisions: Iterable[Obj]) -> int:
    return max((_revision_number(r) for r in revisions), default=0)


# -- the API side ----------------------------------------------------------------------------


class ControllerHistory:
    """Reads revisions from the shared informer; writes them through the apiserver."""

    def __init__(self, *, client: ApiClient, informer: Informer) -> None:
        self.client = client
        self.informer = informer

    async def claim(
        self,
        owner: Obj,
        owner_rt: ResourceType,
        *,
        selector: LabelSelector,
        can_adopt: Callable[[], Awaitable[None]],
    ) -> list[Obj]:
        """The revisions ``owner`` controls, after adopting matching orphans in its namespace
        and releasing those whose labels stopped matching (``controller_ref.claim``)."""
        namespace = owner["metadata"].get("namespace") or ""
        return await claim(
            self.client,
            owner=owner,
            owner_rt=owner_rt,
            child_rt=CONTROLLER_REVISIONS,
            selector=selector,
            candidates=self.informer.by_index("namespace", namespace),
            can_adopt=can_adopt,
        )

    async def create(
        self, owner: Obj, revision: Obj, *, collision_count: int, hash_label: str = HASH_LABEL
    ) -> tuple[Obj, int]:
        """Create ``revision`` (from ``new_revision``) and return it with the collision count
        its name was made with. A name already holding equal data is that revision (created
        by an earlier sync the cache has not shown yet); one holding other data is a hash
        collision, retried under ``collision_count + 1``."""
        meta = owner["metadata"]
        namespace = meta.get("namespace")
        data = revision.get("data")
        for _ in range(MAX_CREATE_ATTEMPTS):
            hash_ = revision_hash(data, collision_count)
            body = dict(revision)
            body["metadata"] = {
                **revision["metadata"],
                "name": revision_name(meta["name"], hash_),
                "labels": {**_labels(revision), hash_label: hash_},
            }
            try:
                created: Obj = await self.client.create(
                    CONTROLLER_REVISIONS, body, namespace=namespace
                )
                return created, collision_count
            except AlreadyExists:
                name = body["metadata"]["name"]
                try:
                    existing: Obj = await self.client.get(
                        CONTROLLER_REVISIONS, name, namespace=namespace
                    )
                except NotFound:
                    continue  # deleted meanwhile: the same name is free again
                if data_equal(existing, data):
                    return existing, collision_count
                log.info("controller revision %s/%s holds other data; retrying with "
                         "collision count %d", namespace, name, collision_count + 1)  # fmt: skip
                collision_count += 1
        raise Conflict(
            f"could not name a controller revision of {namespace}/{meta['name']} after "
            f"{MAX_CREATE_ATTEMPTS} hash collisions"
        )

    async def update_revision(self, revision: Obj, new_revision: int) -> Obj:
        """``revision`` renumbered to ``new_revision`` (e.g. a rollback brings it back)."""
        meta = revision["metadata"]
        uid = meta.get("uid")

        def renumber(fresh: Obj) -> bool:
            if fresh["metadata"].get("uid") != uid or _revision_number(fresh) == new_revision:
                return False
            fresh["revision"] = new_revision
            return True

        return await update_with_retry(
            self.client,
            CONTROLLER_REVISIONS,
            namespace=meta.get("namespace"),
            name=meta["name"],
            mutate=renumber,
        )

    async def delete(self, revision: Obj) -> None:
        """Delete this very revision (by uid); one already gone is fine."""
        meta = revision["metadata"]
        try:
            await self.client.delete(
                CONTROLLER_REVISIONS,
                meta["name"],
                namespace=meta.get("namespace"),
                preconditions={"uid": meta["uid"]},
            )
        except (NotFound, Conflict):
            return

    async def truncate(
        self, revisions: Iterable[Obj], *, limit: int, live: Collection[str]
    ) -> list[Obj]:
        """Delete the oldest of ``revisions`` whose names are not in ``live`` (the current and
        update revisions, those pods still carry) until at most ``limit`` of those remain;
        the deleted ones."""
        dead = [r for r in sort_by_revision(revisions) if r["metadata"]["name"] not in live]
        doomed = dead[: max(len(dead) - max(limit, 0), 0)]
        for rev in doomed:
            log.info("deleting controller revision %s/%s (revision %d): beyond the history "
                     "limit of %d", rev["metadata"].get("namespace"), rev["metadata"]["name"],
                     _revision_number(rev), limit)  # fmt: skip
            await self.delete(rev)
        return doomed
