"""What the listening socket lets in: a cap on open connections, and a deadline for request heads.

Why: every open connection costs a file descriptor. Without a cap, a flood of clients takes the
process to its ``RLIMIT_NOFILE``; from then on ``accept()`` fails silently in the event loop, the
SQLite store cannot open a file, and the kubelet proxies cannot connect — the server looks hung.
And a client that sends half a request line and then nothing (slowloris) would hold its
connection forever.

What it owns:

* ``ConnectionCap`` — wraps the server's protocol factory and counts the open connections. Past
  ``limit`` a new connection is answered at once with a minimal ``503 ServiceUnavailable``
  ``Status`` (``Retry-After: 1``, ``Connection: close``) and closed; it never reaches aiohttp.
  A burst of refusals is logged once when it starts and once when connections are accepted
  again (with the count), not once per connection.
* ``CappedTCPSite`` — aiohttp's ``TCPSite`` with that factory in front of the server, listening
  with the kernel's largest accept queue (``listen_backlog``: ``net.core.somaxconn``, as Go's
  listeners and so kube-apiserver take it) instead of aiohttp's 128: a burst of new
  connections — a sim kubelet's thousands of nodes renewing at once — waits in the queue
  instead of having its SYNs dropped and retried after 1, 3, 7, 15 and 31 s.
* ``default_max_connections`` — the default cap, sized from the process's ``RLIMIT_NOFILE``
  with room kept for what else needs descriptors (the store's files and connections, the
  connections to kubelets for ``log`` and ``exec``, refused connections while they close).
* ``HEADER_TIMEOUT`` — kube-apiserver's ``ReadHeaderTimeout`` (32 s). The apiserver passes it to
  aiohttp as ``keepalive_timeout``: aiohttp arms that timer when a connection opens and after
  each response, does not push it back when bytes arrive, and closes the connection if a whole
  request head has not arrived by then. So it bounds both the wait for a request head and the
  idle time of a kept-alive connection (kube-apiserver keeps idle connections 90 s; kubelite
  closes them after 32 s, which clients handle as any idle close).

Limits: the deadline covers the request head only, not a body sent slowly (kube-apiserver's
60 s request timeout is not implemented); the cap counts connections, not requests (see
``inflight`` for those).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import socket
import ssl
from collections.abc import Callable
from typing import Final, cast

from aiohttp import web

from api.errors import ServiceUnavailable
from services.apiserver.codec import dumps

__all__ = [
    "HEADER_TIMEOUT",
    "CappedTCPSite",
    "ConnectionCap",
    "default_max_connections",
    "listen_backlog",
]

log = logging.getLogger(__name__)

HEADER_TIMEOUT: Final = 32.0
"""Seconds a connection gets to deliver a whole request head (kube-apiserver's value)."""

RESERVED_FDS: Final = 64
"""Descriptors kept for everything but client connections: stdio, the listening socket, the
SQLite files (database, WAL, shared memory and lock, per connection) and a margin."""

REFUSAL_LINGER: Final = 1.0
"""Seconds a refused connection may stay open so that its answer reaches the client (closing
with unread request bytes makes the kernel send a reset, which can discard the answer)."""

MAX_LINGERING: Final = 64
"""Refused connections allowed to linger at once; past that they are closed at once."""


def default_max_connections(*, nofile: int | None = None) -> int:
    """The cap for a process whose soft ``RLIMIT_NOFILE`` is ``nofile`` (default: this one's).

    Three quarters of what is left after ``RESERVED_FDS``: a proxied ``log`` or ``exec`` stream
    holds a second descriptor (to the kubelet) for each client one.
    """
    if nofile is None:
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if nofile == resource.RLIM_INFINITY or nofile <= 0:
        nofile = 1 << 20
    return max(1, (nofile - RESERVED_FDS) * 3 // 4)


def _refusal(limit: int) -> bytes:
    status = ServiceUnavailable(
        f"the server has reached its limit of {limit} open connections, please try again later",
        retry_after_seconds=1,
    )
    body = dumps(status.to_status()).rstrip(b"\n") + b"\n"
    head = (
        "HTTP/1.1 503 Service Unavailable\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Retry-After: 1\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


class _Counted(asyncio.Protocol):
    """A client connection under the cap: forwards everything to aiohttp's protocol."""

    __slots__ = ("_cap", "_inner")

    def __init__(self, inner: asyncio.Protocol, cap: ConnectionCap) -> None:
        self._inner = inner
        self._cap = cap

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cap._closed()
        self._inner.connection_lost(exc)


class _Refused(asyncio.Protocol):
    """A connection over the cap: answer 503, stop writing, close after a short linger."""

    def __init__(self, cap: ConnectionCap) -> None:
        self._cap = cap
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self._transport = transport
        transport.write(self._cap.refusal)
        if self._cap.lingering >= MAX_LINGERING or not transport.can_write_eof():
            transport.abort()
            return
        self._cap.lingering += 1
        transport.write_eof()
        self._timer = asyncio.get_running_loop().call_later(REFUSAL_LINGER, transport.abort)

    def data_received(self, data: bytes) -> None:
        pass  # the request is not read; the answer is already on its way

    def eof_received(self) -> bool:
        if self._transport is not None:
            self._transport.close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._cap.lingering -= 1


class ConnectionCap:
    """Counts open connections; past ``limit`` (0 = no limit) new ones are refused with 503."""

    def __init__(self, *, limit: int) -> None:
        if limit < 0:
            raise ValueError("the connection limit must be >= 0 (0 means no limit)")
        self.limit = limit
        self.open = 0
        self.lingering = 0
        self._refused_in_burst = 0
        self.refusal = _refusal(limit)

    def wrap(self, factory: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        """A protocol factory for ``loop.create_server`` that applies the cap to ``factory``."""

        def make() -> asyncio.Protocol:
            if self.limit and self.open >= self.limit:
                if not self._refused_in_burst:
                    log.warning(
                        "%d connections open, the limit (--max-open-connections); refusing new "
                        "ones with 503 until some close",
                        self.open,
                    )
                self._refused_in_burst += 1
                return _Refused(self)
            if self._refused_in_burst:
                log.warning(
                    "accepting connections again; %d were refused at the limit of %d",
                    self._refused_in_burst,
                    self.limit,
                )
                self._refused_in_burst = 0
            self.open += 1
            return _Counted(factory(), self)

        return make

    def _closed(self) -> None:
        self.open -= 1


def listen_backlog() -> int:
    """The kernel's limit on a listening socket's accept queue (``net.core.somaxconn``), which
    Go's ``net.Listen`` asks for; ``socket.SOMAXCONN`` where the sysctl cannot be read."""
    try:
        with open("/proc/sys/net/core/somaxconn") as f:
            return max(1, int(f.read().split()[0]))
    except (OSError, ValueError, IndexError):
        return socket.SOMAXCONN


class CappedTCPSite(web.BaseSite):
    """``web.TCPSite`` whose connections pass through a ``ConnectionCap`` first."""

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        *,
        cap: ConnectionCap,
        backlog: int | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__(
            runner,
            backlog=listen_backlog() if backlog is None else backlog,
            ssl_context=ssl_context,
        )
        self._host = host
        self._port = port
        self._cap = cap

    @property
    def name(self) -> str:
        scheme = "https" if self._ssl_context else "http"
        return f"{scheme}://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        self._server = await asyncio.get_running_loop().create_server(
            self._cap.wrap(server),
            self._host,
            self._port,
            backlog=self._backlog,
            reuse_address=True,
            ssl=self._ssl_context,
        )
