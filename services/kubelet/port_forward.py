"""Port-forward on the kubelet: client streams spliced to TCP connections into a pod.

Why it exists: ``kubectl port-forward`` and the official client's ``portforward`` reach a pod's
port through the apiserver, which hands the upgraded connection to the pod's kubelet; the
kubelet dials ``<podIP>:<port>`` (pods share the node's network, each on its own loopback
address) and relays bytes both ways, as Kubernetes' kubelet streaming server does. This module
owns the kubelet's two wire protocols, both over a WebSocket the apiserver opens:

* ``SPDY/3.1+portforward.k8s.io``: the SPDY connection kubectl speaks (``spdy.py``), its bytes
  carried in binary WebSocket messages. kubectl >= 1.31 tunnels it that way itself; for a plain
  ``Upgrade: SPDY/3.1`` (kubectl 1.30, older clients) the apiserver does the tunnelling. Every
  local connection kubectl accepts becomes two streams with headers ``port``, ``requestID``
  and ``streamType`` ``error`` or ``data``, paired by ``requestID`` (older clients without it:
  by stream id, as the kubelet guesses); a pair incomplete after ``STREAM_CREATION_TIMEOUT`` is
  answered on its error stream. Any number of pairs run at once on one connection.
* ``v4.channel.k8s.io`` (and ``v4.base64.channel.k8s.io``, or no subprotocol): the official
  clients' framing. The ports come as ``port`` query parameters; port *i* gets channel ``2i``
  for data and ``2i+1`` for errors, and the first frame on each is the port number, 16-bit
  little-endian. One TCP connection per port; the WebSocket closes when all of them are done.

A port nothing listens on is reported on the error stream with the kubelet's wording
(``error forwarding port 81 to pod <uid>, uid : failed to connect to ...: connection refused``);
the session itself goes on (kubectl chooses to end its session on such an error; the official
client marks that port failed).

Each pod connection ends when the pod closes its side (or the stream is reset); the client's
half-close (SPDY FIN) half-closes the pod connection, so a request can still be answered.

Not guaranteed: no idle timeout on sessions (Kubernetes' kubelet closes idle ones after 4 h);
UDP is not forwarded (Kubernetes does not either).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Protocol

import aiohttp
from aiohttp import web

from services.kubelet.channels import ChannelProtocol
from services.kubelet.spdy import RST_CANCEL, SpdySession, SpdyStream

__all__ = [
    "PORT_FORWARD_PROTOCOLS",
    "SPDY_TUNNEL_PROTOCOL",
    "PodTarget",
    "forward_channels",
    "forward_spdy",
]

log = logging.getLogger("kubelet.port_forward")

SPDY_TUNNEL_PROTOCOL = "SPDY/3.1+portforward.k8s.io"
PORT_FORWARD_PROTOCOLS = (SPDY_TUNNEL_PROTOCOL, "v4.channel.k8s.io", "v4.base64.channel.k8s.io")
"""The WebSocket subprotocols the kubelet answers to (no subprotocol at all: plain channels)."""

STREAM_CREATION_TIMEOUT = 30.0
"""Seconds a data/error pair may wait for its other half (the kubelet's default)."""
DIAL_TIMEOUT = 10.0
"""Seconds to connect to the pod; loopback refuses or accepts at once, so this is a backstop."""
READ_SIZE = 64 * 1024


class ForwardError(Exception):
    """Forwarding one connection failed; the message is what the client is told."""


@dataclass(frozen=True, slots=True)
class PodTarget:
    """Where a pod's ports are: its address, and the names the error messages use."""

    name: str
    uid: str
    ip: str

    async def dial(self, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            async with asyncio.timeout(DIAL_TIMEOUT):
                return await asyncio.open_connection(self.ip, port)
        except (OSError, TimeoutError) as exc:
            reason = (getattr(exc, "strerror", None) or "i/o timeout").lower()
            raise ForwardError(
                f"error forwarding port {port} to pod {self.uid}, uid : failed to connect to "
                f"{self.ip}:{port} inside the pod's network, IPv4: dial tcp4 {self.ip}:{port}: "
                f"connect: {reason}"
            ) from None


class ClientStream(Protocol):
    """The client's end of one forwarded connection, whatever the framing."""

    async def read(self) -> bytes:
        """The client's next bytes; ``b""`` at its end."""
        ...

    async def write(self, data: bytes) -> None: ...

    async def close(self) -> None:
        """No more bytes from the pod."""
        ...

    @property
    def aborted(self) -> bool:
        """The client dropped the connection (rather than finishing sending)."""
        ...


async def splice(
    client: ClientStream, pod: tuple[asyncio.StreamReader, asyncio.StreamWriter]
) -> None:
    """Relay both ways until the pod's side ends (or the client aborts); then close both."""
    reader, writer = pod
    upstream = asyncio.create_task(_client_to_pod(client, writer), name="port-forward client->pod")
    try:
        while not client.aborted:
            data = await reader.read(READ_SIZE)
            if not data:
                break
            await client.write(data)
    except ConnectionError:
        pass  # the pod reset its connection: the same end for the client
    finally:
        upstream.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await upstream
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
        await client.close()


async def _client_to_pod(client: ClientStream, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await client.read():
            writer.write(data)
            await writer.drain()
        if client.aborted:
            writer.close()  # the pod's reads end too, and with them the other direction
        elif writer.can_write_eof():
            writer.write_eof()
    except ConnectionError:
        writer.close()


# -- SPDY (kubectl) ----------------------------------------------------------------------------


class _SpdyClient:
    def __init__(self, stream: SpdyStream) -> None:
        self.stream = stream

    async def read(self) -> bytes:
        return await self.stream.read()

    async def write(self, data: bytes) -> None:
        await self.stream.write(data)

    async def close(self) -> None:
        self.stream.stop_reading()
        await self.stream.close()

    @property
    def aborted(self) -> bool:
        return self.stream.was_reset


@dataclass(eq=False)
class _StreamPair:
    request_id: str
    data: SpdyStream | None = None
    error: SpdyStream | None = None
    complete: asyncio.Event = field(default_factory=asyncio.Event)

    def add(self, stream: SpdyStream) -> None:
        kind = stream.header("streamtype")
        if getattr(self, kind) is not None:
            raise ValueError(f"{kind} stream already assigned")
        setattr(self, kind, stream)
        if kind == "error":
            stream.stop_reading()  # clients only read their error stream
        if self.data is not None and self.error is not None:
            self.complete.set()

    async def print_error(self, message: str) -> None:
        if self.error is not None:
            await self.error.write(message.encode())


def _refusal(stream: SpdyStream) -> str | None:
    """Why a new stream is refused (the kubelet's checks), or None."""
    port = stream.header("port")
    if not port:
        return '"port" header is required'
    if not port.isdigit() or not 0 < int(port) < 65536:
        return f'unable to parse "{port}" as a port'
    kind = stream.header("streamtype")
    if not kind:
        return '"streamType" header is required'
    if kind not in ("error", "data"):
        return f'invalid stream type "{kind}"'
    return None


class _SpdyForwarder:
    """One SPDY connection: pairs streams and runs a forward per complete pair."""

    def __init__(self, target: PodTarget, session: SpdySession) -> None:
        self.target = target
        self.session = session
        self.pairs: dict[str, _StreamPair] = {}
        self.tasks: set[asyncio.Task[None]] = set()

    def _spawn(self, work: Awaitable[None], name: str) -> None:
        task = asyncio.ensure_future(work)
        task.set_name(name)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def opened(self, stream: SpdyStream) -> None:
        refusal = _refusal(stream)
        if refusal is not None:
            log.info(
                "port-forward to %s: stream %d refused: %s",
                self.target.name,
                stream.stream_id,
                refusal,
            )
            await stream.reset(RST_CANCEL)
            return
        await stream.accept()
        request_id = stream.header("requestid") or self._guess_request_id(stream)
        pair = self.pairs.get(request_id)
        if pair is None:
            pair = self.pairs[request_id] = _StreamPair(request_id)
            self._spawn(self._expire(pair), f"port-forward pair {request_id} timeout")
        try:
            pair.add(stream)
        except ValueError as exc:
            await pair.print_error(f"error processing stream for request {request_id}: {exc}")
            return
        if pair.complete.is_set():
            self._spawn(self._forward(pair), f"port-forward request {request_id}")

    @staticmethod
    def _guess_request_id(stream: SpdyStream) -> str:
        # clients older than the requestID header open error then data, two ids apart
        if stream.header("streamtype") == "data":
            return str(stream.stream_id - 2)
        return str(stream.stream_id)

    async def _expire(self, pair: _StreamPair) -> None:
        try:
            async with asyncio.timeout(STREAM_CREATION_TIMEOUT):
                await pair.complete.wait()
        except TimeoutError:
            await pair.print_error(f"(request={pair.request_id}) timed out waiting for streams")
        finally:
            self.pairs.pop(pair.request_id, None)

    async def _forward(self, pair: _StreamPair) -> None:
        assert pair.data is not None and pair.error is not None
        port = int(pair.data.header("port"))
        try:
            pod = await self.target.dial(port)
        except ForwardError as exc:
            log.info("port-forward: %s", exc)
            await pair.error.write(str(exc).encode())
            await pair.data.close()
        else:
            await splice(_SpdyClient(pair.data), pod)
        finally:
            await pair.error.close()

    async def close(self) -> None:
        self.session.close()
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def forward_spdy(ws: web.WebSocketResponse, target: PodTarget) -> None:
    """Serve a SPDY port-forward connection tunnelled in ``ws`` until either side ends it."""
    session = SpdySession(ws.send_bytes)
    forwarder = _SpdyForwarder(target, session)
    try:
        async for msg in ws:
            if msg.type != aiohttp.WSMsgType.BINARY:
                log.info("port-forward to %s: a non-binary message ends the tunnel", target.name)
                break
            for stream in await session.receive(msg.data):
                await forwarder.opened(stream)
    except ConnectionError:
        pass  # the apiserver dropped the tunnel
    finally:
        await forwarder.close()


# -- WebSocket channels (the official clients) -------------------------------------------------


@dataclass(eq=False)
class _ChannelClient:
    ws: web.WebSocketResponse
    protocol: ChannelProtocol
    channel: int
    inbound: asyncio.Queue[bytes] = field(default_factory=lambda: asyncio.Queue(maxsize=64))
    ended: bool = False

    async def read(self) -> bytes:
        if self.ended and self.inbound.empty():
            return b""
        return await self.inbound.get()

    async def write(self, data: bytes) -> None:
        await self.protocol.send(self.ws, self.channel, data)

    async def close(self) -> None:
        """Read no more (the channel protocols cannot close one channel: the socket's close
        says it)."""
        self.end()
        while not self.inbound.empty():
            self.inbound.get_nowait()

    @property
    def aborted(self) -> bool:
        return self.ws.closed

    def end(self) -> None:
        if not self.ended:
            self.ended = True
            with contextlib.suppress(asyncio.QueueFull):
                self.inbound.put_nowait(b"")


async def forward_channels(ws: web.WebSocketResponse, target: PodTarget, ports: list[int]) -> None:
    """Serve ``ports`` over the channel protocol agreed on ``ws``; close it when all are done."""
    protocol = ChannelProtocol.of(ws.ws_protocol)
    clients = [_ChannelClient(ws, protocol, 2 * i) for i in range(len(ports))]
    for i, port in enumerate(ports):
        for channel in (2 * i, 2 * i + 1):
            await protocol.send(ws, channel, struct.pack("<H", port))

    async def one(i: int, port: int) -> None:
        try:
            pod = await target.dial(port)
        except ForwardError as exc:
            log.info("port-forward: %s", exc)
            with contextlib.suppress(ConnectionError):
                await protocol.send(ws, 2 * i + 1, str(exc).encode())
            return
        await splice(clients[i], pod)

    reader = asyncio.create_task(
        _route_frames(ws, protocol, clients), name=f"port-forward {target.name} frames"
    )
    try:
        await asyncio.gather(*(one(i, port) for i, port in enumerate(ports)))
    except ConnectionError:
        pass  # the apiserver dropped the socket mid-write
    finally:
        await ws.close()
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader


async def _route_frames(
    ws: web.WebSocketResponse, protocol: ChannelProtocol, clients: list[_ChannelClient]
) -> None:
    try:
        async for msg in ws:
            frame = protocol.decode(msg)
            if frame is None:
                continue
            channel, payload = frame
            if channel % 2 == 0 and channel // 2 < len(clients) and payload:
                client = clients[channel // 2]
                if not client.ended:
                    await client.inbound.put(payload)
    finally:
        for client in clients:
            client.end()
