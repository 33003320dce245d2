"""The DNS wire: one address and port, answered over UDP and TCP.

Why a module of its own: the rules of *names* live in ``records.py``; this is the part that
speaks the protocol (RFC 1035, EDNS0 of RFC 6891, TCP framing of RFC 7766), through dnspython,
so neither side hides inside the other.

``DnsServer(view=..., zone=..., forwarder=...)``; ``port = await server.start(host, port)``
binds UDP and TCP on the same port (0: any free one, the same for both); ``await stop()``.
For each query:

* a name in the cluster's zone (or a reverse name of a cluster address) is answered from
  ``records.resolve`` — authoritative (AA), recursion available (RA), the question's case
  kept; an ExternalName's CNAME target is chased (in the zone: from the records; outside:
  through the forwarder) and its records added to the answer;
* every other name is relayed to the host's resolvers (``upstream.Forwarder``); SERVFAIL when
  none answers;
* an answer larger than the client can take over UDP (512 bytes, or its EDNS buffer size) is
  sent truncated (TC, empty sections), so the client asks again over TCP;
* a query that is not a QUERY gets NOTIMP, one with other than one question FORMERR, bytes
  that do not parse are dropped.

Cluster answers are cached as wire bytes keyed by the query less its ID — flags, question and
EDNS record included, so the bytes fully determine the answer — and the cache is emptied
whenever the view's ``generation`` moves: an answer is never older than the informers' caches.

Every answer is counted with CoreDNS's metric names (``metrics.DnsMetrics``).

What it does not guarantee: answers are built on the event loop (a miss costs a few hundred
microseconds of dnspython); no rate limiting, no DNSSEC, no zone transfers.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import struct
import time
from collections.abc import Iterable
from typing import cast

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset

from component.metrics import Metrics
from services.dns.metrics import DnsMetrics
from services.dns.records import DEFAULT_TTL, DEFAULT_ZONE, Answer, ClusterView, Record, resolve
from services.dns.upstream import Forwarder

__all__ = ["CACHE_ENTRIES", "DnsServer"]

log = logging.getLogger("kubelite.dns")

CACHE_ENTRIES = 10_000
"""Cached cluster answers at most; the cache is emptied when full (and on every change)."""
UDP_PLAIN_MAX = 512
"""What a client without EDNS takes over UDP (RFC 1035)."""
BIND_ATTEMPTS = 5
"""With port 0: tries to find a port free for both UDP and TCP."""
TCP_IDLE = 10.0
"""Seconds a TCP client may stay idle between queries (RFC 7766 suggests a few seconds)."""


class _Udp(asyncio.DatagramProtocol):
    def __init__(self, server: DnsServer) -> None:
        self.server = server
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)  # uvloop's is not a subclass

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        cached = self.server.cached(data, tcp=False)
        if cached is not None:
            assert self.transport is not None
            self.transport.sendto(cached, addr)
            return
        self.server.spawn(self._answer(data, addr))

    async def _answer(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        reply = await self.server.answer(data, tcp=False)
        if reply is not None and self.transport is not None and not self.transport.is_closing():
            self.transport.sendto(reply, addr)


class DnsServer:
    def __init__(
        self,
        *,
        view: ClusterView,
        forwarder: Forwarder,
        zone: str = DEFAULT_ZONE,
        dns_ips: tuple[str, ...] = (),
        ttl: int = DEFAULT_TTL,
        metrics: DnsMetrics | None = None,
    ) -> None:
        self.view = view
        self.forwarder = forwarder
        self.zone = zone.rstrip(".")
        self.dns_ips = dns_ips
        self.ttl = ttl
        self.port: int | None = None
        self._udp: asyncio.DatagramTransport | None = None
        self._tcp: asyncio.Server | None = None
        self._cache: dict[bytes, bytes] = {}
        self._cache_generation = -1
        self._tasks: set[asyncio.Task[None]] = set()
        self.metrics = metrics or DnsMetrics(Metrics())
        self._zone_label = self.zone + "."

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self, host: str, port: int) -> int:
        """Bind UDP and TCP on ``host:port`` (0: one free port for both); the port bound.
        OSError when it cannot."""
        loop = asyncio.get_running_loop()
        for attempt in range(BIND_ATTEMPTS):
            udp, _ = await loop.create_datagram_endpoint(
                lambda: _Udp(self), local_addr=(host, port)
            )
            bound = int(udp.get_extra_info("sockname")[1])
            try:
                self._tcp = await asyncio.start_server(
                    self._serve_tcp, host, bound, reuse_address=True
                )
            except OSError as exc:
                udp.close()
                if port != 0 or exc.errno != errno.EADDRINUSE or attempt == BIND_ATTEMPTS - 1:
                    raise
                continue
            self._udp, self.port = udp, bound
            self.metrics.listening(host, bound)
            return bound
        raise AssertionError("unreachable")  # pragma: no cover

    async def stop(self) -> None:
        if self._udp is not None:
            self._udp.close()
            self._udp = None
        if self._tcp is not None:
            self._tcp.close()
            await self._tcp.wait_closed()
            self._tcp = None
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def spawn(self, coro: object) -> None:
        """Run one query's answer as a task the server owns (cancelled on stop)."""
        assert asyncio.iscoroutine(coro)
        task = asyncio.get_running_loop().create_task(coro, name="dns query")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve_tcp(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                async with asyncio.timeout(TCP_IDLE):
                    (length,) = struct.unpack("!H", await reader.readexactly(2))
                    data = await reader.readexactly(length)
                reply = self.cached(data, tcp=True) or await self.answer(data, tcp=True)
                if reply is None:
                    return
                writer.write(struct.pack("!H", len(reply)) + reply)
                await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    # -- answering -------------------------------------------------------------------------

    def cached(self, data: bytes, *, tcp: bool) -> bytes | None:
        """A cluster answer to ``data`` built earlier in this generation, with its ID."""
        started = time.perf_counter()
        if self._cache_generation != self.view.generation:
            self._cache.clear()
            self._cache_generation = self.view.generation
            return None
        reply = self._cache.get(data[2:])
        if reply is None:
            return None
        reply = data[:2] + reply
        self._served(data, reply, zone=self._zone_label, plugin="cache", tcp=tcp, since=started)
        return reply

    def _served(
        self, query: bytes, reply: bytes, *, zone: str, plugin: str, tcp: bool, since: float
    ) -> bytes:
        self.metrics.served(
            query, reply, zone=zone, plugin=plugin, tcp=tcp, seconds=time.perf_counter() - since
        )
        return reply

    def _remember(self, query: bytes, reply: bytes, *, generation: int) -> None:
        if generation != self._cache_generation:
            return
        if len(self._cache) >= CACHE_ENTRIES:
            self._cache.clear()
        self._cache[query[2:]] = reply[2:]

    async def answer(self, data: bytes, *, tcp: bool) -> bytes | None:
        """The reply to one query (wire bytes), or None to send nothing."""
        started = time.perf_counter()
        try:
            query = dns.message.from_wire(data)
        except dns.exception.DNSException as exc:
            log.debug("dropping a query that does not parse: %s", exc)
            return None
        if query.opcode() != dns.opcode.QUERY:
            return self._served(
                data, _error(query, dns.rcode.NOTIMP), zone=".", plugin="", tcp=tcp, since=started
            )
        if len(query.question) != 1:
            return self._served(
                data, _error(query, dns.rcode.FORMERR), zone=".", plugin="", tcp=tcp, since=started
            )
        question = query.question[0]
        generation = self.view.generation
        found = None
        if question.rdclass == dns.rdataclass.IN:
            qtype = dns.rdatatype.to_text(question.rdtype)
            found = resolve(
                self.view, question.name.to_text(), qtype, zone=self.zone, dns_ips=self.dns_ips
            )
        if found is None:
            relayed = await self.forwarder.forward(data, tcp=tcp)
            return self._served(
                data,
                relayed or _error(query, dns.rcode.SERVFAIL),
                zone=".",
                plugin="forward",
                tcp=tcp,
                since=started,
            )
        reply = await self._reply(query, found)
        wire = _to_wire(query, reply, tcp=tcp)
        if found.chase is None:
            self._remember(data, wire, generation=generation)
        return self._served(
            data, wire, zone=self._zone_label, plugin="kubernetes", tcp=tcp, since=started
        )

    async def _reply(self, query: dns.message.Message, found: Answer) -> dns.message.Message:
        reply = dns.message.make_response(query, recursion_available=True)
        reply.flags |= dns.flags.AA
        reply.set_rcode(dns.rcode.Rcode(found.rcode))
        answer = list(found.answer)
        if found.chase is not None:
            qtype = dns.rdatatype.to_text(query.question[0].rdtype)
            answer += await self._chase(found.chase, qtype)
        reply.answer = _rrsets(answer, ttl=self.ttl)
        reply.authority = _rrsets(found.authority, ttl=self.ttl)
        reply.additional = _rrsets(found.additional, ttl=self.ttl)
        return reply

    async def _chase(self, target: str, qtype: str) -> list[Record]:
        """The records of an ExternalName's target: from the zone, or from upstream."""
        inside = resolve(self.view, target, qtype, zone=self.zone, dns_ips=self.dns_ips)
        if inside is not None:
            return list(inside.answer)
        query = dns.message.make_query(target, qtype)
        wire = await self.forwarder.forward(query.to_wire())
        if wire is None:
            return []
        try:
            upstream = dns.message.from_wire(wire)
        except dns.exception.DNSException:
            return []
        return [
            Record(rrset.name.to_text(), dns.rdatatype.to_text(rrset.rdtype), rdata.to_text())
            for rrset in upstream.answer
            for rdata in rrset
        ]


def _rrsets(records: Iterable[Record], *, ttl: int) -> list[dns.rrset.RRset]:
    grouped: dict[tuple[str, str], list[str]] = {}
    for record in records:
        grouped.setdefault((record.name, record.kind), []).append(record.data)
    return [
        dns.rrset.from_text_list(name, ttl, dns.rdataclass.IN, kind, data)
        for (name, kind), data in grouped.items()
    ]


def _to_wire(query: dns.message.Message, reply: dns.message.Message, *, tcp: bool) -> bytes:
    limit = 65535 if tcp else max(UDP_PLAIN_MAX, query.payload if query.edns >= 0 else 0)
    try:
        return reply.to_wire(max_size=limit)
    except dns.exception.TooBig:
        truncated = dns.message.make_response(query, recursion_available=True)
        truncated.flags |= dns.flags.AA | dns.flags.TC
        truncated.set_rcode(reply.rcode())
        return truncated.to_wire(max_size=limit)


def _error(query: dns.message.Message, rcode: dns.rcode.Rcode) -> bytes:
    reply = dns.message.make_response(query, recursion_available=True)
    reply.set_rcode(rcode)
    return reply.to_wire()
