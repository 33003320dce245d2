"""The front as a component: one TCP port relaying each connection to a healthy apiserver.

Why: with several apiservers, kubectl and every kubeconfig still name one address. kubeadm's
HA guide puts HAProxy (TCP mode, ``option httpchk GET /readyz``) before the apiservers; this
is that, small: it never reads the bytes it relays, so TLS and client certificates pass
through untouched and each apiserver sees its caller's own certificate.

What it owns (``FrontService``, a ``component.Service``):

* the listening socket (``--port``, 6443 by default) — each accepted connection goes to the
  next healthy backend in turn (round robin); a backend that refuses the connection or does
  not accept it within ``CONNECT_TIMEOUT`` is marked down at once and the next one is tried
  (no byte was sent yet, so trying another is safe: HAProxy's ``option redispatch``); with no
  backend left the client's connection is closed;
* one checker task per backend: ``GET /readyz`` every ``check_interval``; a 200 marks it up,
  anything else (or no answer within ``CHECK_TIMEOUT``) marks it down; the state changes are
  logged;
* the health server (``/healthz``, ``/livez``; ``/readyz`` while at least one backend is up;
  ``/metrics``) on ``--healthz-port`` (10258). The metrics take the names of HAProxy's
  Prometheus exporter, the tool this stands in for: ``haproxy_frontend_connections_total
  {frontend}``, ``haproxy_server_connections_total{backend,server}`` (connections relayed to
  each apiserver) and ``haproxy_server_up{backend,server}``, with ``frontend="front"`` and
  ``backend="apiservers"``.

What it does not guarantee: a connection already relayed to an apiserver that dies is cut
(the client reconnects, and lands on a live one); a watch is such a connection. Backends are
not weighted, and the check does not verify the backend's certificate (it asks whether a
backend answers, not who it is; the client verifies that through the relay).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import ssl
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

from component.errors import CannotListen
from component.flags import BindAddress
from component.health import HealthServer, text_response
from component.metrics import Metrics
from component.ready import announce_listening
from component.tasks import TaskGroup

__all__ = ["HEALTH_PORT", "Backend", "FrontOptions", "FrontService"]

log = logging.getLogger("kubelite.front")

HEALTH_PORT = 10258
"""The front's health port (the apiserver's neighbours use 10256, 10257 and 10259)."""
BACKEND = "apiservers"
"""The ``backend`` label of the front's metrics."""
CONNECT_TIMEOUT = 2.0
"""Seconds a backend gets to accept a relayed connection before the next one is tried."""
CHECK_TIMEOUT = 2.0
"""Seconds a backend gets to answer ``/readyz``."""
RELAY_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class Backend:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class FrontOptions:
    backends: tuple[Backend, ...]
    listen: BindAddress = field(default_factory=lambda: BindAddress("127.0.0.1", 6443))
    health: BindAddress = field(default_factory=lambda: BindAddress("127.0.0.1", HEALTH_PORT))
    health_scheme: str = "https"
    check_interval: float = 1.0


class Backends:
    """Which backends are up, and the round-robin choice among them."""

    def __init__(self, backends: tuple[Backend, ...]) -> None:
        self.all = backends
        self.up = set(backends)  # up until a check or a connection says otherwise
        self._turn = itertools.count()

    def mark(self, backend: Backend, *, up: bool, why: str) -> None:
        if up and backend not in self.up:
            self.up.add(backend)
            log.info("backend %s is up (%s)", backend, why)
        elif not up and backend in self.up:
            self.up.discard(backend)
            log.warning("backend %s is down (%s); relaying to the others", backend, why)

    def in_turn(self) -> list[Backend]:
        """The up backends, starting with the next one's turn, then the down ones (a check may
        lag behind a backend that came back)."""
        start = next(self._turn) % len(self.all)
        ordered = [*self.all[start:], *self.all[:start]]
        return [b for b in ordered if b in self.up] + [b for b in ordered if b not in self.up]


class FrontService:
    def __init__(self, options: FrontOptions) -> None:
        self.options = options
        self.backends = Backends(options.backends)
        self.port: int | None = None
        self._server: asyncio.Server | None = None
        self._tasks = TaskGroup("front", logger=log)
        self._health = HealthServer(component="front", address=options.health)
        self._session: aiohttp.ClientSession | None = None
        self.metrics = Metrics()
        self._accepted = self.metrics.counter(
            "haproxy_frontend_connections_total", "Total number of connections.", ("frontend",)
        )
        self._relayed = self.metrics.counter(
            "haproxy_server_connections_total",
            "Total number of connections relayed to a server.",
            ("backend", "server"),
        )
        self.metrics.gauges(
            "haproxy_server_up",
            "Current health status of the server (1 = UP, 0 = DOWN).",
            ("backend", "server"),
            lambda: [
                ((BACKEND, str(b)), 1.0 if b in self.backends.up else 0.0)
                for b in self.backends.all
            ],
        )

    async def start(self) -> None:
        listen = self.options.listen
        try:
            self._server = await asyncio.start_server(self._relay, listen.host, listen.port)
        except OSError as exc:
            where = f"{listen.host}:{listen.port}"
            raise CannotListen(f"cannot listen on {where} (--port): {exc}") from exc
        self.port = int(self._server.sockets[0].getsockname()[1])
        announce_listening(
            component="front", endpoint="front", host=listen.host, port=self.port, scheme="tcp"
        )
        log.info(
            "relaying %s:%d to %s",
            listen.host,
            self.port,
            ", ".join(str(b) for b in self.options.backends),
        )
        no_verify = ssl.create_default_context()
        no_verify.check_hostname = False
        no_verify.verify_mode = ssl.CERT_NONE
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=no_verify),
            timeout=aiohttp.ClientTimeout(total=CHECK_TIMEOUT),
        )
        for backend in self.options.backends:
            self._tasks.start(f"check-{backend}", self._check_forever(backend))
        self._health.add_ok("/healthz", "/livez")
        self._health.add("/readyz", self._readyz)
        self._health.add_metrics("/metrics", self.metrics.render)
        await self._health.start()

    async def wait(self) -> int | None:
        await self._tasks.first_ended()
        return 1

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._tasks.cancel()
        await self._health.stop()
        if self._session is not None:
            await self._session.close()

    async def _readyz(self, request: web.Request) -> web.Response:
        up = sorted(str(b) for b in self.backends.up)
        if not up:
            return text_response("no backend is up\n", status=503)
        return text_response(f"ok: {', '.join(up)}\n")

    async def _check_forever(self, backend: Backend) -> None:
        assert self._session is not None
        url = f"{self.options.health_scheme}://{backend}/readyz"
        while True:
            try:
                async with self._session.get(url) as resp:
                    await resp.read()
                    self.backends.mark(backend, up=resp.status == 200, why=f"/readyz {resp.status}")
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                self.backends.mark(
                    backend, up=False, why=f"/readyz: {str(exc) or type(exc).__name__}"
                )
            await asyncio.sleep(self.options.check_interval)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._accepted.labels("front").inc()
        try:
            upstream = await self._connect()
            if upstream is None:
                log.warning("no backend accepted a connection; closing the client's")
                return
            up_reader, up_writer = upstream
            try:
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            finally:
                up_writer.close()
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        for backend in self.backends.in_turn():
            try:
                connection = await asyncio.wait_for(
                    asyncio.open_connection(backend.host, backend.port), CONNECT_TIMEOUT
                )
                self._relayed.labels(BACKEND, str(backend)).inc()
                return connection
            except (OSError, TimeoutError) as exc:
                self.backends.mark(
                    backend, up=False, why=f"connect: {str(exc) or type(exc).__name__}"
                )
        return None


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copy until ``source`` ends, then half-close ``sink`` (the other direction goes on)."""
    try:
        while chunk := await source.read(RELAY_CHUNK):
            sink.write(chunk)
            await sink.drain()
        if sink.can_write_eof():
            sink.write_eof()
    except (ConnectionError, OSError):
        sink.close()
