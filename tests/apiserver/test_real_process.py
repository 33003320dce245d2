"""The real ``kubelite apiserver`` process: durability across ``kill -9``, watch resumption, and
the official ``kubernetes`` Python client working against it unmodified."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import aiohttp
import pytest

from kubelite.testing import ComponentProcess
from tests.apiserver.kinds import KINDS
from tests.factories import pod

pytestmark = pytest.mark.e2e

PODS = "/api/v1/namespaces/default/pods"


async def read_events(resp: aiohttp.ClientResponse, sink: list[dict[str, Any]]) -> None:
    """Append every watch event to ``sink`` until the stream ends or breaks."""
    buffer = b""
    try:
        async for chunk in resp.content.iter_any():
            buffer += chunk
            while b"\n" in buffer:
                line, _, buffer = buffer.partition(b"\n")
                if line.strip():
                    sink.append(json.loads(line))
    except (aiohttp.ClientError, ConnectionError):
        pass


async def test_kill_9_keeps_every_acknowledged_object_and_watches_resume(apiserver_process) -> None:
    server: ComponentProcess = await asyncio.to_thread(apiserver_process)
    acked: dict[str, int] = {}
    async with aiohttp.ClientSession(server.url) as session:
        async with session.get(PODS) as resp:
            start_rv = (await resp.json())["metadata"]["resourceVersion"]
        seen: list[dict[str, Any]] = []
        watch = await session.get(PODS, params={"watch": "1", "resourceVersion": start_rv})
        reader = asyncio.create_task(read_events(watch, seen))
        enough = asyncio.Event()

        async def create(i: int) -> None:
            try:
                async with session.post(PODS, json=pod(f"p{i:03d}")) as resp:
                    if resp.status == 201:
                        body = await resp.json()
                        acked[body["metadata"]["name"]] = int(body["metadata"]["resourceVersion"])
                        if len(acked) >= 40:
                            enough.set()
            except (aiohttp.ClientError, ConnectionError):
                pass  # the server died before answering: not acknowledged

        writers = [asyncio.create_task(create(i)) for i in range(150)]
        await enough.wait()
        await asyncio.to_thread(server.kill)  # SIGKILL mid-stream
        await asyncio.gather(*writers)
        await reader
        watch.close()

    await asyncio.to_thread(server.start)  # same port, same SQLite file
    async with aiohttp.ClientSession(server.url) as session:
        async with session.get(PODS) as resp:
            listed = await resp.json()
        present = {p["metadata"]["name"] for p in listed["items"]}
        assert set(acked) <= present, sorted(set(acked) - present)

        # resume the watch from the last event it delivered before the kill
        delivered = [e for e in seen if e["type"] == "ADDED"]
        last_rv = delivered[-1]["object"]["metadata"]["resourceVersion"] if delivered else start_rv
        resumed: list[dict[str, Any]] = []
        async with session.get(
            PODS, params={"watch": "1", "resourceVersion": last_rv, "timeoutSeconds": "30"}
        ) as watch2:
            missing = len(present) - len(delivered)
            buffer = b""
            while len(resumed) < missing + 1:
                if len(resumed) == missing:
                    async with session.post(PODS, json=pod("after-restart")) as resp:
                        assert resp.status == 201
                chunk = await watch2.content.readany()
                assert chunk, "watch ended early"
                buffer += chunk
                while b"\n" in buffer:
                    line, _, buffer = buffer.partition(b"\n")
                    resumed.append(json.loads(line))
    names_before = [e["object"]["metadata"]["name"] for e in delivered]
    names_after = [e["object"]["metadata"]["name"] for e in resumed]
    assert all(e["type"] == "ADDED" for e in resumed)
    assert len(names_before) + len(names_after) == len(set(names_before + names_after))  # no dups
    assert set(names_before) | set(names_after) == present | {"after-restart"}  # no gaps


async def test_official_kubernetes_client_create_list_watch(apiserver_process) -> None:
    server: ComponentProcess = await asyncio.to_thread(apiserver_process, store="memory://")
    await asyncio.to_thread(_drive_official_client, server.url)


def _drive_official_client(url: str) -> None:
    from kubernetes import client, watch

    config = client.Configuration(host=url)
    api = client.ApiClient(config)
    v1 = client.CoreV1Api(api)
    body = client.V1Pod(
        metadata=client.V1ObjectMeta(name="official", labels={"app": "demo"}),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx")]),
    )
    created = v1.create_namespaced_pod("default", body)
    assert created.metadata.uid and created.spec.restart_policy == "Always"
    assert created.status.phase == "Pending"

    listed = v1.list_namespaced_pod("default", label_selector="app=demo")
    assert [p.metadata.name for p in listed.items] == ["official"]
    assert listed.metadata.resource_version

    patched = v1.patch_namespaced_pod("official", "default", {"metadata": {"labels": {"x": "y"}}})
    assert patched.metadata.labels == {"app": "demo", "x": "y"}

    with pytest.raises(client.ApiException) as err:
        v1.read_namespaced_pod("missing", "default")
    assert err.value.status == 404

    w = watch.Watch()
    events: list[tuple[str, str]] = []
    started = threading.Event()

    def later() -> None:
        started.wait(10)
        other = client.V1Pod(
            metadata=client.V1ObjectMeta(name="second"),
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx")]),
        )
        v1.create_namespaced_pod("default", other)
        v1.delete_namespaced_pod("second", "default")

    writer = threading.Thread(target=later, name="official-client-writer")
    writer.start()
    for event in w.stream(v1.list_namespaced_pod, namespace="default", timeout_seconds=20):
        events.append((event["type"], event["object"].metadata.name))
        started.set()
        if len(events) == 3:
            w.stop()
    writer.join()
    assert events == [("ADDED", "official"), ("ADDED", "second"), ("DELETED", "second")]

    node = client.V1Node(metadata=client.V1ObjectMeta(name="node1", labels={"zz": "cxk"}))
    v1.create_node(node)
    nodes = v1.list_node(label_selector="zz=cxk")
    assert [n.metadata.name for n in nodes.items] == ["node1"]
    api.close()


async def test_every_kind_over_the_real_process(apiserver_process) -> None:
    """CRUD and a label-selected watch of each kind against ``python -m services.apiserver``."""
    server: ComponentProcess = await asyncio.to_thread(apiserver_process)
    async with aiohttp.ClientSession(server.url) as session:
        for kind, (collection, body) in sorted(KINDS.items()):
            async with session.get(collection) as resp:
                rv = (await resp.json())["metadata"]["resourceVersion"]
            watch = await session.get(
                collection,
                params={"watch": "1", "resourceVersion": rv, "labelSelector": "e2e=yes"},
            )
            labelled = json.loads(json.dumps(body))
            labelled["metadata"]["labels"] = {"e2e": "yes"}
            async with session.post(collection, json=labelled) as resp:
                assert resp.status == 201, (kind, await resp.text())
            async with session.get(f"{collection}/x") as resp:
                assert resp.status == 200 and (await resp.json())["kind"] == kind
            async with session.patch(
                f"{collection}/x",
                data=b'{"metadata":{"labels":{"e2e":"no"}}}',
                headers={"Content-Type": "application/merge-patch+json"},
            ) as resp:
                assert resp.status == 200, (kind, await resp.text())
            events: list[dict[str, Any]] = []
            buffer = b""
            while len(events) < 2:
                chunk = await watch.content.readany()
                assert chunk, kind
                buffer += chunk
                while b"\n" in buffer:
                    line, _, buffer = buffer.partition(b"\n")
                    events.append(json.loads(line))
            watch.close()
            # created with the label (ADDED), then it stopped matching (DELETED)
            assert [e["type"] for e in events] == ["ADDED", "DELETED"], kind
            async with session.delete(f"{collection}/x") as resp:
                assert resp.status == 200, (kind, await resp.text())
