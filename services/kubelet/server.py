"""The kubelet's own HTTP server: container logs, exec and port-forward, for the apiserver.

Why: ``kubectl logs`` and ``kubectl exec`` go to the apiserver, which forwards them to the
kubelet of the pod's node (``status.daemonEndpoints.kubeletEndpoint.Port`` on its InternalIP), as
in Kubernetes. The kubelet answers from its own knowledge — the pod workers' container instances
— so these work even when the apiserver's copy of the status lags.

Routes (the kubelet's own paths, which the apiserver's proxy rewrites to):

* ``GET /containerLogs/{namespace}/{pod}/{container}`` with ``follow``, ``tailLines``,
  ``sinceSeconds``, ``sinceTime``, ``timestamps``, ``previous``, ``limitBytes``: ``text/plain``,
  chunked, held open while following; errors are ``Status`` JSON worded as the kubelet words them
  (``container "main" in pod "demo" is waiting to start: ContainerCreating``).
* ``GET /exec/{namespace}/{pod}/{container}?command=..&command=..&stdin=&stdout=&stderr=&tty=``
  (also the kubelet's ``input``/``output``/``error`` spellings): a WebSocket speaking
  ``v5.channel.k8s.io``, v4, ``channel.k8s.io`` or their base64 variants (``channels.py``):
  frames whose first byte is the stream — 0 stdin, 1 stdout, 2 stderr, 3 error (v4/v5: a
  ``Status``: Success, or Failure/NonZeroExitCode with the exit code as a cause), 4 resize
  (``{"Width":..,"Height":..}``), 255 close-a-stream (v5) — then a normal close. Client frames
  are read whether BINARY or TEXT.
* ``GET /portForward/{namespace}/{pod}[?port=80&port=..]``: a WebSocket speaking
  ``SPDY/3.1+portforward.k8s.io`` (kubectl's SPDY streams, tunnelled; no ``port`` needed) or the
  ``v4.channel.k8s.io`` channels of the official clients (``port`` required) — the protocols
  are ``port_forward.py``'s; the pod's ports are dialled on its pod IP.
* ``GET /healthz``; ``GET /pods`` (the pods this kubelet runs, as a PodList); ``GET /metrics``
  (``metrics.KubeletMetrics``, Prometheus' text format).
* ``GET /stats/summary[?node=NAME]``: the node's and its pods' CPU and memory in Kubernetes'
  Summary shape (``stats.py``); ``node`` is kubelite's own parameter, for a ``sim`` process
  hosting several nodes (default: ``--node-name``; 404 for a node it does not host);
  ``GET /metrics/resource[?node=NAME]``: the same figures as Prometheus text.

Who may call it is ``auth.py``'s business: with ``--tls-cert-file`` the server speaks TLS and
every route (``/healthz`` and ``/pods`` included, as on a kubelet's 10250) is authenticated and
authorized against the apiserver; without it, plain HTTP and no checks (it binds loopback by
default). The separate health port (``--healthz-port``) stays unauthenticated.

Limits: no attach; WebSocket only — a plain ``Upgrade: SPDY/3.1`` is turned into the tunnelled
form by the apiserver, never served here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol

from aiohttp import web
from aiohttp.typedefs import Middleware

from api.errors import BadRequest, NotFound, StatusError
from component.health import metrics_handler
from services.kubelet.channels import (
    CLOSE,
    EXEC_PROTOCOLS,
    RESIZE,
    STDIN,
    ChannelProtocol,
    exec_status,
)
from services.kubelet.logs import LogOptions, read_log
from services.kubelet.port_forward import (
    PORT_FORWARD_PROTOCOLS,
    SPDY_TUNNEL_PROTOCOL,
    PodTarget,
    forward_channels,
    forward_spdy,
)
from services.kubelet.runtime.base import ContainerRecord, ExecSession, Runtime
from services.kubelet.stats import RESOURCE_METRICS_CONTENT_TYPE, resource_metrics

__all__ = ["PodLookup", "ServedPod", "make_server_app"]

log = logging.getLogger("kubelet.server")


class ServedPod(Protocol):
    """What the server needs from a pod worker."""

    @property
    def pod(self) -> dict[str, Any]: ...

    def find_instance(self, container: str, *, previous: bool) -> ContainerRecord | None: ...

    def waiting_reason(self, container: str) -> str | None: ...


class PodLookup(Protocol):
    def find_pod(self, *, namespace: str, name: str) -> tuple[ServedPod, Runtime] | None: ...

    def served_pods(self) -> Iterable[dict[str, Any]]: ...

    async def node_summary(self, node: str | None) -> dict[str, Any] | None:
        """The Summary of ``node`` (None: this kubelet's own), or None if not hosted here."""
        ...


SERVER_LOOKUP: web.AppKey[PodLookup] = web.AppKey("kubelet_pod_lookup", PodLookup)


def _status_response(error: StatusError) -> web.Response:
    return web.json_response(error.to_status(), status=error.code)


def _truthy(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true", "yes")


def _int(request: web.Request, name: str) -> int | None:
    raw = request.query.get(name)
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except ValueError:
        raise BadRequest(f"invalid {name}: {raw!r}") from None


def _container_names(pod: dict[str, Any]) -> list[str]:
    spec = pod.get("spec") or {}
    return [c["name"] for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])]


def _resolve(
    request: web.Request, *, previous: bool
) -> tuple[ServedPod, Runtime, str, ContainerRecord]:
    namespace = request.match_info["namespace"]
    name = request.match_info["pod"]
    container = request.match_info["container"]
    found = request.app[SERVER_LOOKUP].find_pod(namespace=namespace, name=name)
    if found is None:
        raise NotFound.of("pods", name)
    served, runtime = found
    if container not in _container_names(served.pod):
        raise BadRequest(f"container {container} is not valid for pod {name}")
    record = served.find_instance(container, previous=previous)
    if record is None:
        if previous:
            raise BadRequest(
                f'previous terminated container "{container}" in pod "{name}" not found'
            )
        reason = served.waiting_reason(container) or "ContainerCreating"
        raise BadRequest(f'container "{container}" in pod "{name}" is waiting to start: {reason}')
    return served, runtime, container, record


async def _container_logs(request: web.Request) -> web.StreamResponse:
    try:
        previous = _truthy(request.query.get("previous"))
        _, runtime, _, record = _resolve(request, previous=previous)
        since_time = None
        if request.query.get("sinceTime"):
            try:
                since_time = datetime.fromisoformat(
                    request.query["sinceTime"].replace("Z", "+00:00")
                )
            except ValueError:
                raise BadRequest(f"invalid sinceTime: {request.query['sinceTime']!r}") from None
        options = LogOptions(
            follow=_truthy(request.query.get("follow")),
            tail_lines=_int(request, "tailLines"),
            since_seconds=_int(request, "sinceSeconds"),
            since_time=since_time,
            timestamps=_truthy(request.query.get("timestamps")),
            limit_bytes=_int(request, "limitBytes"),
        )
    except StatusError as exc:
        return _status_response(exc)
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    exited = runtime.wait_container(record.container_id) if record.running else None
    stream = read_log(record.log_path, options, exited=exited)
    try:
        async for chunk in stream:
            await response.write(chunk)
        await response.write_eof()
    except ConnectionError:
        # The client went away (aiohttp's ClientConnectionResetError is a ConnectionError):
        # nobody is left to tell, and nothing is wrong with the kubelet. A follow whose client
        # left while the container was quiet only notices here, at its next write or its end.
        log.debug("log stream of %s ended: the client went away", request.path)
    finally:
        await stream.aclose()
        if exited is not None:
            exited.close()
    return response


async def _exec(request: web.Request) -> web.StreamResponse:
    q = request.query
    command = q.getall("command", [])
    tty = _truthy(q.get("tty"))
    want_stdin = _truthy(q.get("stdin") or q.get("input"))
    try:
        _, runtime, container, record = _resolve(request, previous=False)
        if not record.running:
            raise BadRequest(
                f'container "{container}" in pod "{request.match_info["pod"]}" is not running'
            )
        if not command:
            raise BadRequest("you must specify at least 1 command")
        upgrade = request.headers.get("Upgrade", "").lower()
        if upgrade != "websocket":
            raise BadRequest("Upgrade request required")
    except StatusError as exc:
        return _status_response(exc)
    ws = web.WebSocketResponse(protocols=EXEC_PROTOCOLS, autoping=True, max_msg_size=0)
    await ws.prepare(request)
    protocol = ChannelProtocol.of(ws.ws_protocol)
    try:
        session = await runtime.exec(record.container_id, command, tty=tty, stdin=want_stdin)
    except OSError as exc:
        message = (
            f"error executing command in container: failed to exec in container: "
            f'exec: "{command[0]}": {exc.strerror or exc}'
        )
        failure = {
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": "InternalError",
            "code": 500,
        }
        with contextlib.suppress(ConnectionError):
            await protocol.send_status(ws, failure)
        await ws.close()
        return ws
    log.info(
        "exec in %s/%s/%s: %s (tty=%s, protocol %s)",
        request.match_info["namespace"],
        request.match_info["pod"],
        container,
        command,
        tty,
        protocol.name or "channel.k8s.io",
    )
    reader = asyncio.create_task(
        _pump_input(ws, session, protocol), name=f"exec stdin {request.match_info['pod']}"
    )
    try:
        while True:
            stream, data = await session.read_output()
            if stream == 0:
                break
            await protocol.send(ws, stream, data)
        code = await session.wait()
        await protocol.send_status(ws, exec_status(code, command))
    except (ConnectionResetError, ConnectionError):
        await session.kill()
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
        if not ws.closed:
            await ws.close()
        await session.kill()
    return ws


async def _pump_input(
    ws: web.WebSocketResponse, session: ExecSession, protocol: ChannelProtocol
) -> None:
    async for msg in ws:
        frame = protocol.decode(msg)
        if frame is None:
            continue
        stream, payload = frame
        if stream == STDIN:
            await session.write_stdin(payload)
        elif stream == RESIZE:
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                size = json.loads(payload)
                session.resize(width=int(size.get("Width", 0)), height=int(size.get("Height", 0)))
        elif stream == CLOSE and protocol.close_stream and payload[:1] == bytes([STDIN]):
            await session.close_stdin()
    # the client closed the socket: nobody is left to read the output
    await session.kill()


def _forward_target(request: web.Request) -> PodTarget:
    namespace, name = request.match_info["namespace"], request.match_info["pod"]
    found = request.app[SERVER_LOOKUP].find_pod(namespace=namespace, name=name)
    if found is None:
        raise NotFound(f'pod not found ("{name}_{namespace}")')
    served, runtime = found
    uid = str(served.pod["metadata"].get("uid") or "")
    ip = runtime.pod_ip(uid)
    if not ip:
        raise BadRequest(f"pod {name} has no IP address yet")
    return PodTarget(name=f"{namespace}/{name}", uid=uid, ip=ip)


def _forward_ports(request: web.Request) -> list[int]:
    """The ``port`` query parameters (each may list several, comma-separated)."""
    raw = request.query.getall("port", [])
    if not raw:
        raise BadRequest('query parameter "port" is required')
    ports = []
    for value in raw:
        for part in value.split(","):
            if not part.isdigit() or not 0 < int(part) < 65536:
                raise BadRequest(f'unable to parse "{value}" as a port')
            ports.append(int(part))
    return ports


async def _port_forward(request: web.Request) -> web.StreamResponse:
    offered = {
        p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()
    }
    tunnel = SPDY_TUNNEL_PROTOCOL in offered
    try:
        target = _forward_target(request)
        if request.headers.get("Upgrade", "").lower() != "websocket":
            raise BadRequest("Upgrade request required")
        ports = [] if tunnel else _forward_ports(request)
    except StatusError as exc:
        return _status_response(exc)
    ws = web.WebSocketResponse(protocols=PORT_FORWARD_PROTOCOLS, autoping=True, max_msg_size=0)
    await ws.prepare(request)
    log.info(
        "port-forward to %s (%s) over %s",
        target.name,
        target.ip,
        ws.ws_protocol or "channel.k8s.io",
    )
    if ws.ws_protocol == SPDY_TUNNEL_PROTOCOL:
        await forward_spdy(ws, target)
    else:
        await forward_channels(ws, target, ports)
    return ws


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def _pods(request: web.Request) -> web.Response:
    items = list(request.app[SERVER_LOOKUP].served_pods())
    return web.json_response(
        {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}
    )


async def _stats_summary(request: web.Request) -> web.Response:
    node = request.query.get("node") or None
    summary = await request.app[SERVER_LOOKUP].node_summary(node)
    if summary is None:
        return _status_response(NotFound.of("nodes", node or ""))
    return web.json_response(summary)


async def _resource_metrics(request: web.Request) -> web.Response:
    node = request.query.get("node") or None
    summary = await request.app[SERVER_LOOKUP].node_summary(node)
    if summary is None:
        return _status_response(NotFound.of("nodes", node or ""))
    return web.Response(
        body=resource_metrics(summary).encode(),
        headers={"Content-Type": RESOURCE_METRICS_CONTENT_TYPE},
    )


def make_server_app(
    lookup: PodLookup,
    *,
    middlewares: Sequence[Middleware] = (),
    metrics: Callable[[], str] | None = None,
) -> web.Application:
    """The server's routes over ``lookup``; ``middlewares`` guard every one (``auth``);
    ``metrics`` renders ``/metrics`` (not served without it)."""
    app = web.Application(middlewares=middlewares)
    app[SERVER_LOOKUP] = lookup
    app.router.add_get("/healthz", _healthz)
    if metrics is not None:
        app.router.add_get("/metrics", metrics_handler(metrics))
    app.router.add_get("/pods", _pods)
    app.router.add_get("/stats/summary", _stats_summary)
    app.router.add_get("/metrics/resource", _resource_metrics)
    app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", _container_logs)
    app.router.add_route("*", "/exec/{namespace}/{pod}/{container}", _exec)
    app.router.add_get("/portForward/{namespace}/{pod}", _port_forward)
    return app
