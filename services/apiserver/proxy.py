"""``pods/{name}/log``, ``exec`` and ``portforward``: the apiserver forwards them to the kubelet.

Why: as in Kubernetes, logs, exec and port-forward are served by the kubelet of the pod's node; the apiserver
only finds that kubelet — the first of the node's ``status.addresses`` whose type comes first
in ``--kubelet-preferred-address-types`` (Kubernetes' ``GetPreferredNodeAddress``; kubelite's
default starts with ``InternalIP``, Kubernetes' with ``Hostname``) and ``status.daemonEndpoints
.kubeletEndpoint.Port`` — checks the request against the pod (container name, phase) and relays
bytes. The kubelet URL is assembled from a parsed address (a bare IP or DNS name,
``api.addresses``; an invalid one is skipped) and an integer port, never by pasting stored
strings, so a Node's fields cannot point the apiserver at any other URL; a Node with no such
address is a 503 ``no preferred addresses found``.

* ``GET .../log?container=&follow=&tailLines=&sinceSeconds=&sinceTime=&timestamps=&previous=
  &limitBytes=`` → ``GET /containerLogs/{ns}/{pod}/{container}`` on the kubelet, the body streamed
  back chunk by chunk as it arrives (``kubectl logs -f`` stays open until the kubelet ends it).
  A pod with several containers and no ``container`` is a 400 naming them, as Kubernetes says;
  a pod not yet on a node has no logs (empty 200).
* ``GET .../exec?command=..&container=&stdin=&stdout=&stderr=&tty=`` with a WebSocket upgrade →
  a WebSocket to the kubelet's ``/exec/...`` offering the client's subprotocols; the one the
  kubelet picks (``v5.channel.k8s.io`` for kubectl >= 1.30) is the one answered to the client, and
  frames — binary and text alike, as each is — are relayed both ways until either side closes.
  Non-WebSocket upgrades (SPDY, from kubectl <= 1.29 or with websockets disabled) get a 400
  ``Status``.
* ``.../portforward`` → the kubelet's ``/portForward/{ns}/{pod}`` (the pod must be on a node):
  a WebSocket (kubectl >= 1.31's ``SPDY/3.1+portforward.k8s.io`` tunnel, or the official
  clients' ``v4.channel.k8s.io`` with ``?ports=80,..`` passed on as the kubelet's ``port``
  parameters) is relayed frame by frame as exec is; a plain ``Upgrade: SPDY/3.1`` (kubectl
  1.30 and older, ``X-Stream-Protocol-Version: portforward.k8s.io``) is answered 101 here and
  its bytes carried to the kubelet in that same tunnel (``raw_upgrade.py`` takes the socket
  over) — the reverse of Kubernetes, whose apiserver turns the WebSocket tunnel into SPDY for
  the kubelet; here the kubelet needs only WebSocket.

Admission: exec and port-forward pass ``admission.admit_connect`` (webhooks and policies for
the ``CONNECT`` operation, their options as the object) before the kubelet is dialled, and
connect with the options as admission left them.

Wiring: ``setup_proxy(app)`` registers the routes (before ``setup_rest``, whose catch-all route
would take them otherwise) and owns one client session through ``cleanup_ctx``; it also
registers ``service_proxy``'s routes (``services/{name}/proxy``, ``pods/{name}/proxy``).

**TLS to kubelets** (``kubelet_ssl_context``): with ``--kubelet-client-certificate``/``-key``
or ``--kubelet-certificate-authority`` the apiserver dials kubelets over https, shows them its
own client certificate (``kube-apiserver-kubelet-client`` in ``system:masters`` under ``kubelite
up``, which the kubelet authenticates and asks the apiserver to authorize) and checks each
kubelet's serving certificate against the CA for the very address it dials — a kubelet whose
certificate another CA signed, or that does not name that address, is never sent a byte of the
request (500 ``error dialing backend: ...``). A kubelet whose IP is only known once it starts (a
container's) is dialled by its ``Hostname`` — the node name its certificate names — when that
type is preferred. Without the CA the certificate is not checked (as
Kubernetes; logged at start). Without any of the three: plain HTTP, as kubelets serve it when
they are given no certificate.

Limits: no ``attach`` or ``nodes/proxy``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import AsyncIterator, Sequence
from typing import Any
from urllib.parse import quote

import aiohttp
from aiohttp import web
from yarl import URL

from api.addresses import PREFERRED_ADDRESS_TYPES, dialable_address
from api.errors import BadRequest, Forbidden, InternalError, NotFound, ServiceUnavailable
from services.apiserver.admission import admit_connect
from services.apiserver.context import CONTEXT, ServerOptions
from services.apiserver.identity import request_user
from services.apiserver.query import parse_bool
from services.apiserver.raw_upgrade import RawUpgrade
from services.apiserver.service_proxy import setup_service_proxy
from services.apiserver.webhooks import Attributes

__all__ = ["KUBELET_SESSION", "kubelet_ssl_context", "kubelet_url", "setup_proxy"]

log = logging.getLogger(__name__)

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
SPDY = "SPDY/3.1"
PORT_FORWARD_PROTOCOL = "portforward.k8s.io"
SPDY_TUNNEL_PROTOCOL = f"{SPDY}+{PORT_FORWARD_PROTOCOL}"
"""kubectl 1.31+'s WebSocket subprotocol for SPDY carried in binary messages; also what the
kubelet is asked for when a client upgrades to plain SPDY."""

KUBELET_SESSION: web.AppKey[aiohttp.ClientSession] = web.AppKey(
    "kubelet_proxy_session", aiohttp.ClientSession
)
"""The apiserver's one client session to the kubelets (``kubelet_ssl_context``), set up by
``setup_proxy``; ``resource_metrics`` scrapes the kubelets through it too."""


def kubelet_ssl_context(options: ServerOptions) -> ssl.SSLContext | None:
    """How the apiserver speaks TLS to kubelets: its ``--kubelet-client-certificate``, and the
    kubelets' serving certificates checked against ``--kubelet-certificate-authority`` for the
    address dialled (not checked without it, as Kubernetes); None: plain HTTP."""
    if not options.kubelet_https:
        return None
    context = ssl.create_default_context(cafile=options.kubelet_certificate_authority)
    if options.kubelet_certificate_authority is None:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        log.warning(
            "kubelets' serving certificates are not verified: no --kubelet-certificate-authority"
        )
    if options.kubelet_client_certificate is not None:
        context.load_cert_chain(options.kubelet_client_certificate, options.kubelet_client_key)
    return context


async def _session_lifetime(app: web.Application) -> AsyncIterator[None]:
    context = kubelet_ssl_context(app[CONTEXT].options)
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, ssl=context if context is not None else True),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
    )
    app[KUBELET_SESSION] = session
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
    """``http[s]://<address>:<port>`` of the pod's kubelet, built from parsed parts; None when
    the pod is not on a node yet."""
    node_name = (pod.get("spec") or {}).get("nodeName")
    if not node_name:
        return None
    try:
        node = await _get(request, "nodes", None, node_name)
    except NotFound:
        raise InternalError(f'nodes "{node_name}" not found') from None
    options = request.app[CONTEXT].options
    return kubelet_url(
        node,
        scheme="https" if options.kubelet_https else "http",
        preferred=options.kubelet_preferred_address_types,
    )


def kubelet_url(
    node: Obj, *, scheme: str = "http", preferred: Sequence[str] = PREFERRED_ADDRESS_TYPES
) -> URL:
    """Where ``node``'s kubelet listens — its first valid address of the first ``preferred``
    type it has — or ``ServiceUnavailable``.

    Only a bare IP or DNS name (``api.addresses``) and an integer port in 1..65535 ever reach
    the URL, and yarl assembles it (brackets for IPv6), so no stored value can add a path, a
    query or another host — including Nodes written before validation refused such values.
    """
    name = (node.get("metadata") or {}).get("name", "")
    status = node.get("status") or {}
    endpoint = (status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}
    port = endpoint.get("Port")
    listed = [a for a in status.get("addresses") or [] if isinstance(a, dict)]
    host = next(
        (
            address
            for kind in preferred
            if (address := dialable_address([a for a in listed if a.get("type") == kind]))
        ),
        None,
    )
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
    return URL.build(scheme=scheme, host=host, port=port)


def _kubelet_path(kind: str, *segments: str) -> str:
    """The kubelet's path, each segment percent-encoded (a ``/`` cannot add a segment)."""
    return "/".join(("", kind, *(quote(part, safe="") for part in segments)))


async def _pod_log(request: web.Request) -> web.StreamResponse:
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    pod = await _get(request, "pods", namespace, name)
    container = _container(pod, request.query.get("container"))
    base = await _kubelet_base(request, pod)
    if base is None:
        return web.Response(body=b"", content_type="text/plain")
    params = [(k, v) for k, v in request.query.items() if k in LOG_PARAMS]
    url = base.with_path(_kubelet_path("containerLogs", namespace, name, container), encoded=True)
    session = request.app[KUBELET_SESSION]
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


async def _connect_admitted(request: web.Request, subresource: str, options: Obj) -> Obj:
    """``options`` as CONNECT admission leaves them (``admission.admit_connect``)."""
    ctx = request.app[CONTEXT]
    attrs = Attributes(
        rt=ctx.resource("", "pods"),
        operation="CONNECT",
        namespace=request.match_info["namespace"],
        name=request.match_info["name"],
        user=request_user(request),
        subresource=subresource,
    )
    return await admit_connect(request, attrs, options)


def _exec_options(request: web.Request) -> Obj:
    """The request's ``PodExecOptions`` (false flags and an empty container left out, as Go
    encodes them)."""
    options: Obj = {"kind": "PodExecOptions", "apiVersion": "v1"}
    for flag in EXEC_FLAGS:
        if parse_bool(request.query.get(flag), name=flag):
            options[flag] = True
    if request.query.get("container"):
        options["container"] = request.query["container"]
    options["command"] = request.query.getall("command", [])
    return options


async def _pod_exec(request: web.Request) -> web.StreamResponse:
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    pod = await _get(request, "pods", namespace, name)
    options = await _connect_admitted(request, "exec", _exec_options(request))
    container = _container(pod, options.get("container"))
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        raise BadRequest(
            f"cannot exec into a container in a completed pod; current phase is {phase}"
        )
    if not options.get("command"):
        raise BadRequest("you must specify at least 1 command")
    if request.headers.get("Upgrade", "").lower() != "websocket":
        raise BadRequest(
            "Upgrade request required: kubelite serves exec over WebSocket "
            "(kubectl 1.30 or newer) only"
        )
    base = await _kubelet_base(request, pod)
    if base is None:
        raise BadRequest(f"pod {name} does not have a host assigned")
    params: list[tuple[str, str]] = [("command", str(c)) for c in options["command"]]
    params += [(k, "true") for k in EXEC_FLAGS if options.get(k)]
    url = base.with_path(_kubelet_path("exec", namespace, name, container), encoded=True)
    return await _relay_websocket(request, url, params, label=f"exec {namespace}/{name}")


async def _relay_websocket(
    request: web.Request, url: URL, params: list[tuple[str, str]], *, label: str
) -> web.WebSocketResponse:
    """Open a WebSocket to the kubelet offering the client's subprotocols, answer the client
    with the one the kubelet picked, and relay frames both ways until either side closes."""
    offered = [
        p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()
    ]
    try:
        upstream = await request.app[KUBELET_SESSION].ws_connect(
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
            _relay(client_ws, upstream), name=f"{label} relay ->kubelet"
        )
        to_client = asyncio.create_task(_relay(upstream, client_ws), name=f"{label} relay ->client")
        await asyncio.wait({to_kubelet, to_client}, return_when=asyncio.FIRST_COMPLETED)
        for task in (to_kubelet, to_client):
            task.cancel()
        await asyncio.gather(to_kubelet, to_client, return_exceptions=True)
    finally:
        await upstream.close()
        if not client_ws.closed:
            await client_ws.close()
    return client_ws


async def _pod_portforward(request: web.Request) -> web.StreamResponse:
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    pod = await _get(request, "pods", namespace, name)
    asked = _forward_ports(request)
    options: Obj = {"kind": "PodPortForwardOptions", "apiVersion": "v1"}
    options.update({"ports": asked} if asked else {})
    ports = (await _connect_admitted(request, "portforward", options)).get("ports") or []
    base = await _kubelet_base(request, pod)
    if base is None:
        raise BadRequest(f"pod {name} does not have a host assigned")
    url = base.with_path(_kubelet_path("portForward", namespace, name), encoded=True)
    upgrade = request.headers.get("Upgrade", "").lower()
    if upgrade == "websocket":
        offered = request.headers.get("Sec-WebSocket-Protocol", "")
        tunnel = SPDY_TUNNEL_PROTOCOL in (p.strip() for p in offered.split(","))
        if not tunnel and not ports:
            raise BadRequest('query parameter "ports" is required')
        params = [] if tunnel else [("port", str(port)) for port in ports]
        return await _relay_websocket(
            request, url, params, label=f"port-forward {namespace}/{name}"
        )
    if upgrade == SPDY.lower():
        return await _tunnel_spdy(request, url, label=f"port-forward {namespace}/{name}")
    raise BadRequest("Upgrade request required")


def _forward_ports(request: web.Request) -> list[int]:
    """``ports`` (repeated or comma-separated), as ``PodPortForwardOptions`` reads them (none
    for a tunnel, whose ports travel inside it)."""
    ports: list[int] = []
    for value in request.query.getall("ports", []):
        for part in value.split(","):
            if not part.strip().isdigit() or not 0 < int(part) < 65536:
                raise BadRequest(f'unable to parse "{part}" as a port: must be 1-65535')
            ports.append(int(part))
    return ports


async def _tunnel_spdy(request: web.Request, url: URL, *, label: str) -> web.StreamResponse:
    """A plain ``Upgrade: SPDY/3.1``: answer 101 and carry the client's SPDY byte stream to
    the kubelet inside a WebSocket (``SPDY/3.1+portforward.k8s.io``) — the form kubectl 1.31+
    sends by itself — each read one binary message, each message back written as it comes."""
    offered = [
        v.strip()
        for header in request.headers.getall("X-Stream-Protocol-Version", [])
        for v in header.split(",")
    ]
    if offered and PORT_FORWARD_PROTOCOL not in offered:
        raise Forbidden(
            f"unable to upgrade: unable to negotiate protocol: client supports {offered}, "
            f"server supports [{PORT_FORWARD_PROTOCOL}]"
        )
    try:
        upstream = await request.app[KUBELET_SESSION].ws_connect(
            url, protocols=[SPDY_TUNNEL_PROTOCOL], autoping=True, max_msg_size=0
        )
    except aiohttp.WSServerHandshakeError as exc:
        raise BadRequest(f"unable to upgrade connection: {exc.message}") from None
    except aiohttp.ClientError as exc:
        raise InternalError(f"error dialing backend: {exc}") from None
    raw = RawUpgrade(request)
    try:
        if upstream.protocol != SPDY_TUNNEL_PROTOCOL:
            raise InternalError(f"the kubelet did not agree to {SPDY_TUNNEL_PROTOCOL}")
        await raw.accept(
            {
                "Connection": "Upgrade",
                "Upgrade": SPDY,
                "X-Stream-Protocol-Version": PORT_FORWARD_PROTOCOL,
            }
        )

        async def to_kubelet() -> None:
            while data := await raw.read():
                await upstream.send_bytes(data)

        async def to_client() -> None:
            async for msg in upstream:
                if msg.type != aiohttp.WSMsgType.BINARY:
                    break
                await raw.write(msg.data)

        tasks = {
            asyncio.create_task(to_kubelet(), name=f"{label} relay ->kubelet"),
            asyncio.create_task(to_client(), name=f"{label} relay ->client"),
        }
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        await upstream.close()
        raw.close()
    return raw.response


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
    """Serve ``pods/{name}/log``, ``exec`` and ``portforward``, and (``service_proxy``) the
    ``proxy`` subresource of services and pods; call before ``setup_rest(app)``."""
    app.cleanup_ctx.append(_session_lifetime)
    setup_service_proxy(app)
    prefix = "/api/v1/namespaces/{namespace}/pods/{name}"
    app.router.add_get(prefix + "/log", _pod_log)
    app.router.add_route("*", prefix + "/exec", _pod_exec)
    app.router.add_route("*", prefix + "/portforward", _pod_portforward)
