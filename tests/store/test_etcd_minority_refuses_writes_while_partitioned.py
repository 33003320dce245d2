"""etcd only, in a private network namespace: a 3-member cluster with member 3 cut off its peers
by firewall rules. The minority (member 3) refuses writes and quorum reads — the store times
out with StoreUnavailable, which the apiserver answers 504 — while the majority (member 1) goes on
taking them; once the cut heals, member 3 catches up and serves everything written meanwhile,
and the write it refused never appears.

The members listen on 127.0.0.1-3 inside the namespace; member 3 runs under a group id of its
own, so the cut is three iptables rules of that namespace only: peers' connections to its peer
port are dropped, and everything it sends except its client port's traffic is dropped (on
loopback every connection's source address is 127.0.0.1, so only the owner tells member 3's
outgoing peer connections from the others'). The store clients run on a thread inside the
namespace; the host's firewall and loopback are never touched."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from kubelite.testing import etcd, netns
from kubelite.testing.waiting import apoll_until
from store import open_store
from store.base import Store, StoreUnavailable

pytestmark = pytest.mark.skipif(
    not etcd.available(), reason="no etcd binary on the PATH: apt-get install etcd-server"
)

CLIENT_PORT = 2379
PEER_PORT = 2380
CUT_OFF_GROUP = 61379
"""Member 3's group id: what the firewall rules match its outgoing packets by."""
PODS = "/registry/core/pods/ns/"


def _cut_rules(member: etcd.EtcdMember) -> list[list[str]]:
    """iptables argv (without the command name) that cut ``member`` off its peers."""
    group = ["-m", "owner", "--gid-owner", str(CUT_OFF_GROUP)]
    tcp = ["-p", "tcp"]
    return [
        ["-A", "INPUT", "-d", member.host, *tcp, "--dport", str(member.peer_port), "-j", "DROP"],
        ["-A", "OUTPUT", *group, *tcp, "--sport", str(member.client_port), "-j", "ACCEPT"],
        ["-A", "OUTPUT", *group, "-d", member.host, *tcp, "--dport", str(member.client_port),
         "-j", "ACCEPT"],  # etcd's JSON gateway calls its own gRPC port
        ["-A", "OUTPUT", *group, "-j", "DROP"],
    ]  # fmt: skip


async def _lost_its_leader(member: etcd.EtcdMember) -> bool:
    """Whether ``member`` has lost its leader (etcd's status, answered without a quorum)."""
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"http://{member.endpoint}/v3/maintenance/status", json={}) as resp,
    ):
        status = await resp.json(content_type=None)
    return int(status.get("leader", 0)) == 0


@pytest.fixture
def namespace() -> Iterator[netns.NetworkNamespace]:
    reason = netns.unavailable()
    if reason is not None:
        pytest.skip(f"no private network namespace on this machine: {reason}")
    made = netns.NetworkNamespace()
    made.open()
    yield made
    made.close()


@pytest.fixture
def members(tmp_path: Path, namespace: netns.NetworkNamespace) -> Iterator[list[etcd.EtcdMember]]:
    """Three members of one etcd cluster inside ``namespace``; the third may be cut off."""
    hosts = {f"m{i}": f"127.0.0.{i}" for i in (1, 2, 3)}
    cluster = [f"{name}=http://{host}:{PEER_PORT}" for name, host in hosts.items()]
    started = [
        etcd.EtcdMember(
            tmp_path / name,
            name=name,
            host=host,
            client_port=CLIENT_PORT,
            peer_port=PEER_PORT,
            initial_cluster=cluster,
            launcher=namespace.launcher(),
            group=CUT_OFF_GROUP if name == "m3" else None,
        )
        for name, host in hosts.items()
    ]
    try:
        # none is ready before two have elected a leader: start them together
        with concurrent.futures.ThreadPoolExecutor(len(started)) as pool:
            for done in [pool.submit(member.start) for member in started]:
                done.result()
        yield started
    finally:
        for member in started:
            member.kill()


def test_a_cut_off_etcd_member_refuses_writes_and_catches_up_once_healed(
    namespace: netns.NetworkNamespace, members: list[etcd.EtcdMember]
) -> None:
    majority_member, _, cut_off = members

    def cut() -> None:
        for rule in _cut_rules(cut_off):
            namespace.run("iptables", *rule)

    def heal() -> None:
        for chain in ("INPUT", "OUTPUT"):
            namespace.run("iptables", "-F", chain)

    async def scenario() -> None:
        majority: Store = open_store(f"etcd://{majority_member.endpoint}?timeout=30")
        minority: Store = open_store(f"etcd://{cut_off.endpoint}?timeout=3")
        try:
            before = await majority.create(PODS + "before", b"v")
            # member 3 has it (and both stores have probed the member) before the cut
            assert await minority.get(PODS + "before") == before

            await asyncio.to_thread(cut)
            # once member 3 knows it has no leader it hands no proposal to raft; one forwarded
            # earlier could sit in its blackholed peer connection and still land after the heal
            await apoll_until(lambda: _lost_its_leader(cut_off), what="member 3 to lose its leader")
            with pytest.raises(StoreUnavailable) as refused:
                await minority.create(PODS + "refused", b"v")
            # etcd holds a proposal until there is a leader: a timeout, the apiserver's 504
            assert refused.value.timed_out
            with pytest.raises(StoreUnavailable):
                await minority.get(PODS + "before")  # a quorum read needs the majority too
            meanwhile = [await majority.create(PODS + f"meanwhile-{i}", b"v") for i in range(5)]

            await asyncio.to_thread(heal)

            async def caught_up() -> bool:
                try:
                    return await minority.get(PODS + "meanwhile-4") is not None
                except StoreUnavailable:  # still electing after rejoining
                    return False

            await apoll_until(caught_up, what="member 3 serves the writes made while cut off")
            seen = (await minority.list(PODS)).items
            assert [kv.key for kv in seen] == [PODS + "before"] + [kv.key for kv in meanwhile]
            assert seen[1:] == meanwhile  # same values at the same revisions
            assert await majority.get(PODS + "refused") is None
        finally:
            await majority.close()
            await minority.close()

    namespace.call(lambda: asyncio.run(scenario()))
