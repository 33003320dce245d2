"""``pods/{name}/log`` and ``pods/{name}/exec``: the apiserver forwards them to the pod's kubelet.

Why: as in Kubernetes, logs and exec are served by the kubelet of the pod's node; the apiserver
only finds that kubelet — the node's ``InternalIP`` and ``status.daemonEndpoints.kubeletEndpoint
.Port`` — checks the request against the pod (container name, phase) and relays bytes. The
kubelet URL is assembled from a parsed address (a bare IP or DNS name, ``api.addresses``) and an
integer port, never by pasting stored strings, so a Node's fields cannot point the apiserver at
any other URL; a Node with no such address is a 503 ``no preferred addresses found``.

* ``GET .../log?container=&follow=&tailLines=&sinceSeconds=&sinceTime=&timestamps=&previous=
  &limitBytes=`` → ``GET /containerLogs/{ns}/{pod}/{container}`` on the kubelet, the body streamed
  back chunk by chunk as it arrives (``kubectl logs -f`` stays open until the kubelet ends it).
  A pod with several containers and no ``container`` is a 400 naming them, as Kubernetes says;
  a pod not yet on a node has no logs (empty 200).
* ``GET .../exec?command=..&container=&stdin=&stdout=&stderr=&tty=`` with a WebSocket upgrade →
  a WebSocket to the kubelet's ``/exec/...`` offering the client's subprotocols; the one the
  kubelet picks (``v5.channel.k8s.io`` for kubectl >= 1.30) is the one answered to the client, and
  frames — binary and text alike, as each is — are relayed both ways until either side closes. Non-WebSocket upgrades (SPDY, from
  kubectl <= 1.29 or with websockets disabled) get a 400 ``Status``.

Wiring: ``setup_proxy(app)`` registers the routes (before ``setup_rest``, whose catch-all route
would take them otherwise) and owns one client session through ``cleanup_ctx``.

Limits: plain HTTP to the kubelet (no TLS, no kubelet auth); no ``attach``, ``portforward`` or
``nodes/proxy``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import aiohttp
from aiohttp import web
from yarl import URL

from api.addresses import dialable_address
from api.errors import BadRequest, InternalError, NotFound, ServiceUnavailable
from services.apiserver.context import CONTEXT

__all__ = ["setup_proxy"]

Obj = dict[str, Any]

LOG_PARAMS = (
    "follow",
    "tailLines",
    "sinceSeconds",
    "sinceTime",
    "timestamps",
    "previous",
    "limitBytes",
)
EXEC_FLAGS = ("stdin", "stdout", "stderr", "tty")

_SESSION: web.AppKey[aiohttp.ClientSession] = web.AppKey(
    "kubelet_proxy_session", aiohttp.ClientSession
)


async def _session_lifetime(app: web.Application) -> AsyncIterator[None]:
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
    )
    app[_SESSION] = session
    yield
    await session.close()


async def _get(request: web.Request, plural: str, namespace: str | None, name: str) -> Obj:
    ctx = request.app[CONTEXT]
    return await ctx.storage(ctx.resource("", plural)).get(namespace, name)


def _container(pod: Obj, requested: str | None) -> str:
    name = pod["metadata"]["name"]
    spec = pod.get("spec") or {}
    containers: list[str] = [c["name"] for c in spec.get("containers") or []]
    inits: list[str] = [c["name"] for c in spec.get("initContainers") or []]
    if not requested:
        if len(containers) == 1:
            return containers[0]
        message = (
            f"a container name must be specified for pod {name}, "
            f"choose one of: [{' '.join(containers)}]"
        )
        if inits:
            message += f" or one of the init containers: [{' '.join(inits)}]"
        raise BadRequest(message)
    if requested not in containers and requested not in inits:
        raise BadRequest(f"container {requested} is not valid for pod {name}")
    return requested


async def _kubelet_base(request: web.Request, pod: Obj) -> URL | None:
    """``http://<address>:<port>`` of the pod's kubelet, built from parsed parts; None when
    the pod is not on a node yet."""
    node_name = (pod.get("spec") or {}).get("nodeName")
    if not node_name:
        return None
    try:
        node = await _get(request, "nodes", None, node_name)
    except NotFound:
        raise InternalError(f'nodes "{node_name}" not found') from None
    return kubelet_url(node)


def kubelet_url(node: Obj) -> URL:
    """Where ``node``'s kubelet listens, or ``ServiceUnavailable``.

    Only a bare IP or DNS name (``api.addresses``) and an integer port in 1..65535 ever reach
    the URL, and yarl assembles it (brackets for IPv6), so no stored value can add a path, a
    query or another host — including Nodes written before validation refused such values.
    """
    name = (node.get("metadata") or {}).get("name", "")
    status = node.get("status") or {}
    endpoint = (status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}
    port = endpoint.get("Port")
    listed = [a for a in status.get("addresses") or [] if isinstance(a, dict)]
    host = dialable_address(listed)
    if host is None:
        known = " ".join(f"{{{a.get('type')} {a.get('address')}}}" for a in listed)
        raise ServiceUnavailable(
            f'node "{name}" has no address the apiserver may dial: '
            f"no preferred addresses found; known addresses: [{known}]"
        )
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        raise ServiceUnavailable(
            f'node "{name}" does not advertise a kubelet endpoint '
            f"(status.daemonEndpoints.kubeletEndpoint.Port: {port!r})"
        )
    return URL.build(scheme="http", host=host, port=port)


def _kubelet_path(kind: str, namespace: str, pod: str, container: str) -> str:
    """The kubelet's path, each segment percent-encoded (a ``/`` cannot add a segment)."""
    return "/".join(("", kind, *(quote(part, safe="") for part in (namespace, pod, container))))


async def _pod_log(request: web.Request) -> web.StreamResponse:
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    pod = await _get(request, "pods", namespace, name)
    container = _container(pod, request.query.get("container"))
    base = await _kubelet_base(request, pod)
    if base is None:
        return web.Response(body=b"", content_type="text/plain")
    params = [(k, v) for k, v in request.query.items() if k in LOG_PARAMS]
    url = base.with_path(_kubelet_path("containerLogs", namespace, name, container), encoded=True)
    session = request.app[_SESSION]
    try:
        upstream = await session.get(url, params=params)
    except aiohttp.ClientError as exc:
        raise InternalError(f'Get "{url}": {exc}') from None
    async with upstream:
        if upstream.status >= 400:
            return web.Response(
                body=await upstream.read(),
                status=upstream.status,
                content_type=upstream.content_type,
            )
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
        except (ConnectionError, aiohttp.ClientPayloadError):
            # the client or the kubelet went away (a departed follower is noticed only at the
            # next write or at the end): nothing left to tell anyone
            pass
        return response


async def _pod_exec(request: web.Request) -> web.StreamResponse:
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    pod = await _get(request, "pods", namespace, name)
    container = _container(pod, request.query.get("container"))
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        raise BadRequest(
            f"cannot exec into a container in a completed pod; current phase is {phase}"
        )
    if not request.query.getall("command", []):
        raise BadRequest("you must specify at least 1 command")
    if request.headers.get("Upgrade", "").lower() != "websocket":
        raise BadRequest(
            "Upgrade request required: kubelite serves exec over WebSocket "
            "(kubectl 1.30 or newer) only"
        )
    base = await _kubelet_base(request, pod)
    if base is None:
        raise BadRequest(f"pod {name} does not have a host assigned")
    offered = [
        p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()
    ]
    params: list[tuple[str, str]] = [("command", c) for c in request.query.getall("command")]
    params += [(k, request.query[k]) for k in EXEC_FLAGS if k in request.query]
    url = base.with_path(_kubelet_path("exec", namespace, name, container), encoded=True)
    try:
        upstream = await request.app[_SESSION].ws_connect(
            url, params=params, protocols=offered, autoping=True, max_msg_size=0
        )
    except aiohttp.WSServerHandshakeError as exc:
        raise BadRequest(f"unable to upgrade connection: {exc.message}") from None
    except aiohttp.ClientError as exc:
        raise InternalError(f"error dialing backend: {exc}") from None
    client_ws = web.WebSocketResponse(
        protocols=[upstream.protocol] if upstream.protocol else (), autoping=True, max_msg_size=0
    )
    try:
        await client_ws.prepare(request)
        to_kubelet = asyncio.create_task(
            _relay(client_ws, upstream), name=f"exec relay {namespace}/{name} ->kubelet"
        )
        to_client = asyncio.create_task(
            _relay(upstream, client_ws), name=f"exec relay {namespace}/{name} ->client"
        )
        await asyncio.wait({to_kubelet, to_client}, return_when=asyncio.FIRST_COMPLETED)
        for task in (to_kubelet, to_client):
            task.cancel()
        await asyncio.gather(to_kubelet, to_client, return_exceptions=True)
    finally:
        await upstream.close()
        if not client_ws.closed:
            await client_ws.close()
    return client_ws


async def _relay(
    source: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
    sink: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
) -> None:
    async for msg in source:
        with contextlib.suppress(ConnectionResetError):
            if msg.type == aiohttp.WSMsgType.BINARY:
                await sink.send_bytes(msg.data)
            elif msg.type == aiohttp.WSMsgType.TEXT:
                await sink.send_str(msg.data)
            else:
                break


def setup_proxy(app: web.Application) -> None:
    """Serve ``pods/{name}/log`` and ``pods/{name}/exec``; call before ``setup_rest(app)``."""
    app.cleanup_ctx.append(_session_lifetime)
    prefix = "/api/v1/namespaces/{namespace}/pods/{name}"
    app.router.add_get(prefix + "/log", _pod_log)
    app.router.add_route("*", prefix + "/exec", _pod_exec)
