"""TCP forwarding for one frontend: accept on ``ip:port``, connect to an endpoint, relay bytes.

Why: kube-proxy rewrites packets in the kernel; on a shared loopback without iptables, kubelite
relays in user space — so the relay is the hot path and is written as two asyncio ``Protocol``
callbacks (no coroutine per chunk): whatever one socket reads is written to the other, and when
one side's write buffer fills, the other side stops reading until it drains (back-pressure
through ``pause_writing``/``resume_writing``). Under uvloop the reads and writes stay in libuv.

``TcpListener(frontend, balancer)``:

* ``open()`` binds and listens at once (``SO_REUSEADDR``; an ``OSError`` such as "address in
  use" is the caller's to report), then starts serving on the event loop;
* each accepted connection pauses reading, picks an endpoint (``Balancer.pick`` by the
  client's IP), connects, and only then relays; an endpoint that refuses is avoided and
  another tried (up to ``CONNECT_ATTEMPTS``); no endpoint at all — the route has none, or all
  refused — resets the client's connection (``abort``: RST, as kube-proxy's REJECT);
* half-close is passed on: one side's EOF becomes ``write_eof`` on the other, after the bytes
  before it; the pair closes once both directions ended, and one side's reset aborts the other;
* ``update(route)``: new connections follow the new endpoints at once; established ones are
  left alone, as kube-proxy leaves established conntrack entries;
* ``close()`` stops listening; established connections run on until their ends close them.

Not here: client source IPs (the endpoint sees the proxy's connection, not the client's
address), PROXY protocol, connection limits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from typing import cast

from services.proxy.balancer import Balancer
from services.proxy.service_table import Frontend, Route

__all__ = ["CONNECT_ATTEMPTS", "CONNECT_TIMEOUT", "TcpListener"]

log = logging.getLogger("kubelite.proxy")

CONNECT_ATTEMPTS = 3
"""Endpoints tried for one connection before the client's is reset."""
CONNECT_TIMEOUT = 5.0
"""Seconds a connect to one endpoint may take; on loopback a live port answers at once."""
WRITE_BUFFER_HIGH = 1 << 20
"""Bytes buffered towards one side before the other side stops being read (1 MiB: large
enough that a fast sender rarely toggles reading, small enough to bound memory per pair)."""
BACKLOG = socket.SOMAXCONN


class _Side(asyncio.Protocol):
    """One socket of a relayed pair; ``peer`` is the other's transport once both exist."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: _Side | None = None
        self.eof = False
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        self.transport = cast(asyncio.Transport, transport)
        self.transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)

    def data_received(self, data: bytes) -> None:
        peer = self.peer
        if peer is not None and peer.transport is not None and not peer.closed:
            peer.transport.write(data)

    def eof_received(self) -> bool:
        self.eof = True
        peer = self.peer
        if peer is None or peer.transport is None or peer.closed:
            return False
        if peer.eof:  # both directions ended
            peer.transport.close()
            return False
        if peer.transport.can_write_eof():
            peer.transport.write_eof()
        return True  # keep our transport open: the other direction may still carry data

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        peer = self.peer
        if peer is not None and peer.transport is not None and not peer.closed:
            if exc is None:
                peer.transport.close()
            else:
                peer.transport.abort()

    # our write buffer filled with the peer's bytes: stop reading the peer until it drains
    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None and not self.peer.closed:
            self.peer.transport.resume_reading()


class _Client(_Side):
    """The accepted side: connects to an endpoint, then relays."""

    def __init__(self, listener: TcpListener) -> None:
        super().__init__()
        self.listener = listener
        self._connecting: asyncio.Task[None] | None = None
        self._early: list[bytes] = []
        """What the client sent before the endpoint answered (uvloop may deliver the first
        bytes, even the EOF, before ``pause_reading`` takes effect)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        assert self.transport is not None
        self.transport.pause_reading()  # nothing to relay to yet
        peer = transport.get_extra_info("peername")
        client_ip = str(peer[0]) if peer else ""
        self._connecting = asyncio.get_running_loop().create_task(
            self._connect(client_ip), name=f"proxy connect {self.listener.frontend}"
        )

    async def _connect(self, client_ip: str) -> None:
        tried: list[tuple[str, int]] = []
        while len(tried) < CONNECT_ATTEMPTS and not self.closed:
            endpoint = self.listener.balancer.pick(client_ip, avoid=tried)
            if endpoint is None:
                break
            try:
                upstream = await self._open_upstream(endpoint)
            except (OSError, TimeoutError) as exc:
                log.debug("%s: endpoint %s:%d failed: %s", self.listener.frontend, *endpoint, exc)
                tried.append(endpoint)
                continue
            assert upstream.transport is not None and self.transport is not None
            if self.closed:  # the client left while we connected
                upstream.transport.close()
                return
            self._relay_early(upstream)
            self.transport.resume_reading()
            return
        if tried:
            log.info(
                "%s: no endpoint of %s answered (%s); resetting the client's connection",
                self.listener.frontend, self.listener.balancer.route.describe(),
                ", ".join(f"{ip}:{port}" for ip, port in tried),
            )  # fmt: skip
        if self.transport is not None:
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if self.peer is None:
            self._early.append(data)
        else:
            super().data_received(data)

    def eof_received(self) -> bool:
        if self.peer is None:
            self.eof = True
            return True  # passed on once the endpoint answers
        return super().eof_received()

    def _relay_early(self, upstream: _Side) -> None:
        self.peer = upstream
        assert upstream.transport is not None
        for data in self._early:
            upstream.transport.write(data)
        self._early.clear()
        if self.eof and upstream.transport.can_write_eof():
            upstream.transport.write_eof()

    async def _open_upstream(self, endpoint: tuple[str, int]) -> _Side:
        upstream = _Side()
        upstream.peer = self
        loop = asyncio.get_running_loop()
        await asyncio.wait_for(loop.create_connection(lambda: upstream, *endpoint), CONNECT_TIMEOUT)
        return upstream

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if self._connecting is not None and not self._connecting.done() and self.peer is None:
            self._connecting.cancel()


class TcpListener:
    """Forwards TCP connections to ``frontend`` (see the module)."""

    def __init__(self, frontend: Frontend, balancer: Balancer) -> None:
        self.frontend = frontend
        self.balancer = balancer
        self._sock: socket.socket | None = None
        self._server: asyncio.AbstractServer | None = None
        self._serving: asyncio.Task[None] | None = None

    def open(self) -> None:
        """Bind and listen now (raises ``OSError``); accept from the event loop."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.frontend.ip, self.frontend.port))
            sock.listen(BACKLOG)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._sock = sock
        self._serving = asyncio.get_running_loop().create_task(
            self._serve(sock), name=f"proxy listen {self.frontend}"
        )

    async def _serve(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Client(self), sock=sock, backlog=BACKLOG, start_serving=True
        )

    def update(self, route: Route) -> None:
        self.balancer.update(route)

    def close(self) -> None:
        if self._serving is not None and not self._serving.done():
            self._serving.cancel()
        if self._server is not None:
            self._server.close()
        elif self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
        self._sock = self._server = self._serving = None
