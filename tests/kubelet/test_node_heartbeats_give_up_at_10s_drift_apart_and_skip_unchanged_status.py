"""A node agent's heartbeats (lease renewals and node status), in virtual time, as Kubernetes'
kubelet sends them:

* on the heartbeat client (``heartbeat_config``) a renewal or status write that gets no answer
  gives up after 10 s — ``min(status interval, lease duration)`` — not the 60 s of an ordinary
  request, so one lost request costs one interval;
* consecutive renewals are ``interval`` to ``1.04 × interval`` apart (``wait.JitterUntil``'s
  jitter), so nodes started together drift apart instead of renewing in lock-step;
* nodes sharing a ``heartbeat_gate`` never have more heartbeats in flight than it allows;
* a Node the agent created carried its status: the first status sync writes nothing, a change is
  written at once, and an unchanged status again once the report interval (5 min) has passed;
* a Node the node controller marked Unknown is reported again at the next sync once the agent
  sees it (``saw_node``), not at the next 5-minute report.

Against a real apiserver app on loopback, or an aiohttp app that records or never answers.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from client.kubeconfig import ClientConfig
from client.rest import ApiClient, ApiUnreachable
from services.apiserver.app import make_app
from services.apiserver.context import ServerOptions
from services.kubelet.node_status import NodeAgent, NodeConfig, Pressure, heartbeat_config

ServerFactory = Callable[[web.Application], Awaitable[TestServer]]

pytestmark = pytest.mark.looptime


def url_of(server: TestServer) -> str:
    return str(server.make_url("")).rstrip("/")


def node_config(name: str = "n1") -> NodeConfig:
    return NodeConfig(name=name, kubelet_port=10250, runtime_version="sim://1")


def lease_app(*, on_put: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.Application:
    """Leases in ``kube-node-lease``: GET says 404, POST creates, PUT is ``on_put``."""

    async def get(_request: web.Request) -> web.StreamResponse:
        return web.json_response(
            {"kind": "Status", "code": 404, "reason": "NotFound", "message": "no lease"},
            status=404,
        )

    async def create(request: web.Request) -> web.StreamResponse:
        lease = await request.json()
        lease["metadata"]["resourceVersion"] = "1"
        return web.json_response(lease, status=201)

    base = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
    app = web.Application()
    app.router.add_get(base + "/{name}", get)
    app.router.add_post(base, create)
    app.router.add_put(base + "/{name}", on_put)
    app.router.add_put("/api/v1/nodes/{name}/status", on_put)
    return app


async def test_heartbeats_give_up_after_10_seconds_not_60(aiohttp_server: ServerFactory) -> None:
    never = asyncio.Event()

    async def silent(_request: web.Request) -> web.StreamResponse:
        await never.wait()
        raise AssertionError("unreachable")

    server = await aiohttp_server(lease_app(on_put=silent))
    config = ClientConfig(server=url_of(server))
    assert config.request_timeout == 60.0
    loop = asyncio.get_running_loop()
    async with ApiClient(config) as client, ApiClient(heartbeat_config(config)) as heartbeats:
        agent = NodeAgent(client=client, config=node_config(), heartbeat_client=heartbeats)
        await agent.renew_lease()  # created
        start = loop.time()
        with pytest.raises(ApiUnreachable):
            await agent.renew_lease()  # a PUT nobody answers
        assert loop.time() - start == pytest.approx(10.0, abs=0.5)

        agent.node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
        start = loop.time()
        with pytest.raises(ApiUnreachable):
            await agent.sync_status()
        assert loop.time() - start == pytest.approx(10.0, abs=0.5)


async def test_renewals_are_one_to_1_04_intervals_apart(aiohttp_server: ServerFactory) -> None:
    loop = asyncio.get_running_loop()
    renewed_at: list[float] = []
    enough = asyncio.Event()

    async def record(request: web.Request) -> web.StreamResponse:
        renewed_at.append(loop.time())
        if len(renewed_at) == 21:
            enough.set()
        return web.json_response(await request.json())

    server = await aiohttp_server(lease_app(on_put=record))
    async with ApiClient(server=url_of(server)) as client:
        agent = NodeAgent(client=client, config=node_config(), lease_interval=10.0)
        loop_task = asyncio.create_task(agent._lease_loop())
        try:
            await enough.wait()
        finally:
            loop_task.cancel()
            await asyncio.gather(loop_task, return_exceptions=True)
    gaps = [b - a for a, b in itertools.pairwise(renewed_at)]
    assert all(10.0 <= gap <= 10.4 + 0.05 for gap in gaps), gaps
    assert len({round(gap, 3) for gap in gaps}) > 1, "jittered, not one fixed period"


async def test_a_registered_node_reports_status_again_on_change_or_after_5_minutes(
    aiohttp_server: ServerFactory,
) -> None:
    server = await aiohttp_server(make_app(ServerOptions(store_url="memory://")))
    pressure: Pressure = {"MemoryPressure": False}
    async with ApiClient(server=url_of(server)) as client:
        agent = NodeAgent(client=client, config=node_config(), pressure=lambda: dict(pressure))
        created = await agent.register()
        assert not await agent.sync_status(), "the Node was created with this status"

        pressure["MemoryPressure"] = True
        assert await agent.sync_status()
        assert not await agent.sync_status()

        await asyncio.sleep(agent.status_report_interval)  # virtual time: the report comes due
        assert await agent.sync_status()
        assert agent.status_writes == 2
        assert agent.node is not None
        assert agent.node["metadata"]["uid"] == created["metadata"]["uid"]
        conditions: dict[str, Any] = {
            c["type"]: c["status"] for c in agent.node["status"]["conditions"]
        }
        assert conditions["MemoryPressure"] == "True"


async def test_nodes_sharing_a_gate_keep_at_most_its_size_in_flight(
    aiohttp_server: ServerFactory,
) -> None:
    in_flight = most = 0
    answered = 0
    enough = asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        nonlocal in_flight, most, answered
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(3.0)  # virtual time: an apiserver that has fallen behind
        in_flight -= 1
        answered += 1
        if answered == 24:
            enough.set()
        return web.json_response(await request.json())

    server = await aiohttp_server(lease_app(on_put=slow))
    gate = asyncio.Semaphore(2)
    async with ApiClient(server=url_of(server)) as client:
        agents = [
            NodeAgent(client=client, config=node_config(f"n{i}"), heartbeat_gate=gate)
            for i in range(8)
        ]
        tasks = [asyncio.create_task(agent._lease_loop()) for agent in agents]
        try:
            await enough.wait()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    assert most == 2


async def test_a_node_marked_unknown_is_reported_ready_again_at_the_next_sync(
    aiohttp_server: ServerFactory,
) -> None:
    server = await aiohttp_server(make_app(ServerOptions(store_url="memory://")))
    async with ApiClient(server=url_of(server)) as client:
        agent = NodeAgent(client=client, config=node_config())
        await agent.register()
        agent.saw_node(await client.get(agent.nodes, "n1"))
        assert not await agent.sync_status(), "what the server has is what was reported"

        node = await client.get(agent.nodes, "n1")
        for condition in node["status"]["conditions"]:
            condition["status"] = "Unknown"  # as the node-lifecycle controller writes it
        unknown = await client.update_status(agent.nodes, node)
        agent.saw_node(unknown)

        assert await agent.sync_status()
        node = await client.get(agent.nodes, "n1")
        statuses = {c["type"]: c["status"] for c in node["status"]["conditions"]}
        assert statuses["Ready"] == "True"
        assert statuses["MemoryPressure"] == "False"
