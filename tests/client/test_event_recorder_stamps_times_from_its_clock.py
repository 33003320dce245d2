"""An Event's times come from the recorder's clock: ``firstTimestamp``/``lastTimestamp`` in whole
seconds (``metav1.Time``), ``eventTime`` in microseconds (``metav1.MicroTime``) — the text
Kubernetes writes, whichever second the clock is in — against a real apiserver app on loopback."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from api.registry import REGISTRY
from client.events import EventRecorder
from client.rest import ApiClient
from services.apiserver.app import make_app
from services.apiserver.context import ServerOptions

EVENTS = REGISTRY.by_kind("", "Event")
assert EVENTS is not None
ServerFactory = Callable[..., Awaitable[TestServer]]

NODE = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "node0", "uid": "u-0"}}


@pytest.fixture
async def client(aiohttp_server: ServerFactory) -> Any:
    server = await aiohttp_server(make_app(ServerOptions(store_url="memory://")))
    async with ApiClient(server=str(server.make_url("")).rstrip("/")) as c:
        yield c


@pytest.mark.parametrize(
    ("seconds", "time", "micro"),
    [
        (1764645001.123456, "2025-12-02T03:10:01Z", "2025-12-02T03:10:01.123456Z"),
        (1764645059.9999996, "2025-12-02T03:11:00Z", "2025-12-02T03:11:00.000000Z"),
        (1764645060.000001, "2025-12-02T03:11:00Z", "2025-12-02T03:11:00.000001Z"),
    ],
)
async def test_times_are_the_clocks_in_kubernetes_text(
    client: ApiClient, seconds: float, time: str, micro: str
) -> None:
    assert EVENTS is not None
    recorder = EventRecorder(client, component="kubelet", host="node0", clock=lambda: seconds)
    task = recorder.start()
    try:
        recorder.event(NODE, "Normal", "Starting", "Starting kubelet.")
        await recorder.flush()
    finally:
        task.cancel()
    [event] = (await client.list(EVENTS, namespace="default"))["items"]
    assert (event["firstTimestamp"], event["lastTimestamp"], event["eventTime"]) == (
        time,
        time,
        micro,
    )


async def test_later_events_in_another_second_have_their_own_times(client: ApiClient) -> None:
    assert EVENTS is not None
    now = [1764645001.5]
    recorder = EventRecorder(client, component="kubelet", host="node0", clock=lambda: now[0])
    task = recorder.start()
    try:
        recorder.event(NODE, "Normal", "Starting", "Starting kubelet.")
        await recorder.flush()
        now[0] = 1764645002.25
        recorder.event(NODE, "Normal", "NodeReady", "Node node0 status is now: NodeReady")
        await recorder.flush()
    finally:
        task.cancel()
    items = (await client.list(EVENTS, namespace="default"))["items"]
    times = sorted((e["reason"], e["firstTimestamp"], e["eventTime"]) for e in items)
    assert times == [
        ("NodeReady", "2025-12-02T03:10:02Z", "2025-12-02T03:10:02.250000Z"),
        ("Starting", "2025-12-02T03:10:01Z", "2025-12-02T03:10:01.500000Z"),
    ]
