"""A watch with ``fieldSelector=spec.nodeName=X`` — what every kubelet opens — is filed in the
watch cache under node X (Kubernetes' indexed trigger): it gets the pods of X, a pod bound to X
as it is bound, X's deletions, and nothing of another node; an unfiltered watch beside it gets
everything. Real apiserver process, real HTTP watch streams.

Absence is shown by order, not by waiting: a stream is in revision order, so when a watcher's
next event after a write to node b is a later write to its own node a, b's write was not sent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp

from tests.apiserver.conftest import EventReader, summary
from tests.conftest import StartApiServer
from tests.factories import container, pod

PODS = "/api/v1/namespaces/default/pods"


@asynccontextmanager
async def watching(
    session: aiohttp.ClientSession, resource_version: str, **params: str
) -> AsyncIterator[EventReader]:
    # the server ends the stream after timeoutSeconds: a missing event fails ``take`` there
    query = {"watch": "1", "resourceVersion": resource_version, "timeoutSeconds": "30", **params}
    async with session.get("/api/v1/pods", params=query) as resp:
        assert resp.status == 200
        yield EventReader(resp)


async def test_a_node_watch_gets_its_node_pods_and_none_of_another_nodes(
    apiserver_process: StartApiServer,
) -> None:
    server = apiserver_process(store="memory://")
    async with aiohttp.ClientSession(server.url) as session:

        async def write(method: str, path: str, body: object = None) -> None:
            merge = {"Content-Type": "application/merge-patch+json"} if method == "PATCH" else {}
            async with session.request(method, path, json=body, headers=merge) as resp:
                assert resp.status in (200, 201), await resp.text()

        async with session.get(PODS) as resp:
            start = (await resp.json())["metadata"]["resourceVersion"]
        async with (
            watching(session, start, fieldSelector="spec.nodeName=a") as on_a,
            watching(session, start, fieldSelector="spec.nodeName=b") as on_b,
            watching(session, start) as everything,
        ):
            await write("POST", PODS, pod("on-b", container("c", "busybox"), nodeName="b"))
            await write("POST", PODS, pod("pending", container("c", "busybox")))
            binding = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": "pending"},
                "target": {"kind": "Node", "name": "a"},
            }
            await write("POST", f"{PODS}/pending/binding", binding)
            await write("POST", PODS, pod("on-a", container("c", "busybox"), nodeName="a"))
            await write("PATCH", f"{PODS}/on-b", {"metadata": {"labels": {"k": "v"}}})
            await write("DELETE", f"{PODS}/pending?gracePeriodSeconds=0")
            await write("DELETE", f"{PODS}/on-b?gracePeriodSeconds=0")

            seen_by_a = await on_a.take(3)
            # bound to a: it starts matching, so a's watcher is told it was ADDED, as bound
            assert summary(seen_by_a) == [
                ("ADDED", "pending"),
                ("ADDED", "on-a"),
                ("DELETED", "pending"),
            ]
            assert seen_by_a[0]["object"]["spec"]["nodeName"] == "a"
            assert summary(await on_b.take(3)) == [
                ("ADDED", "on-b"),
                ("MODIFIED", "on-b"),
                ("DELETED", "on-b"),
            ]
            assert summary(await everything.take(7)) == [
                ("ADDED", "on-b"),
                ("ADDED", "pending"),
                ("MODIFIED", "pending"),
                ("ADDED", "on-a"),
                ("MODIFIED", "on-b"),
                ("DELETED", "pending"),
                ("DELETED", "on-b"),
            ]
