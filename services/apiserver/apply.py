"""Server-side apply and managedFields on every write path of every kind.

Why: ``api.managed_fields`` knows field sets, merges and conflicts over plain values; this module
ties it to requests — which manager is writing (``?fieldManager=``, else the User-Agent's
product as Kubernetes derives it), which part of an object is tracked (not the server's own
metadata, not ``status`` through the main resource of a kind with a status subresource, only
``status`` through ``.../status``), which shape a kind has (a CRD's structural schema, or the
built-in strategic-merge tables), and how a conflict is answered (409 ``Conflict`` with one
``FieldManagerConflict`` cause per field, worded as Kubernetes).

Handlers call ``record_update`` after defaulting on create, update, patch, status and scale
writes, and ``apply_to`` instead of a patch for ``application/apply-patch+yaml``.

Limits: managedFields a client sends are taken as they are (an empty list resets them); a
malformed entry is dropped rather than refused; Kubernetes' upgrade of client-side-apply
managers to server-side ownership (``last-applied-configuration``) is not done.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from api.errors import BadRequest, Conflict, Invalid
from api.managed_fields import (
    APPLY,
    UPDATE,
    ApplyConflicts,
    Key,
    Managers,
    Shape,
    created_fields_v1,
    path_string,
    shape_for_builtin,
    shape_from_schema,
    wire_entry,
)
from api.meta import now_time
from api.registry import ResourceType
from services.apiserver.codec import PatchType
from services.apiserver.query import query_flag

__all__ = ["ApplyOptions", "apply_options", "apply_to", "manager_of", "record_update"]

Obj = dict[str, Any]

_SERVER_META = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "managedFields",
)
"""ObjectMeta fields nobody owns (Kubernetes' fieldmanager strips them before comparing)."""

_MAX_MANAGER_LENGTH = 128


def manager_of(request: web.Request) -> str:
    """``?fieldManager=``, else the User-Agent up to its first ``/`` (``kubectl/v1.32 ...`` is
    ``kubectl``), cut to 128 characters as Kubernetes does."""
    given = request.query.get("fieldManager")
    if given:
        return given
    agent = request.headers.get("User-Agent", "")
    return agent.split("/", 1)[0][:_MAX_MANAGER_LENGTH]


@dataclass(frozen=True, slots=True)
class ApplyOptions:
    """The apply-only query parameters of a PATCH, checked as Kubernetes' ``PatchOptions``."""

    manager: str
    force: bool


def apply_options(request: web.Request, patch_type: PatchType) -> ApplyOptions:
    """``fieldManager`` is required for apply, ``force`` allowed only there (422 otherwise)."""
    force_raw = request.query.get("force")
    causes = []
    if patch_type is PatchType.APPLY:
        if not request.query.get("fieldManager"):
            causes.append(
                {
                    "reason": "FieldValueRequired",
                    "message": "Required value: is required for apply patch",
                    "field": "fieldManager",
                }
            )
    elif force_raw is not None:
        causes.append(
            {
                "reason": "FieldValueForbidden",
                "message": "Forbidden: may not be specified for non-apply patch",
                "field": "force",
            }
        )
    manager = request.query.get("fieldManager", "")
    if len(manager) > _MAX_MANAGER_LENGTH:
        causes.append(
            {
                "reason": "FieldValueTooLong",
                "message": f"Too long: may not be more than {_MAX_MANAGER_LENGTH} bytes",
                "field": "fieldManager",
            }
        )
    if causes:
        raise Invalid.of("PatchOptions", "", causes, group="meta.k8s.io")
    return ApplyOptions(manager=manager, force=query_flag(force_raw))


_CUSTOM_SHAPES: dict[tuple[str, str, str], tuple[object, Shape]] = {}


def _shape(rt: ResourceType) -> Shape:
    """``rt``'s shape; a custom kind's is rebuilt when its CRD's schema object changes."""
    if rt.custom is None:
        return shape_for_builtin(rt.kind)
    key = (rt.group, rt.version, rt.kind)
    cached = _CUSTOM_SHAPES.get(key)
    if cached is None or cached[0] is not rt.custom.schema:
        cached = _CUSTOM_SHAPES[key] = (rt.custom.schema, shape_from_schema(rt.custom.schema))
    return cached[1]


def _tracked(rt: ResourceType, obj: Obj | None, subresource: str) -> Obj:
    """The part of ``obj`` whose fields have owners through ``subresource``."""
    if obj is None:
        return {}
    if subresource == "status":
        return {"status": obj["status"]} if "status" in obj else {}
    out = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    if rt.has_status:
        out.pop("status", None)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        meta = {k: v for k, v in meta.items() if k not in _SERVER_META}
        if meta:
            out["metadata"] = meta
        else:
            del out["metadata"]
    return out


def _managers(old: Obj | None, new: Obj) -> Managers:
    """The managers to start from: what the client sent, else what is stored."""
    sent = (new.get("metadata") or {}).get("managedFields")
    if sent is None and old is not None:
        sent = (old.get("metadata") or {}).get("managedFields")
    return Managers.decode(sent)


def _store(obj: Obj, managers: Managers) -> None:
    meta = obj.setdefault("metadata", {})
    encoded = managers.encode()
    if encoded:
        meta["managedFields"] = encoded
    else:
        meta.pop("managedFields", None)


def record_update(
    request: web.Request, rt: ResourceType, *, old: Obj | None, new: Obj, subresource: str = ""
) -> None:
    """Set ``new``'s managedFields after an Update (create, update, patch) by the request's
    manager: it owns what it changed, and the others lose it."""
    managers = _managers(old, new)
    key = (manager_of(request), UPDATE, subresource)
    if old is None and not managers.entries:
        _store_created(new, rt, key=key, subresource=subresource)
        return
    managers.update(
        _shape(rt),
        _tracked(rt, old, subresource),
        _tracked(rt, new, subresource),
        key=key,
        api_version=rt.api_version,
        now=now_time(),
    )
    _store(new, managers)


def _store_created(obj: Obj, rt: ResourceType, *, key: Key, subresource: str) -> None:
    """A create that sent no managedFields: its manager owns every tracked field — the one
    entry ``Managers.update`` from nothing would encode, built straight from the object."""
    fields = created_fields_v1(_shape(rt), _tracked(rt, obj, subresource))
    meta = obj.setdefault("metadata", {})
    if fields:
        meta["managedFields"] = [
            wire_entry(key, api_version=rt.api_version, time=now_time(), fields=fields)
        ]
    else:
        meta.pop("managedFields", None)


def apply_to(
    rt: ResourceType,
    *,
    live: Obj | None,
    config: Obj,
    options: ApplyOptions,
    subresource: str = "",
) -> Obj:
    """``live`` (None: absent) with ``config`` applied by ``options.manager``; its managedFields
    set. 409 when the apply changes fields others own, unless forced."""
    config_meta = config.get("metadata")
    if isinstance(config_meta, dict) and config_meta.get("managedFields") is not None:
        raise BadRequest("metadata.managedFields must be nil")
    identity: Obj = {k: config[k] for k in ("apiVersion", "kind", "metadata") if k in config}
    base = live if live is not None else identity
    managers = _managers(None, base)
    tracked_live = _tracked(rt, live, subresource)
    try:
        merged = managers.apply(
            _shape(rt),
            tracked_live,
            _tracked(rt, config, subresource),
            key=(options.manager, APPLY, subresource),
            api_version=rt.api_version,
            now=now_time(),
            force=options.force,
        )
    except ApplyConflicts as exc:
        raise _conflict(exc) from None
    out = {k: v for k, v in base.items() if k not in tracked_live}
    out.update(merged)
    if subresource != "status":
        server_meta = {k: v for k, v in (base.get("metadata") or {}).items() if k in _SERVER_META}
        out["metadata"] = server_meta | (merged.get("metadata") or {})
    _store(out, managers)
    return out


def _conflict(exc: ApplyConflicts) -> Conflict:
    """``errors.NewApplyConflict``: the message and the causes, no name or kind."""
    return Conflict(
        str(exc),
        causes=[
            {
                "reason": "FieldManagerConflict",
                "message": f"conflict with {c.manager}",
                "field": path_string(c.path),
            }
            for c in exc.conflicts
        ],
    )
