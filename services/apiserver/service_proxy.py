"""``services/{name}/proxy`` and ``pods/{name}/proxy``: HTTP relayed to a Service's endpoint or a pod.

Why: the URLs ``kubectl cluster-info`` prints, ``kubectl get --raw .../proxy/...`` and the
official client's ``connect_*_proxy*`` calls reach a pod's HTTP server through the apiserver.
Kubernetes' ``ResourceLocation`` of each registry (pkg/registry/core/service and .../pod) picks
the target; its upgrade-aware proxy handler relays the request. Here the same, for
``GET POST PUT PATCH DELETE HEAD OPTIONS`` (other methods: 405):

* the name is ``name``, ``name:port`` or ``scheme:name:port`` with scheme ``http`` (the default)
  or ``https`` (the pod's certificate is not checked, as Kubernetes' proxy transport does not);
  anything else is a 400 ``invalid service request "..."`` / ``invalid pod request "..."``;
* a **Service**'s port is a port name, or a port number that names the Service port declaring
  it (none: 503 ``no service port 81 found for service "web"``), or empty (the unnamed port);
  the target is a random ready endpoint of its EndpointSlices with a port of that name — and,
  as Kubernetes' ``isValidAddress`` demands, one whose ``targetRef`` is a pod of the namespace
  that has that IP. No slice endpoints at all: 503 ``no endpoints available for service "web"``;
  none that fits: 503 ``no endpoints available for service "web:80"`` (the name as asked);
* a **pod**'s port is the number given, a container port's name, or by default the first
  declared container port (none: the scheme's, 80 or 443);
* the target address is parsed from the object (an endpoint's or the pod's IP) and must lie in
  127.0.0.0/8 (DESIGN.md §6: nothing leaves loopback): a pod elsewhere is a 400 ``address not
  allowed`` (what Kubernetes says of a pod IP it will not dial), an endpoint elsewhere is
  skipped like an invalid one. The URL is assembled from the parsed IP and an integer port;
  the path after ``/proxy`` and the query are passed on as sent (percent-encoding kept);
* ``.../proxy`` with no path, for GET and HEAD, is a 301 to ``.../proxy/`` (Kubernetes'
  ``proxyRedirectsforRootPath``); the request's headers go on without hop-by-hop headers, the
  caller's ``Authorization`` and ``Impersonate-*`` (authentication consumed them), with
  ``X-Forwarded-For``; the answer comes back as the target gave it, streamed; a target that
  cannot be reached is a 503 ``error trying to reach service: ...``.

Limits: no protocol upgrades (WebSocket) through the proxy, and HTML answers are passed on as
they are (Kubernetes rewrites their links to go through the proxy again).
"""

from __future__ import annotations

import ipaddress
import logging
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from api.errors import BadRequest, MethodNotAllowed, ServiceUnavailable
from services.apiserver.context import CONTEXT

__all__ = ["PROXY_METHODS", "Target", "setup_service_proxy", "split_scheme_name_port"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

PROXY_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
"""What Kubernetes' ``ProxyREST`` connects (``ConnectMethods``)."""
LOOPBACK = ipaddress.IPv4Network("127.0.0.0/8")
DEFAULT_PORTS = {"http": 80, "https": 443}
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
HOP_BY_HOP = frozenset(
    h.lower()
    for h in (
        "Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "TE",
        "Trailer", "Transfer-Encoding", "Upgrade", "Host", "Content-Length",
    )
)  # fmt: skip
"""Headers that describe one hop (and the length aiohttp sets itself), never relayed."""
CONSUMED = ("authorization",)
"""Request headers the apiserver's authentication used up; the target never sees them."""

_SESSION: web.AppKey[aiohttp.ClientSession] = web.AppKey(
    "object_proxy_session", aiohttp.ClientSession
)


@dataclass(frozen=True, slots=True)
class Target:
    """Where a proxied request goes: a parsed loopback IP, a port and a scheme."""

    scheme: str
    ip: ipaddress.IPv4Address
    port: int

    def url(self, raw_path: str, query: str) -> URL:
        return URL.build(
            scheme=self.scheme,
            host=str(self.ip),
            port=self.port,
            path=raw_path or "/",
            query_string=query,
            encoded=True,
        )


def split_scheme_name_port(text: str) -> tuple[str, str, str] | None:
    """``name``, ``name:port`` or ``scheme:name:port`` -> (scheme, name, port), as Kubernetes'
    ``SplitSchemeNamePort``; None when malformed (an empty name, an unknown scheme, too many
    parts)."""
    parts = text.split(":")
    if len(parts) == 1:
        scheme, name, port = "", parts[0], ""
    elif len(parts) == 2:
        scheme, (name, port) = "", parts
    elif len(parts) == 3:
        scheme, name, port = parts
    else:
        return None
    if not name or scheme not in ("", "http", "https"):
        return None
    return scheme, name, port


def _loopback(text: Any) -> ipaddress.IPv4Address | None:
    try:
        ip = ipaddress.ip_address(str(text))
    except ValueError:
        return None
    return ip if isinstance(ip, ipaddress.IPv4Address) and ip in LOOPBACK else None


def _number(port: str) -> int | None:
    return int(port) if port.isdigit() else None


# -- pods ----------------------------------------------------------------------------------


def _pod_port(pod: Obj, port: str, *, scheme: str) -> int:
    """The pod's port for ``port``: a number, a container port's name, or (empty) the first
    declared container port, else the scheme's (the pod IP alone in the URL)."""
    declared = [
        p for c in (pod.get("spec") or {}).get("containers") or [] for p in c.get("ports") or []
    ]
    if not port:
        first = declared[0].get("containerPort") if declared else None
        return first if isinstance(first, int) else DEFAULT_PORTS[scheme]
    if (number := _number(port)) is not None and 0 < number < 65536:
        return number
    for p in declared:
        if p.get("name") == port and isinstance(p.get("containerPort"), int):
            return int(p["containerPort"])
    raise BadRequest(f'invalid pod request: pod "{pod["metadata"]["name"]}" has no port {port!r}')


async def pod_target(request: web.Request, namespace: str, id_: str) -> Target:
    split = split_scheme_name_port(id_)
    if split is None:
        raise BadRequest(f'invalid pod request "{id_}"')
    scheme, name, port = split
    ctx = request.app[CONTEXT]
    pod = await ctx.storage(ctx.resource("", "pods")).get(namespace, name)
    ip = _loopback((pod.get("status") or {}).get("podIP"))
    if ip is None:
        raise BadRequest("address not allowed")
    scheme = scheme or "http"
    return Target(scheme=scheme, ip=ip, port=_pod_port(pod, port, scheme=scheme))


# -- services ------------------------------------------------------------------------------


def _service_port_name(service: Obj, port: str) -> str:
    """The Service port ``port`` names: a number is looked up among the Service's ports."""
    number = _number(port)
    if number is None:
        return port
    for declared in (service.get("spec") or {}).get("ports") or []:
        if declared.get("port") == number:
            return str(declared.get("name") or "")
    name = service["metadata"]["name"]
    raise ServiceUnavailable(f'no service port {number} found for service "{name}"')


def _pod_ips(pod: Obj) -> set[str]:
    status = pod.get("status") or {}
    ips = {str(p.get("ip")) for p in status.get("podIPs") or [] if isinstance(p, dict)}
    return ips | ({status["podIP"]} if status.get("podIP") else set())


async def _valid_address(request: web.Request, namespace: str, endpoint: Obj, ip: str) -> bool:
    """Kubernetes' ``isValidAddress``: the endpoint names a pod of this namespace that has
    this IP."""
    ref = endpoint.get("targetRef") or {}
    if ref.get("kind") != "Pod" or ref.get("namespace", namespace) != namespace:
        return False
    ctx = request.app[CONTEXT]
    pod = await ctx.storage(ctx.resource("", "pods")).get_or_none(namespace, str(ref.get("name")))
    return pod is not None and ip in _pod_ips(pod)


def _ready(endpoint: Obj) -> bool:
    return (endpoint.get("conditions") or {}).get("ready") is not False


async def service_target(request: web.Request, namespace: str, id_: str) -> Target:
    split = split_scheme_name_port(id_)
    if split is None:
        raise BadRequest(f'invalid service request "{id_}"')
    scheme, name, port = split
    ctx = request.app[CONTEXT]
    service = await ctx.storage(ctx.resource("", "services")).get(namespace, name)
    port_name = _service_port_name(service, port)
    page = await ctx.storage(ctx.resource("discovery.k8s.io", "endpointslices")).list(namespace)
    slices = [
        s for s in page.items if (s["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL) == name
    ]
    if not any(s.get("endpoints") for s in slices):
        raise ServiceUnavailable(f'no endpoints available for service "{name}"')
    random.shuffle(slices)  # as Kubernetes starts from a random subset
    for slice_ in slices:
        numbers = [
            p.get("port") for p in slice_.get("ports") or [] if (p.get("name") or "") == port_name
        ]
        if not numbers or not isinstance(numbers[0], int):
            continue
        endpoints = [e for e in slice_.get("endpoints") or [] if _ready(e)]
        random.shuffle(endpoints)  # a random address, the next one if it is not valid
        for endpoint in endpoints:
            for address in endpoint.get("addresses") or []:
                ip = _loopback(address)
                if ip is not None and await _valid_address(request, namespace, endpoint, address):
                    return Target(scheme=scheme or "http", ip=ip, port=numbers[0])
                log.info("service proxy %s/%s: skipping address %r", namespace, name, address)
    raise ServiceUnavailable(f'no endpoints available for service "{id_}"')


# -- the relay -----------------------------------------------------------------------------


def _request_headers(request: web.Request) -> CIMultiDict[str]:
    headers: CIMultiDict[str] = CIMultiDict()
    for key, value in request.headers.items():
        lower = key.lower()
        if lower in HOP_BY_HOP or lower in CONSUMED or lower.startswith("impersonate-"):
            continue
        headers.add(key, value)
    peer = request.remote
    if peer:
        forwarded = request.headers.get("X-Forwarded-For")
        headers["X-Forwarded-For"] = f"{forwarded}, {peer}" if forwarded else peer
    return headers


def _subpath(request: web.Request) -> str:
    """What follows ``/proxy`` in the path as sent (percent-encoding kept): ``""`` or ``/...``."""
    # '', 'api', 'v1', 'namespaces', ns, kind, name, 'proxy[/...]'
    last = request.rel_url.raw_path.split("/", 7)[7]
    return last[len("proxy") :]


async def _proxy(request: web.Request) -> web.StreamResponse:
    if request.method not in PROXY_METHODS:
        raise MethodNotAllowed("the server does not allow this method on the requested resource")
    namespace, kind = request.match_info["namespace"], request.match_info["kind"]
    subpath = _subpath(request)
    if not subpath and request.method in ("GET", "HEAD"):
        query = f"?{request.rel_url.raw_query_string}" if request.rel_url.raw_query_string else ""
        raise web.HTTPMovedPermanently(location=f"{request.rel_url.raw_path}/{query}")
    locate = service_target if kind == "services" else pod_target
    target = await locate(request, namespace, request.match_info["name"])
    url = target.url(subpath, request.rel_url.raw_query_string)
    body = await request.read()
    try:
        upstream = await request.app[_SESSION].request(
            request.method,
            url,
            headers=_request_headers(request),
            data=body if body else None,
            allow_redirects=False,
            auto_decompress=False,
        )
    except (aiohttp.ClientError, OSError) as exc:
        raise ServiceUnavailable(f"error trying to reach service: {exc}") from None
    async with upstream:
        response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        for key, value in upstream.headers.items():
            if key.lower() not in HOP_BY_HOP:
                response.headers.add(key, value)
        if upstream.headers.get("Content-Length") is not None:
            response.content_length = int(upstream.headers["Content-Length"])
        await response.prepare(request)
        try:
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
        except (ConnectionError, aiohttp.ClientPayloadError):
            pass  # either side went away mid-answer: nobody is left to tell
        return response


async def _session_lifetime(app: web.Application) -> AsyncIterator[None]:
    app[_SESSION] = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, ssl=False),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        cookie_jar=aiohttp.DummyCookieJar(),
    )
    yield
    await app[_SESSION].close()


def setup_service_proxy(app: web.Application) -> None:
    """Serve ``services/{name}/proxy[/...]`` and ``pods/{name}/proxy[/...]``; before
    ``setup_rest(app)``, whose catch-all route would take them otherwise."""
    app.cleanup_ctx.append(_session_lifetime)
    prefix = "/api/v1/namespaces/{namespace}/{kind:services|pods}/{name}/proxy"
    app.router.add_route("*", prefix, _proxy)
    app.router.add_route("*", prefix + "/{path:.*}", _proxy)
