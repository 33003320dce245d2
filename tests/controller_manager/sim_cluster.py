"""Stand-ins for the scheduler and the kubelets, talking to the real apiserver like they would.

Why: the controller-manager tests need pods that get scheduled, turn Running/Ready, finish
their graceful deletion, and nodes that renew their Lease — and a way to stop one "kubelet"
to watch the node-lifecycle controller react. The real scheduler and kubelet are other
engineers' components (and may not have landed); these stand-ins do only the API writes those
components would do, through the same list-watch machinery (an informer and a work queue):

* **binder**: a pending pod is bound (``pods/binding``) to the next node, round-robin, that is
  Ready, renewing and has no NoSchedule/NoExecute taint;
* **kubelet** per node: renews ``kube-node-lease/<node>`` every ``renew_every`` seconds (a
  background heartbeat — this is a simulated process, not a test waiting), posts Ready node
  status on start and on resume, marks its pods ``Running`` and ``Ready``, and completes their
  graceful deletion with a grace-0 delete;
* ``stop_kubelet(node)`` stops all of that for one node (as if the process died);
  ``resume_kubelet(node)`` brings it back.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import Any

from api.errors import AlreadyExists, Conflict, NotFound
from api.meta import now_micro_time, now_time
from client.controller import Controller
from client.informer import Informer
from client.rest import ApiClient
from client.workqueue import WorkQueue
from tests.controller_manager.harness import LEASES, NODES, PODS

Obj = dict[str, Any]


def node_body(name: str) -> Obj:
    now = now_time()
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [_ready_condition(now)],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        },
    }


def _ready_condition(now: str) -> Obj:
    return {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }


class SimCluster:
    def __init__(
        self,
        client: ApiClient,
        *,
        nodes: list[str],
        renew_every: float = 1.0,
        bind: bool = True,
        run_pods: bool = True,
    ) -> None:
        self.client = client
        self.node_names = list(nodes)
        self.renew_every = renew_every
        self.bind = bind
        self.run_pods = run_pods
        self.stopped: set[str] = set()
        self.pods = Informer(client, PODS)
        self.nodes = Informer(client, NODES)
        self.queue: WorkQueue[str] = WorkQueue(name="sim")
        self._rr = itertools.count()
        self._tasks: list[asyncio.Task[None]] = []
        self._heartbeats: dict[str, asyncio.Task[None]] = {}
        self.pods.add_handler(
            on_add=self._enqueue, on_update=lambda _o, n: self._enqueue(n), on_delete=None
        )
        self.nodes.add_handler(
            on_add=self._node_changed, on_update=lambda _o, n: self._node_changed(n)
        )

    # -- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> SimCluster:
        for name in self.node_names:
            with contextlib.suppress(AlreadyExists):
                await self.client.create(NODES, node_body(name))
            await self._renew(name)
            self._heartbeats[name] = asyncio.create_task(
                self._heartbeat(name), name=f"sim heartbeat {name}"
            )
        self._tasks += [self.pods.start(), self.nodes.start()]
        controller = Controller(name="sim", queue=self.queue, reconcile=self._reconcile, workers=4,
                                wait_for=[self.pods, self.nodes])  # fmt: skip
        self._tasks.append(asyncio.create_task(controller.run(), name="sim controller"))
        await asyncio.gather(self.pods.wait_synced(), self.nodes.wait_synced())
        return self

    async def __aexit__(self, *exc: object) -> None:
        tasks = [*self._tasks, *self._heartbeats.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def stop_kubelet(self, node: str) -> None:
        self.stopped.add(node)
        task = self._heartbeats.pop(node, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def resume_kubelet(self, node: str) -> None:
        self.stopped.discard(node)
        await self._renew(node)

        def ready(fresh: Obj) -> None:
            now = now_time()
            conditions = [
                c for c in fresh["status"].get("conditions") or [] if c["type"] != "Ready"
            ]
            fresh["status"]["conditions"] = [*conditions, _ready_condition(now)]

        await self._update(NODES, None, node, ready, subresource="status")
        self._heartbeats[node] = asyncio.create_task(
            self._heartbeat(node), name=f"sim heartbeat {node}"
        )
        for pod in self.pods.by_index("nodeName", node):
            self._enqueue(pod)

    # -- heartbeats -----------------------------------------------------------------------

    async def _heartbeat(self, node: str) -> None:
        while True:
            await asyncio.sleep(self.renew_every)  # the simulated kubelet's own period
            with contextlib.suppress(ConnectionError, Conflict):
                await self._renew(node)

    async def _renew(self, node: str) -> None:
        now = now_micro_time()
        try:
            lease = await self.client.get(LEASES, node, namespace="kube-node-lease")
        except NotFound:
            await self.client.create(
                LEASES,
                {
                    "metadata": {"name": node, "namespace": "kube-node-lease"},
                    "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": now},
                },
            )
            return
        lease["spec"]["renewTime"] = now
        await self.client.update(LEASES, lease)

    # -- pods -----------------------------------------------------------------------------

    def _enqueue(self, pod: Obj) -> None:
        self.queue.add(f"{pod['metadata']['namespace']}/{pod['metadata']['name']}")

    def _node_changed(self, node: Obj) -> None:
        if self._schedulable(node):
            for pod in self.pods.by_index("nodeName", ""):
                self._enqueue(pod)

    def _schedulable(self, node: Obj) -> bool:
        name = node["metadata"]["name"]
        if name in self.stopped or name not in self.node_names:
            return False
        taints = (node.get("spec") or {}).get("taints") or []
        if any(t.get("effect") in ("NoSchedule", "NoExecute") for t in taints):
            return False
        ready = next(
            (c for c in node["status"].get("conditions") or [] if c["type"] == "Ready"), None
        )
        return ready is not None and ready["status"] == "True"

    async def _reconcile(self, key: str) -> None:
        pod = self.pods.get(key)
        if pod is None:
            return
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        node = spec.get("nodeName")
        if not node:
            if self.bind and not meta.get("deletionTimestamp"):
                await self._bind(pod)
            return
        if node in self.stopped or node not in self.node_names or not self.run_pods:
            return
        if meta.get("deletionTimestamp"):
            with contextlib.suppress(NotFound, Conflict):
                await self.client.delete(
                    PODS, meta["name"], namespace=meta["namespace"], grace_period_seconds=0,
                    preconditions={"uid": meta["uid"]},
                )  # fmt: skip
            return
        if status.get("phase") != "Running":

            def running(fresh: Obj) -> None:
                now = now_time()
                fresh["status"].update(
                    {
                        "phase": "Running",
                        "hostIP": "127.0.0.1",
                        "podIP": "127.0.0.1",
                        "startTime": now,
                        "conditions": [
                            {"type": "Ready", "status": "True", "lastTransitionTime": now},
                            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                        ],
                    }
                )

            with contextlib.suppress(NotFound):
                await self._update(
                    PODS, meta["namespace"], meta["name"], running, subresource="status"
                )

    async def _bind(self, pod: Obj) -> None:
        candidates = [n for n in self.nodes.list() if self._schedulable(n)]
        if not candidates:
            return  # re-enqueued when a node turns schedulable
        candidates.sort(key=lambda n: n["metadata"]["name"])
        node = candidates[next(self._rr) % len(candidates)]["metadata"]["name"]
        meta = pod["metadata"]
        with contextlib.suppress(NotFound, Conflict):
            await self.client.bind(
                namespace=meta["namespace"], pod=meta["name"], node=node, uid=meta["uid"]
            )

    async def _update(
        self,
        rt: Any,
        namespace: str | None,
        name: str,
        change: Any,
        *,
        subresource: str | None = None,
    ) -> None:
        for _ in range(10):
            obj = await self.client.get(rt, name, namespace=namespace)
            change(obj)
            try:
                await self.client.update(rt, obj, namespace=namespace, subresource=subresource)
                return
            except Conflict:
                continue
