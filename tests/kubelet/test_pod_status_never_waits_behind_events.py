"""A kubelet's events go out on a client of their own (Kubernetes' kubelet has an event client
beside its main and heartbeat clients), so a pod's Running status never waits in line behind
events: with every event write held in the store and the main client down to one connection,
a second bound pod still turns Running while the first pod's event hangs. On one client, the
held event kept the only connection and the status write waited behind it for ever (at 5,000 sim nodes the same line made status writes
a twentieth of the kubelet's writes).

A real apiserver app over a real memory store, whose event creates are held until the test
lets them go; a real kubelet service (sim runtime) in the test's loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestServer

from api.registry import REGISTRY
from client.rest import ApiClient
from services.apiserver.app import make_app
from services.apiserver.context import ServerOptions
from services.kubelet.main import parse_args
from services.kubelet.service import KubeletService
from store import open_store
from store.base import KeyValue
from tests.factories import pod
from tests.forwarding_store import ForwardingStore

ServerFactory = Callable[[web.Application], Awaitable[TestServer]]

EVENTS = REGISTRY.require("", "Event")
EVENT_KEYS = EVENTS.prefix()
PODS = REGISTRY.require("", "Pod")


class EventHoldingStore(ForwardingStore):
    """A real store that holds every event create until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__(open_store("memory://"))
        self.held = 0
        self.holding = asyncio.Event()
        self.release = asyncio.Event()

    async def create(self, key: str, value: bytes, *, ttl: float | None = None) -> KeyValue:
        if key.startswith(EVENT_KEYS):
            self.held += 1
            self.holding.set()
            await self.release.wait()
        return await super().create(key, value, ttl=ttl)


async def test_a_pod_turns_running_while_its_kubelets_events_are_held(
    aiohttp_server: ServerFactory, tmp_path: Path
) -> None:
    store = EventHoldingStore()
    server = await aiohttp_server(make_app(ServerOptions(), store=store))
    url = str(server.make_url("")).rstrip("/")
    options, _ = parse_args(
        ["--runtime", "sim", "--node-name", "held", "--server", url, "--port", "0",
         "--healthz-port", "-1", "--state-dir", str(tmp_path / "kubelet")]
    )  # fmt: skip
    options = replace(options, client=options.client.with_options(max_connections=1))
    service = KubeletService(options)
    await service.start()
    try:
        async with asyncio.timeout(60), ApiClient(server=url) as client:
            await client.create(PODS, pod("first", nodeName="held"), namespace="default")
            await store.holding.wait()  # its first event is in flight, and stays
            await client.create(PODS, pod("second", nodeName="held"), namespace="default")
            async with client.watch(PODS, namespace="default") as stream:
                async for event in stream:
                    running = (event.object.get("status") or {}).get("phase") == "Running"
                    if running and event.object["metadata"]["name"] == "second":
                        break
            assert store.held >= 1
            assert (await client.list(EVENTS))["items"] == [], "events were held throughout"
    finally:
        store.release.set()
        await service.stop()
