"""The live dashboard at ``/ui``: static files shipped in the package, and one JSON endpoint.

Why: the seed explains Kubernetes by following one pod across the components; the dashboard
shows that flow for a real cluster in a browser, from the same list-watch streams every
component uses. The page (``services/apiserver/ui/``: plain HTML, CSS and JavaScript modules,
no build step, no CDN) lists nodes, pods and events by listing then watching the regular API
(``?watch=1`` chunked JSON lines, re-listing on 410), reads a pod's logs from ``pods/log``, and
draws a pod's trace as a swimlane, one lane per component.

What it owns:

* ``GET /ui`` (redirects to ``/ui/``), ``GET /ui/`` (the page) and ``GET /ui/static/<file>``
  (its scripts and styles);
* ``GET /ui/api/trace/namespaces/{namespace}/pods/{name}``: the steps ``api.pod_trace`` reads
  from the pod, the Events about it and about its controller owners (its ReplicaSet, that
  ReplicaSet's Deployment ...), all taken from this apiserver's watch caches, as
  ``{"kind": "PodTrace", "pod": {...}, "steps": [TraceStep.to_json(), ...]}``.

Authorization: every path here is a non-resource URL, so the authorization middleware asks RBAC
about ``get`` on it like any other request. On the insecure loopback port every request is the
superuser, so the page simply works there. On the secure port a browser has no credentials of
its own: it gets the page when it presents a client certificate the apiserver trusts, or when
an administrator makes the static files public (a ClusterRole allowing ``get`` on ``/ui`` and
``/ui/*`` bound to ``system:authenticated`` and ``system:unauthenticated``, as Kubernetes'
dashboard serves its login page to anyone); the page then sends the bearer token a person
pastes into it with every API call.
Because making ``/ui/*`` public also makes the trace endpoint's path public, the endpoint asks
the authorizers itself whether the user may ``get`` the pod and ``list`` Events in its
namespace — it never reveals more than those two requests would. An owner the user may not
``get`` is left out of the trace.

Not guaranteed: the trace reads the watch caches, which may lag the store by a moment (a pod
created an instant ago can be 404 here); Events older than ``--event-ttl`` are gone, and with
them the steps they told.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiohttp import web

from api.errors import NotFound
from api.pod_trace import pod_trace
from api.registry import ResourceType
from services.apiserver.authorization import AUTHORIZER
from services.apiserver.context import CONTEXT, ApiContext
from services.apiserver.forbidden import forbidden
from services.apiserver.identity import Decision, RequestAttributes, request_user
from services.apiserver.predicate import Predicate

__all__ = ["UI_DIR", "setup_dashboard"]

Obj = dict[str, Any]

UI_DIR = Path(__file__).with_name("ui")
"""The page's files; ``pyproject.toml``'s package-data ships them in the wheel."""

_MAX_OWNER_DEPTH = 4
"""Controller owners followed up from a pod: ReplicaSet, Deployment, and room for a CRD above
them. A cycle of ownerReferences (possible: nothing forbids it) ends here too."""


async def _to_page(request: web.Request) -> web.StreamResponse:
    raise web.HTTPMovedPermanently("/ui/")


async def _index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(UI_DIR / "index.html", headers={"Cache-Control": "no-cache"})


async def _trace(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    namespace = request.match_info["namespace"]
    name = request.match_info["name"]
    pods = ctx.registry.require("", "Pod")
    events = ctx.registry.require("", "Event")
    await _require(request, "get", pods, namespace, name)
    await _require(request, "list", events, namespace, "")
    pod = _cached(ctx, pods, namespace, name)
    if pod is None:
        raise NotFound.of("pods", name)
    owners = [o for o in _owners(ctx, pod) if await _allowed(request, "get", o[0], namespace)]
    owner_objects = [obj for _, obj in owners]
    steps = pod_trace(pod, _events_about(ctx, events, [pod, *owner_objects]), owner_objects)
    meta = pod["metadata"]
    body = {
        "kind": "PodTrace",
        "pod": {
            "namespace": namespace,
            "name": name,
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "steps": [step.to_json() for step in steps],
    }
    return web.json_response(body, headers={"Cache-Control": "no-store"})


def _attributes(
    request: web.Request, verb: str, rt: ResourceType, namespace: str, name: str
) -> RequestAttributes:
    return RequestAttributes(
        user=request_user(request),
        verb=verb,
        resource_request=True,
        api_group=rt.group,
        api_version=rt.version,
        resource=rt.plural,
        namespace=namespace,
        name=name,
    )


async def _allowed(request: web.Request, verb: str, rt: ResourceType, namespace: str) -> bool:
    attrs = _attributes(request, verb, rt, namespace, "")
    decision, _ = await request.app[AUTHORIZER].authorize(attrs)
    return decision is Decision.ALLOW


async def _require(
    request: web.Request, verb: str, rt: ResourceType, namespace: str, name: str
) -> None:
    """403 unless the user may ``verb`` ``rt`` (the request the trace stands in for)."""
    attrs = _attributes(request, verb, rt, namespace, name)
    decision, reason = await request.app[AUTHORIZER].authorize(attrs)
    if decision is not Decision.ALLOW:
        raise forbidden(attrs, reason)


def _cached(ctx: ApiContext, rt: ResourceType, namespace: str, name: str) -> Obj | None:
    cache = ctx.cache(rt)
    event = cache.lookup(rt.key(namespace, name)) if cache is not None else None
    return event.obj if event is not None else None


def _owners(ctx: ApiContext, obj: Obj) -> list[tuple[ResourceType, Obj]]:
    """The chain of controller owners above ``obj`` that the caches hold, nearest first."""
    chain: list[tuple[ResourceType, Obj]] = []
    namespace = obj["metadata"].get("namespace", "")
    for _ in range(_MAX_OWNER_DEPTH):
        ref = _controller_ref(obj)
        if ref is None:
            break
        group = ref.get("apiVersion", "").rpartition("/")[0]
        rt = ctx.registry.by_kind(group, ref.get("kind", ""))
        if rt is None or not rt.namespaced:
            break
        owner = _cached(ctx, rt, namespace, ref.get("name", ""))
        if owner is None or owner["metadata"].get("uid") != ref.get("uid"):
            break  # gone, or a namesake made since: not this object's owner
        chain.append((rt, owner))
        obj = owner
    return chain


def _controller_ref(obj: Obj) -> Obj | None:
    refs: list[Obj] = obj["metadata"].get("ownerReferences") or []
    return next((ref for ref in refs if ref.get("controller")), None)


def _events_about(ctx: ApiContext, rt: ResourceType, objects: Sequence[Obj]) -> list[Obj]:
    """The cached Events whose involvedObject is one of ``objects`` (matched by uid)."""
    cache = ctx.cache(rt)
    if cache is None or not objects:
        return []
    uids = {o["metadata"].get("uid") for o in objects} - {None}
    namespace = objects[0]["metadata"].get("namespace")
    events, _ = cache.snapshot(Predicate(rt=rt, namespace=namespace))
    return [e.obj for e in events if (e.obj.get("involvedObject") or {}).get("uid") in uids]


def setup_dashboard(app: web.Application) -> None:
    """Add the page, its files and the trace endpoint to the apiserver's routes."""
    app.router.add_get("/ui", _to_page)
    app.router.add_get("/ui/", _index)
    app.router.add_static("/ui/static", UI_DIR, append_version=False)
    app.router.add_get("/ui/api/trace/namespaces/{namespace}/pods/{name}", _trace)
