"""UDP forwarding for one frontend: per-client flows to endpoints, ended by idle timeouts.

Why: UDP has no connections, so the proxy makes them up as the kernel's conntrack does for
kube-proxy: the first datagram from a client address opens a *flow* — a socket of the proxy's
own, connected to the endpoint the balancer picked — and every later datagram from that client
goes the same way; the endpoint's answers go back to the client from the frontend's own
address (the one it sent to, so a connected client socket accepts them).

``UdpListener(frontend, balancer, idle_timeout=...)``:

* ``open()`` binds now (an ``OSError`` is the caller's to report) and reads with the event
  loop's reader callbacks — no task per datagram;
* a flow ends after ``idle_timeout`` seconds without a datagram either way (conntrack's UDP
  timeout is 30 s), when its endpoint is no longer usable (``update``: kube-proxy clears the
  conntrack entries of a removed UDP endpoint, so the next datagram picks a live one), or when
  the endpoint refuses (an ICMP port-unreachable read as ``ConnectionRefusedError``);
* a datagram with no endpoint to go to is dropped (UDP has nothing to refuse with here);
  a datagram that would block is dropped too, as a full queue drops it.

Not here: fragmentation concerns beyond the 64 KiB datagram, per-flow rate limits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket

from services.proxy.balancer import Balancer
from services.proxy.service_table import Frontend, Route

__all__ = ["DEFAULT_IDLE_TIMEOUT", "UdpListener"]

log = logging.getLogger("kubelite.proxy")

DEFAULT_IDLE_TIMEOUT = 30.0
"""Seconds a UDP flow lives without traffic: Linux conntrack's ``nf_conntrack_udp_timeout``."""
MAX_DATAGRAM = 65535
READS_PER_WAKEUP = 64
"""Datagrams read per readiness callback before yielding to the loop (fairness)."""

Client = tuple[str, int]
Address = tuple[str, int]


class _Flow:
    """One client's conversation with one endpoint, over a socket connected to the endpoint."""

    def __init__(self, listener: UdpListener, client: Client, endpoint: Address) -> None:
        self.listener = listener
        self.client = client
        self.endpoint = endpoint
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.sock.setblocking(False)
            self.sock.connect(endpoint)
        except OSError:
            self.sock.close()
            raise
        self.loop = asyncio.get_running_loop()
        self.last = self.loop.time()
        self.loop.add_reader(self.sock.fileno(), self._readable)
        self._timer = self.loop.call_later(listener.idle_timeout, self._check_idle)

    def send(self, data: bytes) -> None:
        self.last = self.loop.time()
        try:
            self.sock.send(data)
        except BlockingIOError:
            pass  # a full socket buffer drops the datagram, as a full queue would
        except OSError:  # refused (an ICMP error from an earlier datagram): pick again
            self.listener.end_flow(self)

    def _readable(self) -> None:
        for _ in range(READS_PER_WAKEUP):
            try:
                data = self.sock.recv(MAX_DATAGRAM)
            except BlockingIOError:
                return
            except OSError:
                self.listener.end_flow(self)
                return
            self.last = self.loop.time()
            self.listener.reply(data, self.client)

    def _check_idle(self) -> None:
        idle = self.loop.time() - self.last
        timeout = self.listener.idle_timeout
        if idle >= timeout:
            self.listener.end_flow(self)
        else:
            self._timer = self.loop.call_later(timeout - idle, self._check_idle)

    def close(self) -> None:
        self._timer.cancel()
        self.loop.remove_reader(self.sock.fileno())
        self.sock.close()


class UdpListener:
    """Forwards UDP datagrams to ``frontend`` (see the module)."""

    def __init__(
        self,
        frontend: Frontend,
        balancer: Balancer,
        *,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    ) -> None:
        self.frontend = frontend
        self.balancer = balancer
        self.idle_timeout = idle_timeout
        self.flows: dict[Client, _Flow] = {}
        self._sock: socket.socket | None = None

    def open(self) -> None:
        """Bind now (raises ``OSError``) and start reading."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.frontend.ip, self.frontend.port))
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._sock = sock
        asyncio.get_running_loop().add_reader(sock.fileno(), self._readable)

    def _readable(self) -> None:
        sock = self._sock
        if sock is None:
            return
        for _ in range(READS_PER_WAKEUP):
            try:
                data, client = sock.recvfrom(MAX_DATAGRAM)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # an ICMP error for an earlier reply; keep serving
                log.debug("%s: %s", self.frontend, exc)
                continue
            self._forward(data, client)

    def _forward(self, data: bytes, client: Client) -> None:
        flow = self.flows.get(client)
        if flow is None:
            endpoint = self.balancer.pick(client[0])
            if endpoint is None:
                return  # nowhere to go: dropped
            try:
                flow = _Flow(self, client, endpoint)
            except OSError as exc:
                log.info("%s: cannot reach endpoint %s:%d: %s", self.frontend, *endpoint, exc)
                return
            self.flows[client] = flow
        flow.send(data)

    def reply(self, data: bytes, client: Client) -> None:
        """An endpoint's datagram, sent to ``client`` from the frontend's address."""
        if self._sock is None:
            return
        with contextlib.suppress(BlockingIOError, OSError):
            self._sock.sendto(data, client)

    def end_flow(self, flow: _Flow) -> None:
        if self.flows.get(flow.client) is flow:
            del self.flows[flow.client]
        flow.close()

    def update(self, route: Route) -> None:
        """New flows pick among ``route``'s endpoints; flows to endpoints it no longer has end."""
        self.balancer.update(route)
        usable = set(route.endpoints)
        for flow in [f for f in self.flows.values() if f.endpoint not in usable]:
            self.end_flow(flow)

    def close(self) -> None:
        """Stop reading and end every flow."""
        for flow in list(self.flows.values()):
            self.end_flow(flow)
        sock, self._sock = self._sock, None
        if sock is not None:
            asyncio.get_running_loop().remove_reader(sock.fileno())
            sock.close()
