"""The event recorder never blocks its caller, folds repeats into one Event whose count grows
(as ``kubectl describe`` shows "x5"), and files cluster-scoped objects' events in ``default``
— against a real apiserver app on loopback."""

from __future__ import annotations

import asyncio
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
PODS = REGISTRY.by_kind("", "Pod")
assert EVENTS is not None and PODS is not None
ServerFactory = Callable[..., Awaitable[TestServer]]


async def events_about(
    client: ApiClient, name: str, namespace: str = "default"
) -> list[dict[str, Any]]:
    assert EVENTS is not None
    body = await client.list(
        EVENTS, namespace=namespace, field_selector=f"involvedObject.name={name}"
    )
    return sorted(body["items"], key=lambda e: e["message"])


@pytest.fixture
async def client(aiohttp_server: ServerFactory) -> Any:
    server = await aiohttp_server(make_app(ServerOptions(store_url="memory://")))
    async with ApiClient(server=str(server.make_url("")).rstrip("/")) as c:
        yield c


async def test_repeats_become_one_event_with_a_growing_count(client: ApiClient) -> None:
    assert PODS is not None
    pod = await client.create(
        PODS,
        {
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        },
    )
    recorder = EventRecorder(client, component="default-scheduler", host="node0")
    task = recorder.start()
    try:
        message = "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
        for _ in range(5):
            recorder.event(pod, "Warning", "FailedScheduling", message)
        await recorder.flush()
        [event] = await events_about(client, "web")
        assert event["count"] == 5
        assert (event["type"], event["reason"], event["message"]) == (
            "Warning",
            "FailedScheduling",
            message,
        )
        assert event["involvedObject"]["uid"] == pod["metadata"]["uid"]
        assert event["involvedObject"]["kind"] == "Pod"
        assert event["source"] == {"component": "default-scheduler", "host": "node0"}
        assert event["reportingComponent"] == "default-scheduler"
        assert event["firstTimestamp"] and event["lastTimestamp"]

        for _ in range(2):
            recorder.event(pod, "Warning", "FailedScheduling", message)
        recorder.event(pod, "Normal", "Scheduled", "Successfully assigned default/web to node1")
        await recorder.flush()
        events = await events_about(client, "web")
        assert [(e["reason"], e["count"]) for e in events] == [
            ("FailedScheduling", 7),
            ("Scheduled", 1),
        ]
        assert events[0]["metadata"]["name"] == event["metadata"]["name"], "patched, not recreated"
        assert recorder.written == 3
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_cluster_scoped_objects_get_their_events_in_default(client: ApiClient) -> None:
    recorder = EventRecorder(client, component="kubelet", host="node1")
    task = recorder.start()
    try:
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node1", "uid": "n-1"}}
        recorder.event(node, "Normal", "NodeReady", "Node node1 status is now: NodeReady")
        await recorder.flush()
        [event] = await events_about(client, "node1", namespace="default")
        assert event["involvedObject"] == {
            "kind": "Node",
            "name": "node1",
            "uid": "n-1",
            "apiVersion": "v1",
        }
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest.mark.looptime
async def test_recording_never_blocks_or_raises_even_when_the_apiserver_is_gone(
    refusing_url: str,
) -> None:
    async with ApiClient(server=refusing_url) as client:
        recorder = EventRecorder(client, component="c", host="h", max_pending=100)
        obj = {"kind": "Pod", "metadata": {"name": "p", "namespace": "default"}}
        for i in range(1000):  # no task is even running: recording is just a queue put
            recorder.event(obj, "Normal", "R", f"message {i}")
        task = recorder.start()
        await recorder.flush()  # every write fails and is dropped after its retries
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert recorder.written == 0
