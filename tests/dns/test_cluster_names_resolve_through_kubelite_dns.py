"""A real ``kubelite dns`` against a real apiserver answers cluster names as CoreDNS does.

Services and EndpointSlices are written through the API directly (as the endpoint controllers
would), then asked for over UDP and TCP: a ClusterIP's A record, a headless Service's ready
endpoints, an endpoint's own name, SRV for named ports, an ExternalName's CNAME (its target
chased through the upstream), pod names, NXDOMAIN and NODATA with the zone's SOA, and names
outside the zone forwarded to a fake upstream resolver the test runs on loopback (SERVFAIL once
it is gone). The server registers ``kube-system/kube-dns``, follows deletions, and answers
again after a ``kill -9`` and restart.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import dns.asyncquery
import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset
import pytest

from api.errors import NotFound
from api.registry import REGISTRY
from client.rest import ApiClient
from kubelite.testing import ComponentProcess, Processes
from kubelite.testing.waiting import apoll_until
from tests.factories import endpoint_slice, service, slice_endpoint

pytestmark = pytest.mark.e2e

DNS_IP = "127.128.0.10"
"""``.10`` of the apiserver's default service range: the kube-dns ClusterIP."""
UPSTREAM_ANSWER = "127.77.0.1"
"""What the fake upstream answers for every A question."""
SERVICES = REGISTRY.require("", "Service")
SLICES = REGISTRY.require("discovery.k8s.io", "EndpointSlice")


class FakeUpstream(asyncio.DatagramProtocol):
    """A resolver on loopback: ``UPSTREAM_ANSWER`` for any A question; remembers the names."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr: Any) -> None:
        query = dns.message.from_wire(data)
        question = query.question[0]
        self.asked.append(question.name.to_text())
        reply = dns.message.make_response(query)
        if question.rdtype == dns.rdatatype.A:
            reply.answer.append(dns.rrset.from_text(question.name, 60, "IN", "A", UPSTREAM_ANSWER))
        self.transport.sendto(reply.to_wire(), addr)


@dataclass
class Setup:
    client: ApiClient
    dns: ComponentProcess
    upstream: FakeUpstream

    async def ask(self, name: str, qtype: str = "A", *, tcp: bool = False) -> dns.message.Message:
        query = dns.message.make_query(name, qtype)
        send = dns.asyncquery.tcp if tcp else dns.asyncquery.udp
        return await send(query, DNS_IP, port=self.dns.port_of("dns"), timeout=5)


def values(reply: dns.message.Message, qtype: str) -> set[str]:
    wanted = dns.rdatatype.from_text(qtype)
    return {rd.to_text() for rrset in reply.answer if rrset.rdtype == wanted for rd in rrset}


@pytest.fixture
async def setup(kubelite_processes: Processes) -> AsyncIterator[Setup]:
    loop = asyncio.get_running_loop()
    transport, upstream = await loop.create_datagram_endpoint(
        FakeUpstream, local_addr=("127.0.0.1", 0)
    )
    api = kubelite_processes.apiserver(store="memory://")
    upstream_port = transport.get_extra_info("sockname")[1]
    server = await asyncio.to_thread(
        kubelite_processes.dns, api.url, address=DNS_IP,
        args=[f"--upstream=127.0.0.1:{upstream_port}"],
    )  # fmt: skip
    async with ApiClient(server=api.url) as client:
        try:
            yield Setup(client=client, dns=server, upstream=upstream)
        finally:
            transport.close()


async def until_answered(s: Setup, name: str, qtype: str = "A") -> dns.message.Message:
    async def answered() -> dns.message.Message | None:
        reply = await s.ask(name, qtype)
        return reply if reply.answer else None

    return await apoll_until(answered, what=f"{qtype} {name}", every=0.2)


async def test_cluster_names_answer_as_coredns_does(setup: Setup) -> None:
    s = setup
    web = await s.client.create(
        SERVICES, service("web", ports=[{"name": "http", "port": 80}]), namespace="default"
    )
    web_ip = web["spec"]["clusterIP"]
    pg = {"name": "pg", "port": 5432}
    await s.client.create(
        SERVICES, service("db", ports=[pg], clusterIP="None"), namespace="default"
    )
    await s.client.create(
        SLICES,
        endpoint_slice(
            "db",
            {**slice_endpoint("127.1.2.3"), "hostname": "db-0"},
            slice_endpoint("127.1.2.4"),
            {**slice_endpoint("127.1.2.5", ready=False), "hostname": "db-2"},
            ports=[{**pg, "protocol": "TCP"}],
        ),
        namespace="default",
    )
    await s.client.create(
        SERVICES,
        service("ext", ports=[], type="ExternalName", externalName="example.com"),
        namespace="default",
    )

    reply = await until_answered(s, "web.default.svc.cluster.local")
    assert values(reply, "A") == {web_ip}
    assert reply.flags & dns.flags.AA and reply.answer[0].ttl == 5

    reply = await until_answered(s, "db.default.svc.cluster.local")
    assert values(reply, "A") == {"127.1.2.3", "127.1.2.4"}  # the not-ready one is left out
    reply = await s.ask("db-0.db.default.svc.cluster.local")
    assert values(reply, "A") == {"127.1.2.3"}

    reply = await s.ask("_pg._tcp.db.default.svc.cluster.local", "SRV")
    assert values(reply, "SRV") == {
        "0 50 5432 db-0.db.default.svc.cluster.local.",
        "0 50 5432 127-1-2-4.db.default.svc.cluster.local.",
    }
    assert {rd.to_text() for rrset in reply.additional for rd in rrset} == {
        "127.1.2.3",
        "127.1.2.4",
    }
    reply = await s.ask("_http._tcp.web.default.svc.cluster.local", "SRV", tcp=True)
    assert values(reply, "SRV") == {"0 100 80 web.default.svc.cluster.local."}

    reply = await until_answered(s, "ext.default.svc.cluster.local")
    assert values(reply, "CNAME") == {"example.com."}
    assert values(reply, "A") == {UPSTREAM_ANSWER}  # the target, chased upstream

    reply = await s.ask("127-1-2-3.default.pod.cluster.local")
    assert values(reply, "A") == {"127.1.2.3"}

    for name in ("nope.default.svc.cluster.local", "web.nosuchns.svc.cluster.local",
                 "nosuchns.svc.cluster.local"):  # fmt: skip
        reply = await s.ask(name)
        assert reply.rcode() == dns.rcode.NXDOMAIN, name
        assert reply.authority[0].rdtype == dns.rdatatype.SOA
    for name, qtype in (("web.default.svc.cluster.local", "AAAA"),
                        ("default.svc.cluster.local", "A")):  # fmt: skip
        reply = await s.ask(name, qtype)
        assert reply.rcode() == dns.rcode.NOERROR and not reply.answer, name
        assert reply.authority[0].rdtype == dns.rdatatype.SOA

    reply = await s.ask("example.org")
    assert values(reply, "A") == {UPSTREAM_ANSWER}
    assert "example.org." in s.upstream.asked
    assert not any(name.endswith("cluster.local.") for name in s.upstream.asked)

    await s.client.delete(SERVICES, "web", namespace="default")

    async def gone() -> bool:
        return (await s.ask("web.default.svc.cluster.local")).rcode() == dns.rcode.NXDOMAIN

    await apoll_until(gone, what="web's name to go with it", every=0.2)

    s.upstream.transport.close()
    reply = await s.ask("example.net")
    assert reply.rcode() == dns.rcode.SERVFAIL


async def test_registers_kube_dns_and_resolves_again_after_kill_9(setup: Setup) -> None:
    s = setup

    async def registered() -> dict[str, Any] | None:
        try:
            return await s.client.get(SLICES, "kube-dns", namespace="kube-system")
        except NotFound:
            return None

    slice_ = await apoll_until(registered, what="the kube-dns EndpointSlice", every=0.2)
    assert slice_["endpoints"][0]["addresses"] == [DNS_IP]
    assert {p["port"] for p in slice_["ports"]} == {s.dns.port_of("dns")}
    kube_dns = await s.client.get(SERVICES, "kube-dns", namespace="kube-system")
    assert kube_dns["spec"]["clusterIP"] == DNS_IP
    assert kube_dns["metadata"]["labels"]["k8s-app"] == "kube-dns"
    assert {(p["name"], p["protocol"], p["port"]) for p in kube_dns["spec"]["ports"]} == {
        ("dns", "UDP", 53),
        ("dns-tcp", "TCP", 53),
    }
    reply = await until_answered(s, "kube-dns.kube-system.svc.cluster.local")
    assert values(reply, "A") == {DNS_IP}

    await s.client.create(SERVICES, service("after"), namespace="default")
    s.dns.kill()
    await asyncio.to_thread(s.dns.restart)
    reply = await until_answered(s, "after.default.svc.cluster.local")
    assert values(reply, "A")
