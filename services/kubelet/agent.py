"""One node's kubelet: the pods bound to it, watched, each handed to its own worker.

Why: this is the seed's steps 11–13 — the kubelet list-watches the pods bound to its node
(``fieldSelector=spec.nodeName=<node>``, through ``client.informer``), starts their containers
and reports back. ``NodeKubelet`` wires the pieces of one node together:

* ``NodeAgent`` (``node_status.py``): registration, Lease, node status;
* an ``Informer`` on the node's pods whose handlers only route objects to workers (never block);
* a ``PodWorker`` per pod uid (``pod_worker.py``), created on the first sight of a pod and
  finished when the pod is gone; a pod deleted and re-created under the same name is a new uid,
  hence a new worker;
* an ``ObjectCache`` (``object_cache.py``): one watch per ConfigMap, Secret, PVC and PV the
  node's pods reference, each change poking the pods that reference it; and where their volumes
  live (``volumes.VolumeHost``): under the process runtime's state dir — the kubelet's
  ``--state-dir`` — or nowhere for the sim runtime, whose pods still have their references
  resolved and their errors reported but get no files; a ``TokenManager``
  (``token_manager.py``): the service-account tokens of projected volumes;
* once the informer has synced, **orphan cleanup**: pods the runtime still holds (re-adopted from
  ``--state-dir``) that are no longer bound to this node were deleted while the kubelet was away;
  their containers are stopped, their volumes torn down and their sandboxes removed. Pods still bound are re-adopted by
  their workers, processes untouched.

The status manager is shared (one per process), and a sim kubelet hosting many nodes passes
one shared pod informer (``spec.nodeName!=``) whose handlers the process routes to each node's
``on_pod``/``on_delete`` — one watch for a thousand nodes, not a thousand watches. Likewise
the Services informer (``services``: every Service, for the containers' Service variables) is
the process's, run by ``KubeletService``, shared by its nodes; ``cluster_dns`` is the
``--cluster-dns``/``--cluster-domain`` pods' resolv.conf is made from.

Not provided: static pods, pod admission (resource fit is the scheduler's job here), the pod
lifecycle event generator (workers are woken by the runtime's exit futures instead).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from api.registry import REGISTRY, ResourceType
from client.cache import NODE_NAME_INDEX
from client.events import EventRecorder
from client.informer import Informer, strip_managed_fields
from client.rest import ApiClient
from services.kubelet.metrics import MeasuredRuntime
from services.kubelet.node_status import NodeAgent, NodeConfig, Pressure
from services.kubelet.object_cache import ObjectCache
from services.kubelet.pod_dns import ClusterDns
from services.kubelet.pod_worker import ORPHAN_GRACE, PodWorker, WorkerContext
from services.kubelet.runtime.base import Runtime
from services.kubelet.runtime.process import ProcessRuntime
from services.kubelet.status_manager import StatusManager
from services.kubelet.token_manager import TokenManager
from services.kubelet.volumes import VolumeHost, tear_down

__all__ = ["NodeKubelet"]

log = logging.getLogger("kubelet")

Obj = dict[str, Any]
FINISHED_MEMORY = 4096
"""How many finished pod uids to remember, so late events about them start no new worker."""
NODE_RESOLV_CONF = Path("/etc/resolv.conf")
"""The node's resolver, which a pod's ``dnsConfig`` extends."""


def _node_resolv_conf() -> str:
    try:
        return NODE_RESOLV_CONF.read_text()
    except OSError:
        return ""


def _pods() -> ResourceType:
    rt = REGISTRY.get("", "v1", "pods")
    assert rt is not None
    return rt


class NodeKubelet:
    def __init__(
        self,
        *,
        client: ApiClient,
        config: NodeConfig,
        runtime: Runtime,
        status: StatusManager,
        recorder: EventRecorder,
        pressure: Callable[[], Pressure] = lambda: {},
        lease_interval: float = 10.0,
        status_interval: float = 10.0,
        informer: Informer | None = None,
        services: Informer | None = None,
        cluster_dns: ClusterDns = ClusterDns(),
        register_gate: asyncio.Semaphore | None = None,
        heartbeat_client: ApiClient | None = None,
        heartbeat_gate: asyncio.Semaphore | None = None,
    ) -> None:
        self.client = client
        self.config = config
        self.runtime = runtime
        self.status = status
        self.recorder = recorder
        self.node = NodeAgent(
            client=client,
            config=config,
            pressure=pressure,
            lease_interval=lease_interval,
            status_interval=status_interval,
            register_gate=register_gate,
            heartbeat_client=heartbeat_client,
            heartbeat_gate=heartbeat_gate,
        )
        self._owns_informer = informer is None
        self.informer = informer or Informer(
            client,
            _pods(),
            field_selector=f"spec.nodeName={config.name}",
            name=f"pods@{config.name}",
            transform=strip_managed_fields,
        )
        self.workers: dict[str, PodWorker] = {}
        self._by_name: dict[tuple[str, str], str] = {}
        self._finished: OrderedDict[str, None] = OrderedDict()
        self.ready = asyncio.Event()
        """Set once the node is registered, the pod cache synced and orphans cleaned up."""
        self.objects = ObjectCache(client, on_change=self._poke)
        # the process runtime keeps its pods under the kubelet's --state-dir, and so do volumes
        bare = runtime.inner if isinstance(runtime, MeasuredRuntime) else runtime
        root = bare.state.root if isinstance(bare, ProcessRuntime) else None
        self.volumes = VolumeHost(
            root=root, allocatable={"cpu": config.cpu, "memory": config.memory}
        )
        self.tokens = TokenManager(client)
        self._ctx = WorkerContext(
            client=client,
            runtime=runtime,
            status=status,
            recorder=recorder,
            node_name=config.name,
            host_ip=config.internal_ip,
            objects=self.objects,
            volumes=self.volumes,
            node_resolv_conf=_node_resolv_conf(),
            cluster_dns=cluster_dns,
            services=services,
            tokens=self.tokens,
            on_exit=self._worker_finished,
        )
        if self._owns_informer:
            self.informer.add_handler(
                on_add=self.on_pod,
                on_update=lambda _old, new: self.on_pod(new),
                on_delete=self.on_delete,
            )

    # ---- informer handlers (synchronous, quick) --------------------------------------------

    def on_pod(self, pod: Obj) -> None:
        """A pod bound to this node was added or changed (called by the informer)."""
        meta = pod.get("metadata") or {}
        uid = meta.get("uid")
        if not uid or uid in self._finished:
            return
        worker = self.workers.get(uid)
        if worker is None:
            worker = PodWorker(pod=pod, ctx=self._ctx)
            self.workers[uid] = worker
            self._by_name[(meta["namespace"], meta["name"])] = uid
            worker.start()
        else:
            worker.update(pod)

    def on_delete(self, pod: Obj) -> None:
        """A pod bound to this node is gone from the API (called by the informer)."""
        uid = (pod.get("metadata") or {}).get("uid")
        worker = self.workers.get(uid) if uid else None
        if worker is not None:
            worker.removed()

    def _poke(self, uid: str) -> None:
        """An object pod ``uid`` references changed (called by its watch)."""
        worker = self.workers.get(uid)
        if worker is not None:
            worker.poke()

    def _worker_finished(self, uid: str) -> None:
        worker = self.workers.pop(uid, None)
        self._finished[uid] = None
        while len(self._finished) > FINISHED_MEMORY:
            self._finished.popitem(last=False)
        if worker is not None and self._by_name.get((worker.namespace, worker.name)) == uid:
            del self._by_name[(worker.namespace, worker.name)]

    # ---- lookups for the kubelet server ----------------------------------------------------

    def find_worker(self, *, namespace: str, name: str) -> PodWorker | None:
        uid = self._by_name.get((namespace, name))
        return self.workers.get(uid) if uid else None

    def pods(self) -> Iterator[Obj]:
        for worker in self.workers.values():
            yield worker.pod

    # ---- running ---------------------------------------------------------------------------

    async def run(self) -> None:
        name = self.config.name
        node_task = asyncio.create_task(self.node.run(), name=f"node agent {name}")
        informer_task: asyncio.Task[None] | None = None
        try:
            await self.node.registered.wait()
            if self._owns_informer:
                informer_task = self.informer.start()
            await self.informer.wait_synced()
            await self._cleanup_orphans()
            self.ready.set()
            log.info(
                "node %s: ready; running %d pod(s), watching for more", name, len(self.workers)
            )
            done, _ = await asyncio.wait(
                {node_task, *([informer_task] if informer_task else [])},
                return_when=asyncio.FIRST_COMPLETED,
            )
            for task in done:
                log.error("node %s: %s ended unexpectedly", name, task.get_name())
                task.result()
            raise RuntimeError(f"node {name}: a component stopped")
        finally:
            tasks = [node_task, *([informer_task] if informer_task else [])]
            tasks += [w.task for w in self.workers.values() if w.task is not None]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.objects.close()

    async def _cleanup_orphans(self) -> None:
        bound = {
            (p.get("metadata") or {}).get("uid")
            for p in self.informer.by_index(NODE_NAME_INDEX, self.config.name)
        }
        for uid in self.runtime.list_pod_uids():
            if uid in bound or uid in self.workers:
                continue
            records = self.runtime.list_containers(uid)
            running = [r for r in records if r.running]
            log.info(
                "node %s: pod %s was deleted while the kubelet was away; "
                "stopping its %d running container(s) and removing it",
                self.config.name,
                uid,
                len(running),
            )
            await asyncio.gather(
                *(
                    self.runtime.stop_container(r.container_id, grace_period=ORPHAN_GRACE)
                    for r in running
                )
            )
            await tear_down(self.volumes.root, uid)
            await self.runtime.remove_pod_sandbox(uid)
