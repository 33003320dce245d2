"""What the scheduler's e2e tests do to and observe in a cluster, through the real API.

``Cluster`` wraps an ``ApiClient`` with the few writes the tests need (plain Ready nodes, pods,
labels; claims and volumes, and binding a claim as the PV controller would) and a pods + events +
claims watch (``client.informer.Informer``) that tests *await*:
``await cluster.until(lambda: ..., within=...)`` re-checks its condition on every watch event,
never on a timer (``kubelite.testing.waiting.Changes``), and fails with a description of what
it saw if the time runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from api.registry import REGISTRY
from client.informer import Informer
from client.rest import ApiClient
from kubelite.testing.waiting import Changes
from tests.factories import node, persistent_volume, persistent_volume_claim, sched_pod

PODS = REGISTRY.by_kind("", "Pod")
NODES = REGISTRY.by_kind("", "Node")
EVENTS = REGISTRY.by_kind("", "Event")
CLAIMS = REGISTRY.by_kind("", "PersistentVolumeClaim")
VOLUMES = REGISTRY.by_kind("", "PersistentVolume")
CLASSES = REGISTRY.by_kind("storage.k8s.io", "StorageClass")
assert PODS and NODES and EVENTS and CLAIMS and VOLUMES and CLASSES


class Cluster:
    def __init__(self, client: ApiClient) -> None:
        self.client = client
        self.pods = Informer(client, PODS, name="test pods")
        self.events = Informer(client, EVENTS, name="test events")
        self.claims = Informer(client, CLAIMS, name="test claims")
        self.node_history: dict[str, list[str]] = {}
        """Pod key -> every distinct spec.nodeName it had, in order (to see re-bindings)."""
        self.changes = Changes(
            self.pods, self.events, self.claims, describe=lambda: f"pods: {self.summary()}"
        )
        self.pods.add_handler(
            on_add=lambda o: self._saw(o),
            on_update=lambda _o, n: self._saw(n),
            on_delete=lambda o: self._saw(o),
        )
        self._tasks: list[asyncio.Task[None]] = []

    def _saw(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        node_name = (pod.get("spec") or {}).get("nodeName") or ""
        history = self.node_history.setdefault(key, [])
        if node_name and (not history or history[-1] != node_name):
            history.append(node_name)

    async def start(self) -> None:
        informers = (self.pods, self.events, self.claims)
        self._tasks = [informer.start() for informer in informers]
        await asyncio.gather(*(informer.wait_synced() for informer in informers))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def until(self, condition: Callable[[], bool], *, within: float, what: str) -> None:
        await self.changes.until(condition, what=what, within=within)

    # ---- reads -----------------------------------------------------------------------------

    def pod(self, name: str, namespace: str = "default") -> dict[str, Any] | None:
        return self.pods.get(f"{namespace}/{name}")

    def node_of(self, name: str, namespace: str = "default") -> str:
        p = self.pod(name, namespace)
        return ((p or {}).get("spec") or {}).get("nodeName") or ""

    def bound(self) -> dict[str, str]:
        return {
            f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["spec"]["nodeName"]
            for p in self.pods.list()
            if (p.get("spec") or {}).get("nodeName")
        }

    def pod_events(self, name: str, reason: str | None = None) -> list[dict[str, Any]]:
        return [
            e
            for e in self.events.list()
            if (e.get("involvedObject") or {}).get("name") == name
            and (e.get("involvedObject") or {}).get("kind") == "Pod"
            and (reason is None or e.get("reason") == reason)
        ]

    def claim(self, name: str, namespace: str = "default") -> dict[str, Any] | None:
        return self.claims.get(f"{namespace}/{name}")

    def condition(self, name: str, type_: str) -> dict[str, Any] | None:
        for c in ((self.pod(name) or {}).get("status") or {}).get("conditions") or ():
            if c.get("type") == type_:
                return dict(c)
        return None

    def summary(self) -> str:
        pods = sorted(self.pods.list(), key=lambda p: p["metadata"]["name"])
        shown = [
            f"{p['metadata']['name']}@{(p.get('spec') or {}).get('nodeName') or '-'}"
            for p in pods[:30]
        ]
        return f"{len(pods)} pods: {', '.join(shown)}{' ...' if len(pods) > 30 else ''}"

    # ---- writes ----------------------------------------------------------------------------

    async def add_node(self, name: str, **kw: Any) -> None:
        await self.client.create(NODES, node(name, **kw))

    async def label_node(self, name: str, labels: dict[str, str]) -> None:
        await self.client.patch(NODES, name, {"metadata": {"labels": labels}})

    async def add_pod(self, name: str, **kw: Any) -> None:
        obj = sched_pod(name, **kw)
        del obj["metadata"]["uid"]  # the server assigns it
        await self.client.create(PODS, obj, namespace="default")

    async def add_claim(self, name: str, **kw: Any) -> None:
        await self.client.create(CLAIMS, persistent_volume_claim(name, **kw), namespace="default")

    async def add_volume(self, name: str, **kw: Any) -> None:
        await self.client.create(VOLUMES, persistent_volume(name, **kw))

    async def add_class(self, obj: dict[str, Any]) -> None:
        await self.client.create(CLASSES, obj)

    async def bind_claim(self, name: str, volume: str) -> None:
        """What the PV controller does: the volume points at the claim, the claim at the
        volume, and both say Bound."""
        claim = await self.client.get(CLAIMS, name, namespace="default")
        pv = await self.client.get(VOLUMES, volume)
        pv["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": "default",
                                  "name": name, "uid": claim["metadata"]["uid"]}  # fmt: skip
        pv = await self.client.update(VOLUMES, pv)
        pv["status"] = {"phase": "Bound"}
        await self.client.update_status(VOLUMES, pv)
        claim["spec"]["volumeName"] = volume
        claim = await self.client.update(CLAIMS, claim)
        claim["status"] = {"phase": "Bound", "accessModes": claim["spec"]["accessModes"],
                           "capacity": pv["spec"]["capacity"]}  # fmt: skip
        await self.client.update_status(CLAIMS, claim)

    async def add_pods(self, names: list[str], *, concurrency: int = 16, **kw: Any) -> None:
        slots = asyncio.Semaphore(concurrency)

        async def one(name: str) -> None:
            async with slots:
                await self.add_pod(name, **kw)

        await asyncio.gather(*(one(n) for n in names))


@contextlib.asynccontextmanager
async def cluster_at(server: str) -> AsyncIterator[Cluster]:
    async with ApiClient(server=server) as client:
        cluster = Cluster(client)
        await cluster.start()
        try:
            yield cluster
        finally:
            await cluster.stop()
