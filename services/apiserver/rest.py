"""The REST endpoints: Kubernetes paths and verbs mapped onto the typed storage.

Why: every resource in the registry is served at the paths Kubernetes uses —
``/api/v1/namespaces/{ns}/pods/{name}``, ``/apis/apps/v1/deployments`` (all namespaces),
``/api/v1/nodes/{name}/status`` ... — with the same verbs and answers. This module resolves a
path to (resource, namespace, name, subresource), checks the verb, and runs create, get,
update and patch; lists and watches (``listing``, ``watch``), deletes (``deletion``) and
subresources (``subresources``) live in their own modules.

Contract of each write: body decoded (``codec``), kind/apiVersion/name/namespace checked against
the URL (400), admission (namespace lifecycle), strategy (server-owned fields, status rules),
defaults, mutating webhooks, validation (422), validating webhooks and policies, then one
compare-and-swap write (``storage``). Reads answer JSON, or a
``meta.k8s.io`` Table when the client asks for one (kubectl).

``fieldValidation`` (Strict/Warn/Ignore) is honoured on create, update and patch
(``fieldvalidation``: unknown fields rejected, or dropped with a ``Warning`` header, or dropped).

Every write records its manager's fields in ``metadata.managedFields``; a PATCH of type
``application/apply-patch+yaml`` is server-side apply, creating the object when it is absent
(``apply``).

Limits: ``dryRun`` runs everything but the write (a dry-run apply of an absent object is a 404).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from api.errors import AlreadyExists
from api.registry import ResourceType
from api.uids import generate_name
from services.apiserver import (
    deletion,
    fieldvalidation,
    listing,
    node_restriction,
    subresources,
    watch,
)
from services.apiserver.admission import (
    admit_create,
    admit_update,
    mutate_dynamically,
    validate_dynamically,
)
from services.apiserver.apply import apply_options, apply_to, record_update
from services.apiserver.codec import PatchType, clone, read_object, read_patch
from services.apiserver.context import CONTEXT, ApiContext
from services.apiserver.crd import CUSTOM_TARGET
from services.apiserver.escalation import check_no_escalation
from services.apiserver.handlers import (
    apply_patch,
    check_body_identity,
    is_dry_run,
    method_not_allowed,
    no_route,
    object_response,
    require_verb,
    stored_as,
)
from services.apiserver.identity import request_user
from services.apiserver.node_restriction import CREATE, UPDATE
from services.apiserver.reviews import REVIEW_GROUPS, create_review
from services.apiserver.service_allocation import Reservation, carry_over_allocations
from services.apiserver.strategy import (
    allows_create_on_update,
    default_object,
    prepare_for_create,
    prepare_for_update,
    validate_object,
)
from services.apiserver.webhooks import Attributes

__all__ = ["Target", "create", "get", "patch", "resolve", "setup_rest", "update"]

Obj = dict[str, Any]

_GENERATE_ATTEMPTS = 8
"""generateName retries on a name collision before answering 409 (Kubernetes retries too)."""


@dataclass(frozen=True, slots=True)
class Target:
    """What a request path addresses."""

    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None
    watch_path: bool = False
    """``/api/v1/watch/...``: the deprecated watch prefix, same as ``?watch=true``."""


def resolve(ctx: ApiContext, *, group: str, version: str, tail: str) -> Target:
    """Path segments after ``/api/v1`` or ``/apis/{group}/{version}`` -> ``Target`` (or 404)."""
    parts = tail.split("/")
    if parts and parts[-1] == "":
        parts.pop()
    watch_path = False
    if parts and parts[0] == "watch":
        watch_path = True
        parts = parts[1:]
    if not parts or any(p == "" for p in parts):
        raise no_route()

    def lookup(plural: str) -> ResourceType | None:
        return ctx.registry.get(group, version, plural)

    # /namespaces/{ns}/{plural}[/{name}[/{sub}]] for namespaced kinds
    if len(parts) >= 3 and parts[0] == "namespaces":
        rt = lookup(parts[2])
        if rt is not None and rt.namespaced:
            if len(parts) > 5:
                raise no_route()
            return Target(
                rt=rt,
                namespace=parts[1],
                name=parts[3] if len(parts) > 3 else None,
                subresource=parts[4] if len(parts) > 4 else None,
                watch_path=watch_path,
            )
    # /{plural}[/{name}[/{sub}]]: cluster-scoped kinds, or all namespaces (collection only)
    rt = lookup(parts[0])
    if rt is None or len(parts) > 3:
        raise no_route()
    if rt.namespaced and len(parts) > 1:
        raise no_route()
    return Target(
        rt=rt,
        namespace=None,
        name=parts[1] if len(parts) > 1 else None,
        subresource=parts[2] if len(parts) > 2 else None,
        watch_path=watch_path,
    )


# -- handlers --------------------------------------------------------------------------------


def _write(target: Target, operation: str, name: str) -> node_restriction.Write:
    """``target`` as admission sees a write to it."""
    return node_restriction.Write(
        rt=target.rt,
        operation=operation,
        namespace=target.namespace,
        name=name,
        subresource=target.subresource or "",
    )


def _attributes(request: web.Request, target: Target, operation: str, name: str) -> Attributes:
    """``target`` as dynamic admission (webhooks, policies) sees a write to it."""
    options: dict[str, Any] = (
        {"dryRun": request.query.getall("dryRun")} if is_dry_run(request) else {}
    )
    for key in ("fieldManager", "fieldValidation"):
        if key in request.query:
            options[key] = request.query[key]
    return Attributes(
        rt=target.rt,
        operation=operation,
        namespace=target.namespace,
        name=name,
        user=request_user(request),
        subresource=target.subresource or "",
        dry_run=is_dry_run(request),
        options=options,
    )


def _allocates(ctx: ApiContext, rt: ResourceType) -> bool:
    """Services get their ClusterIP and node ports from the allocator on every write."""
    return ctx.services is not None and (rt.group, rt.kind) == ("", "Service")


async def _reserve(ctx: ApiContext, rt: ResourceType, obj: Obj) -> Reservation | None:
    return await ctx.services.reserve(obj) if ctx.services and _allocates(ctx, rt) else None


async def _admitted_new(
    request: web.Request,
    ctx: ApiContext,
    rt: ResourceType,
    target: Target,
    name: str,
    obj: Obj,
    reservations: list[Reservation],
    *,
    record_as_update: bool,
) -> Obj:
    """An object a PUT or an apply creates, through the create admission chain (the same steps
    as a POST): admitted, defaulted, mutated, validated, its ClusterIP/NodePort reserved.
    ``record_as_update``: its managedFields record the request's manager (an apply has set
    them already)."""
    await admit_create(ctx, rt, namespace=target.namespace, name=name, obj=obj)
    prepare_for_create(rt, obj)
    default_object(rt, obj)
    if record_as_update:
        record_update(request, rt, old=None, new=obj)
    attrs = _attributes(request, target, CREATE, name)
    obj = await mutate_dynamically(request, attrs, obj, old=None)
    validate_object(rt, obj)
    node_restriction.admit(request, _write(target, CREATE, name), obj=obj, old=None)
    await check_no_escalation(request, ctx, rt, obj, user=request_user(request))
    await validate_dynamically(request, attrs, obj, old=None)
    reservation = await _reserve(ctx, rt, obj)
    if reservation is not None:
        reservations.append(reservation)
    return obj


async def _settle(reservations: list[Reservation], final: Obj | None) -> None:
    """Release what a write's reservations hold that ``final`` (None: nothing written) does not."""
    for reservation in reservations:
        await reservation.settle(final)


async def create(request: web.Request, ctx: ApiContext, target: Target) -> web.Response:
    rt = target.rt
    if rt.namespaced and target.namespace is None:
        raise method_not_allowed()
    body = await read_object(request)
    if rt.group == "" and rt.kind == "Binding":
        return await subresources.bind(request, ctx, target, body)
    directive = fieldvalidation.directive_of(request)
    warnings = fieldvalidation.check_object(rt, body, directive=directive)
    check_body_identity(rt, body, namespace=target.namespace, name=None)
    if rt.group in REVIEW_GROUPS:
        return await create_review(request, body, namespace=target.namespace)
    served = rt
    rt, body = stored_as(ctx.registry, served, body)
    target = dataclasses.replace(target, rt=rt)
    meta = body["metadata"]
    dry_run = is_dry_run(request)
    generate = meta.get("generateName") if not meta.get("name") else None
    for attempt in range(_GENERATE_ATTEMPTS if generate else 1):
        obj = clone(body) if generate else body
        obj_meta = obj["metadata"]
        if generate and isinstance(generate, str):
            obj_meta["name"] = generate_name(generate)
        name = str(obj_meta.get("name") or "")
        await admit_create(ctx, rt, namespace=target.namespace, name=name, obj=obj)
        prepare_for_create(rt, obj)
        default_object(rt, obj)
        record_update(request, rt, old=None, new=obj)
        attrs = _attributes(request, target, CREATE, name)
        obj = await mutate_dynamically(request, attrs, obj, old=None)
        validate_object(rt, obj)
        node_restriction.admit(request, _write(target, CREATE, name), obj=obj, old=None)
        await check_no_escalation(request, ctx, rt, obj, user=request_user(request))
        await validate_dynamically(request, attrs, obj, old=None)
        if dry_run:
            response = object_response(request, served, obj, status=201)
            return fieldvalidation.add_warnings(response, warnings)
        reservation = await _reserve(ctx, rt, obj)
        try:
            stored = await ctx.storage(rt).create(obj)
        except BaseException as exc:
            await _settle([reservation] if reservation else [], None)
            if isinstance(exc, AlreadyExists) and generate and attempt + 1 < _GENERATE_ATTEMPTS:
                continue
            raise
        response = object_response(request, served, stored, status=201)
        return fieldvalidation.add_warnings(response, warnings)
    raise AssertionError("unreachable")  # pragma: no cover


async def get(request: web.Request, ctx: ApiContext, target: Target) -> web.Response:
    rt, name = target.rt, str(target.name)
    obj: Obj | None = None
    cache = ctx.cache(rt)
    if request.query.get("resourceVersion") == "0" and cache is not None and cache.ready.is_set():
        event = cache.lookup(rt.key(target.namespace, name))
        if event is None:
            raise ctx.storage(rt).not_found(name)
        obj = event.obj
    if obj is None:
        obj = await ctx.storage(rt).get(target.namespace, name)
    return object_response(request, rt, obj)


async def update(request: web.Request, ctx: ApiContext, target: Target) -> web.Response:
    rt, name = target.rt, str(target.name)
    body = await read_object(request)
    directive = fieldvalidation.directive_of(request)
    warnings = fieldvalidation.check_object(rt, body, directive=directive)
    check_body_identity(rt, body, namespace=target.namespace, name=name)
    served = rt
    rt, body = stored_as(ctx.registry, served, body)
    target = dataclasses.replace(target, rt=rt)
    wanted_rv = str(body["metadata"].get("resourceVersion") or "")
    storage = ctx.storage(rt)
    dry_run = is_dry_run(request)
    dry: list[Obj] = []
    reservations: list[Reservation] = []

    async def mutate(current: Obj) -> Obj:
        current_rv = current["metadata"].get("resourceVersion")
        if wanted_rv and wanted_rv != current_rv:
            raise storage.conflict(name)
        new = clone(body)
        prepare_for_update(rt, new, current)
        if _allocates(ctx, rt):
            carry_over_allocations(new, current)
        default_object(rt, new)
        record_update(request, rt, old=current, new=new)
        await admit_update(ctx, rt, new, old=current)
        attrs = _attributes(request, target, UPDATE, name)
        new = await mutate_dynamically(request, attrs, new, old=current)
        validate_object(rt, new, old=current)
        node_restriction.admit(request, _write(target, UPDATE, name), obj=new, old=current)
        await check_no_escalation(request, ctx, rt, new, user=request_user(request))
        await validate_dynamically(request, attrs, new, old=current)
        if dry_run:
            dry.append(new)
            return current
        reservation = await _reserve(ctx, rt, new)
        if reservation is not None:
            reservations.append(reservation)
        return new

    create_instead = None
    if allows_create_on_update(rt):

        async def create_instead() -> Obj:
            if wanted_rv:
                raise storage.not_found(name)
            obj = clone(body)
            return await _admitted_new(
                request, ctx, rt, target, name, obj, reservations, record_as_update=True
            )

    try:
        result = await storage.guaranteed_update(
            target.namespace, name, mutate, create=None if dry_run else create_instead
        )
    except BaseException:
        await _settle(reservations, None)
        raise
    await _settle(reservations, result.obj)
    if dry:
        return fieldvalidation.add_warnings(object_response(request, served, dry[-1]), warnings)
    response = object_response(request, served, result.obj, status=201 if result.created else 200)
    return fieldvalidation.add_warnings(response, warnings)


async def patch(request: web.Request, ctx: ApiContext, target: Target) -> web.Response:
    """A patch applies to the object as the asked version serves it; the result is stored as
    the stored version (``stored_as``)."""
    served, name = target.rt, str(target.name)
    rt = ctx.registry.stored(served)
    target = dataclasses.replace(target, rt=rt)
    patch_type, doc = await read_patch(request)
    options = apply_options(request, patch_type)
    applying = patch_type is PatchType.APPLY
    if applying:
        check_body_identity(served, doc, namespace=target.namespace, name=name)
    directive = fieldvalidation.directive_of(request)
    storage = ctx.storage(rt)
    dry_run = is_dry_run(request)
    dry: list[Obj] = []
    warnings: list[str] = []
    reservations: list[Reservation] = []

    async def mutate(current: Obj) -> Obj:
        current_meta = current["metadata"]
        live = current if served.conversion is None else served.conversion.from_storage(current)
        if applying:
            new = apply_to(served, live=live, config=doc, options=options)
        else:
            new = apply_patch(served, live, patch_type, doc)
        warnings[:] = fieldvalidation.check_patched(
            served, new, current=live, directive=directive, patch_type=patch_type, patch=doc
        )
        check_body_identity(served, new, namespace=target.namespace, name=name)
        _, new = stored_as(ctx.registry, served, new)
        wanted_rv = new["metadata"].get("resourceVersion")
        if wanted_rv and wanted_rv != current_meta.get("resourceVersion"):
            raise storage.conflict(name)
        prepare_for_update(rt, new, current)
        if _allocates(ctx, rt):
            carry_over_allocations(new, current)
        default_object(rt, new)
        if not applying:
            record_update(request, rt, old=current, new=new)
        await admit_update(ctx, rt, new, old=current)
        attrs = _attributes(request, target, UPDATE, name)
        new = await mutate_dynamically(request, attrs, new, old=current)
        validate_object(rt, new, old=current)
        node_restriction.admit(request, _write(target, UPDATE, name), obj=new, old=current)
        await check_no_escalation(request, ctx, rt, new, user=request_user(request))
        await validate_dynamically(request, attrs, new, old=current)
        if dry_run:
            dry.append(new)
            return current
        reservation = await _reserve(ctx, rt, new)
        if reservation is not None:
            reservations.append(reservation)
        return new

    async def apply_create() -> Obj:
        """An apply to an absent object creates it from the configuration."""
        obj = apply_to(served, live=None, config=doc, options=options)
        warnings[:] = fieldvalidation.check_object(served, obj, directive=directive)
        _, obj = stored_as(ctx.registry, served, obj)
        return await _admitted_new(
            request, ctx, rt, target, name, obj, reservations, record_as_update=False
        )

    create_missing = apply_create if applying and not dry_run else None
    try:
        result = await storage.guaranteed_update(
            target.namespace, name, mutate, create=create_missing
        )
    except BaseException:
        await _settle(reservations, None)
        raise
    await _settle(reservations, result.obj)
    status = 201 if result.created else 200
    response = object_response(request, served, dry[-1] if dry else result.obj, status=status)
    return fieldvalidation.add_warnings(response, warnings)


# -- routing ---------------------------------------------------------------------------------


async def _dispatch(request: web.Request, target: Target) -> web.StreamResponse:
    ctx = request.app[CONTEXT]
    method = request.method
    rt = target.rt
    if target.subresource is not None:
        return await subresources.dispatch(request, ctx, target)
    if target.name is None:
        if method == "GET":
            opts = listing.parse_options(request, target)
            if opts.watch:
                require_verb(rt, "watch")
                return await watch.serve(request, ctx, rt, opts)
            require_verb(rt, "list")
            return await listing.serve(request, ctx, rt, opts)
        if method == "POST":
            require_verb(rt, "create")
            return await create(request, ctx, target)
        if method == "DELETE":
            require_verb(rt, "deletecollection")
            if rt.namespaced and target.namespace is None:
                raise method_not_allowed()
            return await deletion.delete_collection(request, ctx, target.rt, target.namespace)
        raise method_not_allowed()
    if target.watch_path and method == "GET":
        require_verb(rt, "watch")
        opts = listing.parse_options(request, target, name=target.name)
        return await watch.serve(request, ctx, rt, opts)
    if method == "GET":
        require_verb(rt, "get")
        return await get(request, ctx, target)
    if method == "PUT":
        require_verb(rt, "update")
        return await update(request, ctx, target)
    if method == "PATCH":
        require_verb(rt, "patch")
        return await patch(request, ctx, target)
    if method == "DELETE":
        require_verb(rt, "delete")
        return await deletion.delete(request, ctx, target.rt, target.namespace, target.name)
    raise method_not_allowed()


async def handle_core(request: web.Request) -> web.StreamResponse:
    info = request.match_info
    ctx = request.app[CONTEXT]
    target = resolve(ctx, group="", version=info["version"], tail=info["tail"])
    return await _dispatch(request, target)


async def handle_group(request: web.Request) -> web.StreamResponse:
    info = request.match_info
    ctx = request.app[CONTEXT]
    target = resolve(ctx, group=info["group"], version=info["version"], tail=info["tail"])
    if target.rt.custom is not None:
        request[CUSTOM_TARGET] = target.rt  # for its deprecation warning
    return await _dispatch(request, target)


def setup_rest(app: web.Application) -> None:
    """Register the resource routes (after discovery's, which own the bare group paths)."""
    app.router.add_route("*", "/api/{version}/{tail:.+}", handle_core)
    app.router.add_route("*", "/apis/{group}/{version}/{tail:.+}", handle_group)
