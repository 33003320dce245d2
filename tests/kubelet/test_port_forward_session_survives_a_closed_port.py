"""Port-forward through the apiserver to the kubelet: the official client's ``portforward``
moves bytes both ways, and a port nothing listens on fails alone — the session goes on serving
the other ports (v4 channels) or the next stream pair (SPDY, over both the WebSocket tunnel and a
plain ``Upgrade: SPDY/3.1``)."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from kubernetes import client as k8s
from kubernetes.stream import portforward
from yarl import URL

from services.kubelet.spdy import Data, FrameDecoder, FrameEncoder, Ping, SynReply
from tests import factories
from tests.kubelet.conftest import Cluster
from tests.kubelet.pods import create_and_wait

pytestmark = [pytest.mark.e2e]

ECHO_PORT, CLOSED_PORT = factories.ECHO_PORT, 9001
REFUSED = f"{CLOSED_PORT}: connect: connection refused"


def ready(pod: dict[str, Any] | None) -> bool:
    statuses = ((pod or {}).get("status") or {}).get("containerStatuses") or []
    return bool(statuses) and all(s.get("ready") for s in statuses)


@pytest.fixture
async def echo(cluster: Cluster) -> Cluster:
    body = factories.pod(
        "echo",
        # ready only once the server listens: a forward before that would be refused
        factories.echo_server(
            readinessProbe={"tcpSocket": {"port": ECHO_PORT}, "periodSeconds": 1}
        ),
        namespace="default",
        nodeName=cluster.node,
    )
    await create_and_wait(cluster, body, ready)
    return cluster


def official_client_round_trip(server: str, payload: bytes) -> tuple[bytes, str | None, bytes]:
    """Through ``kubernetes.stream.portforward`` on ports 9000 and 9001: the echo of
    ``payload``, port 9001's error, then one more echo on 9000 after that error."""
    config = k8s.Configuration()
    config.host = server
    api = k8s.CoreV1Api(k8s.ApiClient(config))
    forward = portforward(
        api.connect_get_namespaced_pod_portforward,
        "echo",
        "default",
        ports=f"{ECHO_PORT},{CLOSED_PORT}",
    )
    try:
        conn = forward.socket(ECHO_PORT)
        conn.settimeout(60)
        sender = threading.Thread(target=conn.sendall, args=(payload,))
        sender.start()
        echoed = bytearray()
        while len(echoed) < len(payload) and (chunk := conn.recv(1 << 20)):
            echoed += chunk
        sender.join()
        closed = forward.socket(CLOSED_PORT)
        closed.settimeout(60)
        assert closed.recv(1) == b""  # closed once the error arrived
        conn.sendall(b"still here")
        after = conn.recv(100)
        return bytes(echoed), forward.error(CLOSED_PORT), after
    finally:
        forward.close()


async def test_official_client_moves_megabytes_and_a_closed_port_fails_alone(
    echo: Cluster,
) -> None:
    payload = os.urandom(3 * 1024 * 1024)
    echoed, error, after = await asyncio.to_thread(official_client_round_trip, echo.server, payload)
    assert echoed == payload
    assert error is not None and error.startswith(f"error forwarding port {CLOSED_PORT} to pod ")
    assert REFUSED in error
    assert after == b"still here"


Send = Callable[[bytes], Awaitable[None]]
Receive = Callable[[], Awaitable[bytes]]


class SpdyClient:
    """What kubectl does on a port-forward connection, frame by frame."""

    def __init__(self, send: Send, receive: Receive) -> None:
        self.send, self.receive = send, receive
        self.encoder, self.decoder = FrameEncoder(), FrameDecoder()
        self.next_id = 1
        self.pending: list[object] = []
        self.pongs: list[int] = []

    async def frame(self) -> object:
        while not self.pending:
            data = await self.receive()
            assert data, "the connection closed"
            self.pending += self.decoder.feed(data)
        return self.pending.pop(0)

    async def open_pair(self, port: int, request_id: int) -> tuple[int, int]:
        """Open the error then the data stream, as client-go does; their ids once replied."""
        ids = []
        for kind in ("error", "data"):
            headers = {"streamtype": [kind], "port": [str(port)], "requestid": [str(request_id)]}
            await self.send(self.encoder.syn_stream(self.next_id, headers))
            ids.append(self.next_id)
            self.next_id += 2
        for _ in ids:
            assert isinstance(reply := await self.frame(), SynReply), reply
        await self.send(self.encoder.data(ids[0], b"", fin=True))  # kubectl never writes errors
        return ids[0], ids[1]

    async def read_streams(self) -> dict[int, bytes]:
        """The bytes of a pair's two streams, until both have ended (FIN); pings noted."""
        got: dict[int, bytearray] = {}
        finished: set[int] = set()
        while len(finished) < 2:
            frame = await self.frame()
            if isinstance(frame, Ping):
                self.pongs.append(frame.ping_id)
            elif isinstance(frame, Data):
                got.setdefault(frame.stream_id, bytearray()).extend(frame.data)
                if frame.fin:
                    finished.add(frame.stream_id)
        return {k: bytes(v) for k, v in got.items()}


async def websocket_tunnel(server: str) -> AsyncIterator[SpdyClient]:
    url = f"{server}/api/v1/namespaces/default/pods/echo/portforward"
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(url, protocols=["SPDY/3.1+portforward.k8s.io"]) as ws,
    ):
        assert ws.protocol == "SPDY/3.1+portforward.k8s.io"

        async def receive() -> bytes:
            msg = await ws.receive()
            return msg.data if msg.type == aiohttp.WSMsgType.BINARY else b""

        yield SpdyClient(ws.send_bytes, receive)


async def plain_upgrade(server: str) -> AsyncIterator[SpdyClient]:
    url = URL(server)
    reader, writer = await asyncio.open_connection(url.host, url.port)
    writer.write(
        b"POST /api/v1/namespaces/default/pods/echo/portforward HTTP/1.1\r\n"
        + f"Host: {url.host}:{url.port}\r\n".encode()
        + b"Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
        b"X-Stream-Protocol-Version: portforward.k8s.io\r\nContent-Length: 0\r\n\r\n"
    )
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101 "), head
    assert b"X-Stream-Protocol-Version: portforward.k8s.io" in head

    async def send(data: bytes) -> None:
        writer.write(data)
        await writer.drain()

    try:
        yield SpdyClient(send, lambda: reader.read(65536))
    finally:
        writer.close()


@pytest.mark.parametrize("transport", [websocket_tunnel, plain_upgrade])
async def test_spdy_session_serves_the_next_pair_after_a_refused_port(
    echo: Cluster, transport: Callable[[str], AsyncIterator[SpdyClient]]
) -> None:
    async with asyncio.timeout(60):
        connection = transport(echo.server)
        spdy = await anext(connection)
        try:
            error_id, data_id = await spdy.open_pair(CLOSED_PORT, 0)
            ended = await spdy.read_streams()
            assert REFUSED in ended[error_id].decode() and ended.get(data_id, b"") == b""

            error_id, data_id = await spdy.open_pair(ECHO_PORT, 1)
            await spdy.send(spdy.encoder.ping(1))
            await spdy.send(spdy.encoder.data(data_id, b"hello", fin=True))
            ended = await spdy.read_streams()
            assert ended[data_id] == b"hello" and ended.get(error_id, b"") == b""
            assert spdy.pongs == [1]  # answered before the data frame behind it reached the pod
        finally:
            await connection.aclose()
