"""Forwarding the names the cluster does not hold: CoreDNS's ``forward . /etc/resolv.conf``.

Why a module of its own: a pod's resolver asks the cluster DNS for *every* name — its search
path first, then the name as given — so everything outside the cluster domain must reach the
host's resolvers, byte for byte, and a dead resolver must cost a bounded wait, not a hung pod.

What it owns: ``Upstream`` (host, port), ``host_upstreams`` (the ``nameserver`` lines of a
resolv.conf text) and ``Forwarder``: ``await forwarder.forward(query, tcp=...)`` relays the raw
query to each upstream in turn — over UDP on its own connected socket (so only that upstream's
reply, with the query's ID, is taken), over TCP with the two-byte length prefix when the client
asked over TCP (a truncated UDP answer makes clients retry so) — and returns the first reply,
unchanged, or None when every upstream failed or timed out (the server then answers SERVFAIL).

What it does not do: cache (CoreDNS's ``cache`` plugin), health-check upstreams, randomise
their order, DNS over TLS.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import struct
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["FORWARD_TIMEOUT", "Forwarder", "Upstream", "host_upstreams", "parse_upstream"]

log = logging.getLogger("kubelite.dns")

FORWARD_TIMEOUT = 2.0
"""Seconds one upstream gets to answer before the next is tried (glibc waits 5 s per server
by default, so a pod's resolver is still waiting when the second upstream answers)."""
DNS_PORT = 53


@dataclass(frozen=True, slots=True)
class Upstream:
    host: str
    port: int = DNS_PORT

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_upstream(text: str) -> Upstream:
    """``1.2.3.4``, ``1.2.3.4:5353``, ``[::1]:53``; ValueError on anything else."""
    text = text.strip()
    host, port = text, DNS_PORT
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest:
            port = int(rest.removeprefix(":"))
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
        port = int(port_text)
    ipaddress.ip_address(host)  # an address, not a name: resolving it would need DNS
    if not 0 < port < 65536:
        raise ValueError(f"port {port} out of range")
    return Upstream(host, port)


def host_upstreams(resolv_conf: str) -> list[Upstream]:
    """The ``nameserver`` addresses of a resolv.conf text, in order."""
    found = []
    for line in resolv_conf.splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) >= 2 and fields[0] == "nameserver":
            with contextlib.suppress(ValueError):
                found.append(parse_upstream(fields[1]))
    return found


class _Reply(asyncio.DatagramProtocol):
    def __init__(self, query_id: bytes) -> None:
        self.query_id = query_id
        self.reply: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        if data[:2] == self.query_id and not self.reply.done():
            self.reply.set_result(data)

    def error_received(self, exc: Exception) -> None:
        if not self.reply.done():
            self.reply.set_exception(exc)


class Forwarder:
    def __init__(self, upstreams: Sequence[Upstream], *, timeout: float = FORWARD_TIMEOUT) -> None:
        self.upstreams = tuple(upstreams)
        self.timeout = timeout

    async def forward(self, query: bytes, *, tcp: bool = False) -> bytes | None:
        """The first upstream's reply to ``query`` (raw wire bytes), or None."""
        for upstream in self.upstreams:
            try:
                async with asyncio.timeout(self.timeout):
                    if tcp:
                        return await self._tcp(upstream, query)
                    return await self._udp(upstream, query)
            except (TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
                log.debug("upstream %s failed (%s); trying the next", upstream, exc or "timeout")
        return None

    async def _udp(self, upstream: Upstream, query: bytes) -> bytes:
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.create_datagram_endpoint(
            lambda: _Reply(query[:2]), remote_addr=(upstream.host, upstream.port)
        )
        try:
            transport.sendto(query)
            return await protocol.reply
        finally:
            transport.close()

    async def _tcp(self, upstream: Upstream, query: bytes) -> bytes:
        reader, writer = await asyncio.open_connection(upstream.host, upstream.port)
        try:
            writer.write(struct.pack("!H", len(query)) + query)
            await writer.drain()
            (length,) = struct.unpack("!H", await reader.readexactly(2))
            return await reader.readexactly(length)
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
