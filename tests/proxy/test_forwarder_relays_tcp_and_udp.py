"""The forwarding table with real sockets on loopback: TCP and UDP relayed to echo endpoints,
refused without endpoints, re-pointed by an update, half-close passed on, and a frontend that
cannot be bound reported while the others are served — on asyncio's loop and on uvloop."""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, cast

import pytest
import uvloop

from services.proxy.forwarding import Forwarder
from services.proxy.service_table import Frontend, Route

Runner = Callable[[Coroutine[Any, Any, None]], None]


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> Runner:
    """Runs a scenario on asyncio's own loop, then on uvloop (the components' loop): their
    transports differ."""
    return uvloop.run if request.param == "uvloop" else asyncio.run


@contextlib.contextmanager
def forwarding(**options: Any) -> Iterator[Forwarder]:
    fw = Forwarder(**options)
    try:
        yield fw
    finally:
        fw.close()


def loopback_ip() -> str:
    """An address of our own in 127.200-239/8, so parallel runs rarely meet."""
    return f"127.{random.randint(200, 239)}.{random.randint(0, 255)}.{random.randint(2, 254)}"


def free_port(ip: str) -> int:
    with socket.socket() as s:
        s.bind((ip, 0))
        return int(s.getsockname()[1])


class TcpEcho:
    """An endpoint answering ``<name>:<bytes>`` to each chunk, and EOF to EOF."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.ip = loopback_ip()
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> TcpEcho:
        self.server = await asyncio.start_server(self._serve, self.ip, 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = await reader.read()  # until the client's EOF
        writer.write(f"{self.name}:".encode() + data)
        await writer.drain()
        writer.close()

    @property
    def address(self) -> tuple[str, int]:
        return (self.ip, self.port)

    def close(self) -> None:
        assert self.server is not None
        self.server.close()


async def ask(ip: str, port: int, payload: bytes) -> bytes:
    """Connect, send, half-close, read everything back."""
    reader, writer = await asyncio.open_connection(ip, port)
    writer.write(payload)
    await writer.drain()
    writer.write_eof()
    data = await reader.read()
    writer.close()
    return data


def route(*endpoints: tuple[str, int]) -> Route:
    return Route("default/web", "", "ClusterIP", tuple(endpoints))


def test_tcp_is_relayed_to_every_endpoint_in_turn_with_half_close(run: Runner) -> None:
    run(_tcp_is_relayed_to_every_endpoint_in_turn_with_half_close())


async def _tcp_is_relayed_to_every_endpoint_in_turn_with_half_close() -> None:
    with forwarding(mode="round-robin") as forwarder:
        a, b = await TcpEcho("a").start(), await TcpEcho("b").start()
        ip = loopback_ip()
        frontend = Frontend("TCP", ip, free_port(ip))
        forwarder.set_service("default/web", {frontend: route(a.address, b.address)})
        big = bytes(range(256)) * 8192  # 2 MiB: the relay's back-pressure is exercised
        answers = [await ask(ip, frontend.port, big) for _ in range(4)]
        assert {answer.split(b":", 1)[0] for answer in answers} == {b"a", b"b"}
        assert all(answer.split(b":", 1)[1] == big for answer in answers)
        a.close()
        b.close()


def test_no_endpoints_refuses_and_an_update_moves_new_connections(run: Runner) -> None:
    run(_no_endpoints_refuses_and_an_update_moves_new_connections())


async def _no_endpoints_refuses_and_an_update_moves_new_connections() -> None:
    with forwarding(mode="round-robin") as forwarder:
        a, b = await TcpEcho("a").start(), await TcpEcho("b").start()
        ip = loopback_ip()
        frontend = Frontend("TCP", ip, free_port(ip))
        forwarder.set_service("default/web", {frontend: route()})
        with pytest.raises(ConnectionRefusedError):
            await asyncio.open_connection(ip, frontend.port)
        forwarder.set_service("default/web", {frontend: route(a.address)})
        assert await ask(ip, frontend.port, b"x") == b"a:x"
        forwarder.set_service("default/web", {frontend: route(b.address)})
        assert {await ask(ip, frontend.port, b"x") for _ in range(3)} == {b"b:x"}
        forwarder.set_service("default/web", {})
        with pytest.raises(ConnectionRefusedError):
            await asyncio.open_connection(ip, frontend.port)
        a.close()
        b.close()


def test_a_refusing_endpoint_is_skipped(run: Runner) -> None:
    run(_a_refusing_endpoint_is_skipped())


async def _a_refusing_endpoint_is_skipped() -> None:
    with forwarding(mode="round-robin") as forwarder:
        a = await TcpEcho("a").start()
        dead_ip = loopback_ip()
        dead = (dead_ip, free_port(dead_ip))  # nothing listens there
        ip = loopback_ip()
        frontend = Frontend("TCP", ip, free_port(ip))
        forwarder.set_service("default/web", {frontend: route(dead, a.address)})
        assert {await ask(ip, frontend.port, b"x") for _ in range(4)} == {b"a:x"}
        a.close()


class UdpEcho(asyncio.DatagramProtocol):
    def __init__(self, name: str) -> None:
        self.name = name.encode()
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        assert self.transport is not None
        self.transport.sendto(self.name + b":" + data, addr)


async def udp_echo(name: str) -> tuple[asyncio.DatagramTransport, tuple[str, int]]:
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(
        lambda: UdpEcho(name), local_addr=(loopback_ip(), 0)
    )
    return transport, transport.get_extra_info("sockname")


async def udp_ask(sock: socket.socket, payload: bytes) -> bytes:
    loop = asyncio.get_running_loop()
    await loop.sock_sendall(sock, payload)
    return await asyncio.wait_for(loop.sock_recv(sock, 65535), 5)


def test_udp_flows_stick_per_client_and_follow_endpoint_removal(run: Runner) -> None:
    run(_udp_flows_stick_per_client_and_follow_endpoint_removal())


async def _udp_flows_stick_per_client_and_follow_endpoint_removal() -> None:
    with forwarding(mode="round-robin") as forwarder:
        (ta, a), (tb, b) = await udp_echo("a"), await udp_echo("b")
        ip = loopback_ip()
        frontend = Frontend("UDP", ip, free_port(ip))
        forwarder.set_service("default/dns", {frontend: route(a, b)})
        clients = []
        for _ in range(2):
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.setblocking(False)
            sock.connect((ip, frontend.port))  # replies must come from the frontend's address
            clients.append(sock)
        first = [await udp_ask(s, b"q") for s in clients]
        assert sorted(first) == [b"a:q", b"b:q"]  # round-robin: one flow each
        assert [await udp_ask(s, b"q") for s in clients] == first  # flows stick
        forwarder.set_service("default/dns", {frontend: route(b)})
        assert [await udp_ask(s, b"q") for s in clients] == [b"b:q", b"b:q"]
        for sock in clients:
            sock.close()
        ta.close()
        tb.close()


def test_a_frontend_that_cannot_bind_is_reported_and_the_others_served(run: Runner) -> None:
    run(_a_frontend_that_cannot_bind_is_reported_and_the_others_served())


async def _a_frontend_that_cannot_bind_is_reported_and_the_others_served() -> None:
    failures: list[tuple[Frontend, str]] = []
    forwarder = Forwarder(on_bind_failure=lambda f, r, exc: failures.append((f, exc.strerror)))
    a = await TcpEcho("a").start()
    ip = loopback_ip()
    holder = socket.socket()
    holder.bind((ip, 0))
    holder.listen()
    taken = Frontend("TCP", ip, holder.getsockname()[1])
    free = Frontend("TCP", ip, free_port(ip))
    try:
        forwarder.set_service("default/web", {taken: route(a.address), free: route(a.address)})
        assert failures == [(taken, "Address already in use")]
        assert taken in forwarder.failed
        assert await ask(ip, free.port, b"x") == b"a:x"
        holder.close()
        forwarder.retry_failed()
        assert not forwarder.failed
        assert await ask(ip, taken.port, b"y") == b"a:y"
    finally:
        holder.close()
        forwarder.close()
        a.close()
