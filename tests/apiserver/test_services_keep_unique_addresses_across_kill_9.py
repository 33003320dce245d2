"""No ClusterIP or NodePort is ever held by two Services, even across an apiserver kill -9.

The real ``kubelite apiserver`` process over a SQLite file is killed with SIGKILL while 120
NodePort Services are being created at once from small ranges; an allocation nobody holds is
also written straight into the store, as a crash between reserving and writing leaves one. A
new apiserver over the same file (repair grace 0) must: keep every acknowledged Service, never
give one address or node port to two Services (before or after the restart), release the leaked
allocations so they can be handed out again, and leave exactly one allocation per address and
port held.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp

from kubelite.testing import ComponentProcess
from kubelite.testing.waiting import apoll_until
from services.apiserver.service_allocation import IP_PREFIX, PORT_PREFIX
from store import open_store
from tests.conftest import StartApiServer
from tests.factories import service

SVCS = "/api/v1/namespaces/default/services"
RANGES = ["--service-cluster-ip-range=127.128.0.0/24", "--service-node-port-range=30000-30299"]
GHOST_IP, GHOST_PORT = "127.128.0.5", 30005
"""In the static bands (the first 16 of each range), which random allocation reaches only when
the rest is full: 120 Services leave them free, so the leak is the only holder."""


async def _create_many(server: ComponentProcess, *, count: int, kill_after: int) -> set[str]:
    """Create ``count`` NodePort Services at once; SIGKILL the server after ``kill_after``
    acknowledgements. Returns the names acknowledged."""
    acked: set[str] = set()
    enough = asyncio.Event()
    async with aiohttp.ClientSession(server.url) as session:

        async def create(i: int) -> None:
            try:
                async with session.post(SVCS, json=service(f"s{i:03d}", type="NodePort")) as resp:
                    if resp.status == 201:
                        acked.add((await resp.json())["metadata"]["name"])
                        if len(acked) >= kill_after:
                            enough.set()
            except (aiohttp.ClientError, ConnectionError):
                pass  # the server died before answering: not acknowledged

        writers = [asyncio.create_task(create(i)) for i in range(count)]
        await enough.wait()
        await asyncio.to_thread(server.kill)
        await asyncio.gather(*writers)
    return acked


async def _leak(db: Path) -> None:
    """Allocations of a Service that was never written, as a crash after reserving leaves."""
    store = open_store(f"sqlite:///{db}")
    record = {"service": {"namespace": "default", "name": "ghost", "uid": "u"}, "allocatedAt": 0}
    try:
        await store.create(IP_PREFIX + GHOST_IP, json.dumps(record).encode())
        await store.create(PORT_PREFIX + str(GHOST_PORT), json.dumps(record).encode())
    finally:
        await store.close()


async def _allocations(db: Path) -> tuple[list[str], list[str]]:
    store = open_store(f"sqlite:///{db}")
    try:
        ips = [kv.key.removeprefix(IP_PREFIX) for kv in (await store.list(IP_PREFIX)).items]
        ports = [kv.key.removeprefix(PORT_PREFIX) for kv in (await store.list(PORT_PREFIX)).items]
    finally:
        await store.close()
    return ips, ports


def _held(services: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    ips = [s["spec"]["clusterIP"] for s in services if s["spec"].get("clusterIP")]
    ports = [str(p["nodePort"]) for s in services for p in s["spec"]["ports"] if "nodePort" in p]
    return ips, ports


async def test_kill_9_mid_creation_leaves_no_shared_address_and_repair_frees_leaks(
    apiserver_process: StartApiServer, tmp_path: Path
) -> None:
    db = tmp_path / "services.db"
    first = await asyncio.to_thread(apiserver_process, store=f"sqlite:///{db}", args=RANGES)
    acked = await _create_many(first, count=120, kill_after=30)
    await _leak(db)

    repairing = [*RANGES, "--service-leak-grace=0s", "--service-repair-interval=1s"]
    second = await asyncio.to_thread(apiserver_process, store=f"sqlite:///{db}", args=repairing)
    async with aiohttp.ClientSession(second.url) as session:

        async def ghost_freed() -> bool:
            body = service(
                "heir",
                type="NodePort",
                clusterIP=GHOST_IP,
                ports=[{"port": 80, "nodePort": GHOST_PORT}],
            )
            async with session.post(SVCS, json=body) as resp:
                return resp.status == 201

        await apoll_until(ghost_freed, what="the repair loop releasing the leaked allocations")
        # more creates after the restart draw from what the crash and the repair left
        for i in range(20):
            async with session.post(SVCS, json=service(f"after{i}", type="NodePort")) as resp:
                assert resp.status == 201, await resp.text()
        async with session.get(SVCS) as resp:
            services = (await resp.json())["items"]

    names = {s["metadata"]["name"] for s in services}
    assert acked <= names, sorted(acked - names)
    ips, ports = _held(services)
    assert [ip for ip, n in Counter(ips).items() if n > 1] == []
    assert [port for port, n in Counter(ports).items() if n > 1] == []

    await asyncio.to_thread(second.stop)
    recorded_ips, recorded_ports = await _allocations(db)
    assert sorted(recorded_ips) == sorted(ips)  # every leak released, every holder recorded
    assert sorted(recorded_ports) == sorted(ports)
