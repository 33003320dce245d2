"""DELETE and deletecollection: graceful deletion, finalizers, preconditions, propagation.

Why: deleting is a protocol, not a single write. Kubernetes' rules, which this module follows:

* **Preconditions** (``DeleteOptions.preconditions.uid`` / ``resourceVersion``) that no longer
  hold are a 409 Conflict.
* **Graceful deletion (pods).** A pod bound to a node gets ``deletionTimestamp = now + grace`` and
  ``deletionGracePeriodSeconds = grace`` (``gracePeriodSeconds``, else the pod's
  ``terminationGracePeriodSeconds``, else 30) — a MODIFIED event the kubelet acts on; the kubelet
  finishes it with a grace-0 delete. A pod never bound, or already terminal, goes at once. A
  second delete may shorten the grace period, never lengthen it.
* **Finalizers.** An object with finalizers only gets ``deletionTimestamp`` (grace 0 for kinds
  without graceful deletion); whoever removes the last finalizer deletes it (``storage``).
  ``propagationPolicy: Foreground`` adds the ``foregroundDeletion`` finalizer, ``Orphan`` (or
  ``orphanDependents: true``) adds ``orphan``; ``Background`` (the default) adds neither — the
  garbage collector honours them.
* **Namespaces** turn ``Terminating`` (phase and ``deletionTimestamp``) and stay until their
  ``spec.finalizers`` are emptied through ``.../finalize`` (the namespace controller's job);
  ``default``, ``kube-system`` and ``kube-public`` may not be deleted.
* The answer: the object (200) while deletion is pending; once gone, the final object for pods
  and namespaces, else a ``Status`` of ``Success`` naming what was deleted.

Limits: deletecollection deletes one object at a time (each with the same options) and answers
with the list of what it affected.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from api.errors import BadRequest, Conflict, NotFound
from api.meta import DeleteOptions, format_time, now_time, parse_time
from api.registry import ResourceType
from services.apiserver.admission import admit_delete, admit_delete_dynamically
from services.apiserver.codec import json_response, read_body
from services.apiserver.context import ApiContext
from services.apiserver.custom_objects import served_as
from services.apiserver.identity import request_user
from services.apiserver.listing import list_objects
from services.apiserver.node_restriction import DELETE, Write, admit_named
from services.apiserver.query import ListOptions, parse_bool
from services.apiserver.storage import ObjectStorage
from services.apiserver.strategy import is_graceful, returns_deleted_object
from services.apiserver.webhooks import Attributes, is_exempt

__all__ = [
    "DeleteOutcome",
    "delete",
    "delete_collection",
    "delete_object",
    "parse_delete_options",
    "read_delete_options",
]

Obj = dict[str, Any]

DEFAULT_GRACE_SECONDS = 30
ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"
NAMESPACE_FINALIZER = "kubernetes"


async def read_delete_options(request: web.Request) -> DeleteOptions:
    """``DeleteOptions`` from the body (JSON), overridden by query parameters; 400 if malformed."""
    body = await read_body(request) if request.can_read_body else b""
    data: dict[str, Any] = {}
    if body.strip():
        try:
            data = json.loads(body)
        except ValueError as exc:
            raise BadRequest(f"error decoding DeleteOptions: {exc}") from None
        if not isinstance(data, dict):
            raise BadRequest("DeleteOptions must be a JSON object")
    query = request.query
    if "gracePeriodSeconds" in query:
        try:
            data["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
        except ValueError:
            raise BadRequest(
                f'invalid value for gracePeriodSeconds: "{query["gracePeriodSeconds"]}"'
            ) from None
    if "propagationPolicy" in query:
        data["propagationPolicy"] = query["propagationPolicy"]
    orphan = parse_bool(query.get("orphanDependents"), name="orphanDependents")
    if orphan is not None:
        data["orphanDependents"] = orphan
    if "dryRun" in query:
        data["dryRun"] = query.getall("dryRun")
    return parse_delete_options(data)


def parse_delete_options(data: dict[str, Any]) -> DeleteOptions:
    """``DeleteOptions`` from its JSON form; 400 if malformed or contradictory."""
    try:
        options = DeleteOptions.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise BadRequest(f"invalid DeleteOptions: {where}: {first['msg']}") from None
    if options.orphan_dependents is not None and options.propagation_policy is not None:
        raise BadRequest(
            "orphanDependents: Invalid value: ...: orphanDependents and deletionPropagation "
            "cannot be both set"
        )
    for value in options.dry_run or []:
        if value != "All":
            raise BadRequest(f'dryRun: Unsupported value: "{value}": supported values: "All"')
    return options


class DeleteOutcome:
    """What a delete did: the object (final or pending) and whether it is gone."""

    __slots__ = ("deleted", "obj")

    def __init__(self, obj: Obj, *, deleted: bool) -> None:
        self.obj = obj
        self.deleted = deleted


def _check_preconditions(storage: ObjectStorage, current: Obj, options: DeleteOptions) -> None:
    pre = options.preconditions
    if pre is None:
        return
    meta = current["metadata"]
    name = str(meta.get("name"))
    if pre.uid is not None and pre.uid != meta.get("uid"):
        raise storage.conflict(
            name,
            f"Precondition failed: UID in precondition: {pre.uid}, UID in object meta: {meta.get('uid')}",
        )
    if pre.resource_version is not None and pre.resource_version != meta.get("resourceVersion"):
        raise storage.conflict(
            name,
            "Precondition failed: ResourceVersion in precondition: "
            f"{pre.resource_version}, ResourceVersion in object meta: {meta.get('resourceVersion')}",
        )


def _grace_period(rt: ResourceType, current: Obj, options: DeleteOptions) -> int:
    """Seconds of grace this delete grants (0: remove now)."""
    if not is_graceful(rt):
        return 0
    spec = current.get("spec") or {}
    status = current.get("status") or {}
    if options.grace_period_seconds is not None:
        grace = options.grace_period_seconds
    else:
        tgps = spec.get("terminationGracePeriodSeconds")
        grace = tgps if isinstance(tgps, int) else DEFAULT_GRACE_SECONDS
    if grace < 0:
        grace = 1
    if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
        return 0
    return grace


def _finalizers_for(current: Obj, options: DeleteOptions) -> list[str] | None:
    """The finalizers after applying the propagation policy; None when unchanged."""
    finalizers = list(current["metadata"].get("finalizers") or [])
    policy = options.propagation_policy
    if options.orphan_dependents is not None:
        policy = "Orphan" if options.orphan_dependents else "Background"
    if policy is None:
        return None
    wanted = [f for f in finalizers if f not in (ORPHAN, FOREGROUND)]
    if policy == "Orphan":
        wanted.append(ORPHAN)
    elif policy == "Foreground":
        wanted.append(FOREGROUND)
    return None if wanted == finalizers else wanted


async def delete_object(
    ctx: ApiContext,
    rt: ResourceType,
    namespace: str | None,
    name: str,
    options: DeleteOptions,
) -> DeleteOutcome:
    """Run the deletion protocol once on one object (module docstring)."""
    admit_delete(ctx, rt, name=name)
    storage = ctx.storage(rt)
    dry_run = bool(options.dry_run)
    is_namespace = rt.group == "" and rt.kind == "Namespace"
    removed: list[Obj] = []

    async def mutate(current: Obj) -> Obj | None:
        _check_preconditions(storage, current, options)
        removed.clear()
        meta = current["metadata"]
        new = copy.deepcopy(current)
        new_meta = new["metadata"]
        finalizers = _finalizers_for(current, options)
        if finalizers is not None:
            new_meta["finalizers"] = finalizers
        if is_namespace:
            if not meta.get("deletionTimestamp"):
                new_meta["deletionTimestamp"] = now_time()
                new_meta["deletionGracePeriodSeconds"] = 0
                new.setdefault("status", {})["phase"] = "Terminating"
                return new
            if (current.get("spec") or {}).get("finalizers"):
                raise Conflict(
                    "Operation cannot be fulfilled on namespaces "
                    f'"{name}": The system is ensuring all content is removed from this namespace.  '
                    "Upon completion, this namespace will automatically be purged by the system.",
                    kind="namespaces",
                    name=name,
                )
        grace = _grace_period(rt, current, options)
        pending = bool(meta.get("deletionTimestamp"))
        if pending:
            current_grace = meta.get("deletionGracePeriodSeconds")
            if isinstance(current_grace, int) and grace < current_grace:
                new_meta["deletionGracePeriodSeconds"] = grace
                deadline = datetime.now(UTC) + timedelta(seconds=grace)
                existing = parse_time(meta["deletionTimestamp"])
                new_meta["deletionTimestamp"] = format_time(min(deadline, existing))
        else:
            new_meta["deletionTimestamp"] = format_time(
                datetime.now(UTC) + timedelta(seconds=grace)
            )
            new_meta["deletionGracePeriodSeconds"] = grace
        if new_meta.get("finalizers") or new_meta.get("deletionGracePeriodSeconds"):
            return None if new == current else new
        # nothing holds it back: remove it now
        removed.append(current)
        return None

    if dry_run:
        current = await storage.get(namespace, name)
        return DeleteOutcome(current, deleted=False)
    while True:
        result = await storage.guaranteed_update(namespace, name, mutate)
        if result.deleted:
            return DeleteOutcome(result.obj, deleted=True)
        if not removed:
            return DeleteOutcome(result.obj, deleted=False)
        expected = int(removed[0]["metadata"]["resourceVersion"])
        try:
            final = await storage.delete(namespace, name, expected_rv=expected)
        except Conflict:
            continue  # it changed under us: run the protocol again on the new state
        return DeleteOutcome(final, deleted=True)


def _success_status(rt: ResourceType, obj: Obj) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    details: dict[str, Any] = {"name": meta.get("name"), "kind": rt.plural, "uid": meta.get("uid")}
    if rt.group:
        details["group"] = rt.group
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }


async def _validate_dynamically(
    request: web.Request,
    ctx: ApiContext,
    rt: ResourceType,
    namespace: str | None,
    name: str,
    options: DeleteOptions,
) -> None:
    """The webhooks and policies on a DELETE: ``oldObject`` is the stored object."""
    if is_exempt(rt):
        return
    current = await ctx.storage(rt).get_or_none(namespace, name)
    if current is None:
        return  # delete_object answers the 404
    attrs = Attributes(
        rt=rt,
        operation=DELETE,
        namespace=namespace,
        name=name,
        user=request_user(request),
        dry_run=bool(options.dry_run),
        options={k: v for k, v in options.to_dict().items() if k not in ("apiVersion", "kind")},
    )
    await admit_delete_dynamically(request, attrs, old=current)


async def delete(
    request: web.Request,
    ctx: ApiContext,
    rt: ResourceType,
    namespace: str | None,
    name: str | None,
) -> web.Response:
    options = await read_delete_options(request)
    write = Write(rt=rt, operation=DELETE, namespace=namespace, name=str(name))
    await admit_named(request, ctx, write)
    await _validate_dynamically(request, ctx, rt, namespace, str(name), options)
    outcome = await delete_object(ctx, rt, namespace, str(name), options)
    if outcome.deleted and not returns_deleted_object(rt):
        return json_response(_success_status(rt, outcome.obj))
    return json_response(served_as(rt, outcome.obj))


async def delete_collection(
    request: web.Request, ctx: ApiContext, rt: ResourceType, namespace: str | None
) -> web.Response:
    options = await read_delete_options(request)
    opts = ListOptions.parse(request.query, rt, namespace=namespace)
    listed = await list_objects(ctx, rt, opts)
    affected: list[Obj] = []
    for obj in listed.objects:
        meta = obj["metadata"]
        try:
            await _validate_dynamically(
                request, ctx, rt, meta.get("namespace"), meta["name"], options
            )
            outcome = await delete_object(ctx, rt, meta.get("namespace"), meta["name"], options)
        except NotFound:
            continue
        affected.append(served_as(rt, outcome.obj))
    body = {
        "kind": rt.list_kind,
        "apiVersion": rt.api_version,
        "metadata": {"resourceVersion": str(listed.revision)},
        "items": affected,
    }
    return json_response(body)
