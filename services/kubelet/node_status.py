"""The node's presence in the cluster: registration, the Lease heartbeat, and node status.

Why: the control plane learns that a node exists from its Node object, that it is alive from its
Lease in ``kube-node-lease`` (a small write every 10 s — cheaper than a status write), and what it
offers from ``status`` (capacity, allocatable, addresses, nodeInfo, conditions, the kubelet's
port). The node-lifecycle controller turns a node NotReady when its lease stops moving.

What ``NodeAgent`` does, as the kubelet's ``kubelet_node_status.go`` and ``nodelease`` do:

* **register**: create the Node with labels (``kubernetes.io/hostname``, ``kubernetes.io/os``,
  ``kubernetes.io/arch``, plus ``--node-labels``), ``--register-with-taints`` and the annotation
  ``kubelite.io/local-path-root`` (where the local-path provisioner puts this node's volumes,
  when ``NodeConfig.local_path_root`` says; the directory is created); if it already exists,
  make sure the kubelet-owned labels and annotations are present (the rest of the object belongs
  to others: ``kubectl label``, the node controller) — retried with back-off until it works;
* **lease**: renew every ``lease_interval`` (10 s; lease duration 40 s), first renewal at a random
  point of the first interval so a thousand simulated nodes do not renew in lock-step. The Lease is
  owned by the Node (ownerReference), so deleting the node deletes it. A failed renewal is retried
  sooner (0.2 s doubling to 7 s, as client-go does);
* **status**: computed every ``status_interval`` (10 s); written (PUT ``nodes/{name}/status``,
  compare-and-swap, re-read on Conflict) when anything but heartbeat times changed, and at least
  every ``status_report_interval`` (5 min). Conditions: Ready (KubeletReady) and the three
  pressure conditions, from ``pressure()`` (host memory/disk/PIDs for the process runtime).
  A Node this agent created carried that status, so it counts as the first report (Kubernetes'
  kubelet posts it again at once; a sim kubelet registering 5,000 nodes would write 5,000
  unchanged statuses, and again in the same burst five minutes later);
* **the server's copy**: ``saw_node`` is given the Node as a watch sees it; a condition that
  differs from the last report (the node controller's ``Unknown``) makes the next sync write;
* **heartbeats** (lease renewals and status writes) go through ``heartbeat_client`` when given:
  Kubernetes' kubelet sends them on a client of their own with no rate limit and a timeout of
  ``min(status_interval, lease duration)`` (10 s; ``heartbeat_config``), so one lost request
  costs one interval, not the 60 s of an ordinary request. Both loops wait ``interval`` times
  1 to 1.04 between runs (``wait.JitterUntil``'s 0.04), so nodes started together drift apart
  instead of writing in lock-step for ever. ``heartbeat_gate`` (a sim kubelet's, shared by its
  nodes) bounds the renewals and status syncs in flight: a real kubelet sends its one node's
  heartbeats over one HTTP/2 connection, while 5,000 sim nodes without a bound opened ~3,000
  HTTP/1.1 connections, and whenever the apiserver fell behind, hundreds more at once — past
  its listen backlog, where a dropped SYN is retried after 1, 3, 7, 15, 31 s and the request
  times out. Waiting for the gate is a FIFO wait in this process instead.

Limits: no node status "images" list, no volumes, no eviction manager; a node deleted from under a
running kubelet is re-registered on the next status write (as Kubernetes does).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import os
import platform
import random
import shutil
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from api.errors import AlreadyExists, Conflict, NotFound, StatusError
from api.meta import now_micro_time, now_time
from api.registry import REGISTRY, ResourceType
from api.storage import LOCAL_PATH_ROOT_ANNOTATION
from client.backoff import Backoff, BackoffPolicy
from client.kubeconfig import ClientConfig
from client.rest import ApiClient
from services.kubelet.status_manager import same_normalized

__all__ = [
    "KUBELET_VERSION",
    "NodeAgent",
    "NodeConfig",
    "Pressure",
    "heartbeat_config",
    "host_pressure",
    "host_resources",
]

log = logging.getLogger("kubelet.node")

Obj = dict[str, Any]
KUBELET_VERSION = "v1.32.0-kubelite"
LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION = 40
REGISTER_BACKOFF = BackoffPolicy(initial=0.5, factor=2.0, cap=7.0, jitter=0.5, reset_after=60.0)
RENEW_BACKOFF = BackoffPolicy(initial=0.2, factor=2.0, cap=7.0, jitter=0.2, reset_after=60.0)
LOOP_JITTER = 0.04
"""Each loop waits its interval times 1 to 1 + this between runs (``wait.JitterUntil``)."""

Pressure = dict[str, bool]
"""``{"MemoryPressure": False, "DiskPressure": False, "PIDPressure": False}``."""


def heartbeat_config(config: ClientConfig, *, status_interval: float = 10.0) -> ClientConfig:
    """The client settings of lease renewals and status writes, as the kubelet's heartbeat
    client: no rate limit, and a timeout of ``min(status_interval, lease duration)``. A read that
    timed out is not retried by the client (up to 3 × 10 s more) but by the heartbeat loop's own
    back-off, with a fresh timestamp."""
    return config.with_options(
        qps=None, request_timeout=min(status_interval, LEASE_DURATION), read_retries=0
    )


def _rt(group: str, version: str, plural: str) -> ResourceType:
    rt = REGISTRY.get(group, version, plural)
    assert rt is not None, plural
    return rt


def host_resources() -> tuple[str, str]:
    """(cpu, memory) of this host as quantities: ``"2"``, ``"8141372Ki"``."""
    cpu = str(os.cpu_count() or 1)
    memory = "1Gi"
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    memory = f"{int(line.split()[1])}Ki"
                    break
    return cpu, memory


def host_pressure(state_dir: str) -> Pressure:
    """Kubernetes' default hard eviction thresholds, read off the host.

    memory.available < 100Mi, nodefs.available < 10%, and PIDs in use above 90% of pid_max."""
    memory = disk = pids = False
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    memory = int(line.split()[1]) * 1024 < 100 * 1024 * 1024
                    break
    with contextlib.suppress(OSError):
        usage = shutil.disk_usage(state_dir)
        disk = usage.free < usage.total * 0.10
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/sys/kernel/pid_max") as fh:
            pid_max = int(fh.read())
        in_use = sum(1 for p in os.listdir("/proc") if p.isdigit())
        pids = in_use > pid_max * 0.9
    return {"MemoryPressure": memory, "DiskPressure": disk, "PIDPressure": pids}


def _os_image() -> str:
    with contextlib.suppress(OSError):
        with open("/etc/os-release") as fh:
            for line in fh:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    return "Linux"


def _boot_id() -> str:
    with contextlib.suppress(OSError):
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip()
    return ""


def _machine_id() -> str:
    with contextlib.suppress(OSError):
        with open("/etc/machine-id") as fh:
            return fh.read().strip()
    return ""


_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm"}


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """Everything the Node object says about this node."""

    name: str
    kubelet_port: int
    runtime_version: str
    cpu: str = "1"
    memory: str = "1Gi"
    pods: int = 110
    internal_ip: str = "127.0.0.1"
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, str], ...] = ()
    pod_cidr: str | None = None
    local_path_root: str | None = None
    """Where the local-path provisioner puts this node's volumes (``<state dir>/storage``),
    published as the Node annotation ``kubelite.io/local-path-root``; None publishes nothing."""

    def own_annotations(self) -> dict[str, str]:
        """The annotations the kubelet keeps on its Node (others' annotations are left alone)."""
        if self.local_path_root is None:
            return {}
        return {LOCAL_PATH_ROOT_ANNOTATION: self.local_path_root}

    def own_labels(self) -> dict[str, str]:
        arch = _ARCH.get(platform.machine(), platform.machine())
        labels = {
            "beta.kubernetes.io/arch": arch,
            "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": arch,
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
        }
        labels.update(self.labels)
        return labels


def _condition(type_: str, ok: bool, reason: str, message: str) -> Obj:
    return {
        "type": type_,
        "status": "True" if ok else "False",
        "reason": reason,
        "message": message,
    }


_PRESSURE_TEXT = {
    "MemoryPressure": (
        ("KubeletHasInsufficientMemory", "kubelet has insufficient memory available"),
        ("KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ),
    "DiskPressure": (
        ("KubeletHasDiskPressure", "kubelet has disk pressure"),
        ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ),
    "PIDPressure": (
        ("KubeletHasInsufficientPID", "kubelet has insufficient PID available"),
        ("KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ),
}


def _stamped(desired: Obj, *, old: Mapping[str, Any]) -> Obj:
    """``desired`` with heartbeat times now and transition times kept where status is unchanged."""
    before_by_type = {c.get("type"): c for c in old.get("conditions") or []}
    now = now_time()
    status = copy.deepcopy(desired)
    for cond in status["conditions"]:
        before = before_by_type.get(cond["type"]) or {}
        cond["lastHeartbeatTime"] = now
        same = before.get("status") == cond["status"]
        cond["lastTransitionTime"] = (before.get("lastTransitionTime") if same else None) or now
    return status


class NodeAgent:
    """Registers one node and keeps its Lease and status fresh. ``run()`` until cancelled."""

    def __init__(
        self,
        *,
        client: ApiClient,
        config: NodeConfig,
        pressure: Callable[[], Pressure] = lambda: {},
        lease_interval: float = 10.0,
        status_interval: float = 10.0,
        status_report_interval: float = 300.0,
        register_gate: asyncio.Semaphore | None = None,
        heartbeat_client: ApiClient | None = None,
        heartbeat_gate: asyncio.Semaphore | None = None,
    ) -> None:
        self.client = client
        self.heartbeats = heartbeat_client or client
        """Lease renewals and status writes go through it (``heartbeat_config``)."""
        self.heartbeat_gate = heartbeat_gate or contextlib.nullcontext()
        """Bounds the heartbeats in flight when one process hosts many nodes."""
        self.register_gate = register_gate
        """Bounds concurrent registrations when one process hosts many nodes."""
        self.config = config
        self.pressure = pressure
        self.lease_interval = lease_interval
        self.status_interval = status_interval
        self.status_report_interval = status_report_interval
        self.nodes = _rt("", "v1", "nodes")
        self.leases = _rt("coordination.k8s.io", "v1", "leases")
        self.node: Obj | None = None
        self.lease: Obj | None = None
        self.registered = asyncio.Event()
        self.renewals = 0
        self.status_writes = 0
        self._last_status: Obj | None = None
        self._last_status_at: float | None = None
        self._boot_id = _boot_id()
        self._machine_id = _machine_id() or uuid.uuid5(uuid.NAMESPACE_DNS, config.name).hex
        self._kernel = platform.release()
        self._os_image = _os_image()

    # ---- the loops -------------------------------------------------------------------------

    async def run(self) -> None:
        if self.register_gate is not None:
            async with self.register_gate:
                await self.register()
        else:
            await self.register()
        lease = asyncio.create_task(self._lease_loop(), name=f"lease {self.config.name}")
        status = asyncio.create_task(self._status_loop(), name=f"node status {self.config.name}")
        try:
            done, _ = await asyncio.wait({lease, status}, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                log.error("node %s: %s ended unexpectedly", self.config.name, task.get_name())
                task.result()
        finally:
            for task in (lease, status):
                task.cancel()
            await asyncio.gather(lease, status, return_exceptions=True)

    async def _lease_loop(self) -> None:
        # spread many nodes' renewals over the interval instead of renewing all at once
        await asyncio.sleep(random.uniform(0, self.lease_interval))
        await self._every(self.lease_interval, self.renew_lease, what="lease renewal")

    async def _status_loop(self) -> None:
        await self._every(self.status_interval, self.sync_status, what="status update")

    async def _every(
        self, interval: float, step: Callable[[], Awaitable[Any]], *, what: str
    ) -> None:
        """Run ``step`` every ``interval`` (jittered); on failure back off (reset after a
        success)."""
        backoff = Backoff(RENEW_BACKOFF)
        while True:
            try:
                async with self.heartbeat_gate:
                    await step()
                backoff.reset()
                delay = interval * (1 + random.uniform(0, LOOP_JITTER))
            except (StatusError, ConnectionError) as exc:
                delay = backoff.next_delay()
                log.warning(
                    "node %s: %s failed (%s); will retry in %.1fs",
                    self.config.name,
                    what,
                    exc,
                    delay,
                )
            await asyncio.sleep(delay)

    # ---- registration ----------------------------------------------------------------------

    def _node_object(self, status: Obj) -> Obj:
        c = self.config
        spec: Obj = {}
        if c.taints:
            spec["taints"] = [dict(t) for t in c.taints]
        if c.pod_cidr:
            spec["podCIDR"] = c.pod_cidr
            spec["podCIDRs"] = [c.pod_cidr]
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": c.name,
                "labels": c.own_labels(),
                "annotations": {"node.alpha.kubernetes.io/ttl": "0", **c.own_annotations()},
            },
            "spec": spec,
            "status": _stamped(status, old={}),
        }

    async def register(self) -> Obj:
        if self.config.local_path_root is not None:
            os.makedirs(self.config.local_path_root, exist_ok=True)
        backoff = Backoff(REGISTER_BACKOFF)
        while True:
            try:
                node = await self._register_once()
                break
            except (StatusError, ConnectionError) as exc:
                delay = backoff.next_delay()
                log.warning(
                    "node %s: registration failed (%s); will retry in %.1fs",
                    self.config.name,
                    exc,
                    delay,
                )
                await asyncio.sleep(delay)
        self.node = node
        self.registered.set()
        return node

    async def _register_once(self) -> Obj:
        desired = self.desired_status()
        try:
            node = await self.client.create(self.nodes, self._node_object(desired))
        except AlreadyExists:
            pass
        else:
            log.info("node %s: registered with the apiserver", self.config.name)
            self._reported(desired)
            return node
        for _ in range(5):
            node = await self.client.get(self.nodes, self.config.name)
            meta = node.get("metadata") or {}
            labels = dict(meta.get("labels") or {})
            annotations = dict(meta.get("annotations") or {})
            wanted = {**labels, **self.config.own_labels()}
            wanted_annotations = {**annotations, **self.config.own_annotations()}
            if wanted == labels and wanted_annotations == annotations:
                log.info("node %s: already registered; taking it over", self.config.name)
                return node
            node = copy.deepcopy(node)
            node["metadata"]["labels"] = wanted
            node["metadata"]["annotations"] = wanted_annotations
            try:
                node = await self.client.update(self.nodes, node)
                log.info(
                    "node %s: already registered; labels and annotations reconciled",
                    self.config.name,
                )
                return node
            except Conflict:
                continue
        raise Conflict(f"node {self.config.name}: kept conflicting while reconciling labels")

    # ---- lease -----------------------------------------------------------------------------

    def _lease_object(self) -> Obj:
        owner = []
        if self.node is not None and self.node["metadata"].get("uid"):
            owner = [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "name": self.config.name,
                    "uid": self.node["metadata"]["uid"],
                }
            ]
        meta: Obj = {"name": self.config.name, "namespace": LEASE_NAMESPACE}
        if owner:
            meta["ownerReferences"] = owner
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": {
                "holderIdentity": self.config.name,
                "leaseDurationSeconds": LEASE_DURATION,
                "renewTime": now_micro_time(),
            },
        }

    async def renew_lease(self) -> Obj:
        """One renewal: PUT the lease we hold with a new renewTime; create it if missing."""
        for _ in range(3):
            if self.lease is None:
                try:
                    self.lease = await self.heartbeats.get(
                        self.leases, self.config.name, namespace=LEASE_NAMESPACE
                    )
                except NotFound:
                    try:
                        self.lease = await self.heartbeats.create(self.leases, self._lease_object())
                    except AlreadyExists:
                        continue
                    self.renewals += 1
                    return self.lease
            body = copy.deepcopy(self.lease)
            body["spec"] = {**(body.get("spec") or {}), **self._lease_object()["spec"]}
            try:
                self.lease = await self.heartbeats.update(self.leases, body)
            except (Conflict, NotFound):
                self.lease = None
                continue
            self.renewals += 1
            return self.lease
        raise Conflict(f"lease {self.config.name}: kept conflicting")

    # ---- status ----------------------------------------------------------------------------

    def desired_status(self) -> Obj:
        c = self.config
        pressure = self.pressure()
        conditions = []
        for type_, (bad, good) in _PRESSURE_TEXT.items():
            under = bool(pressure.get(type_))
            reason, message = bad if under else good
            conditions.append(_condition(type_, under, reason, message))
        conditions.append(
            _condition("Ready", True, "KubeletReady", "kubelet is posting ready status")
        )
        resources = {"cpu": c.cpu, "memory": c.memory, "pods": str(c.pods)}
        return {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": c.internal_ip},
                {"type": "Hostname", "address": c.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": c.kubelet_port}},
            "nodeInfo": {
                "machineID": self._machine_id,
                "systemUUID": uuid.uuid5(uuid.NAMESPACE_DNS, c.name).hex,
                "bootID": self._boot_id,
                "kernelVersion": self._kernel,
                "osImage": self._os_image,
                "containerRuntimeVersion": c.runtime_version,
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": _ARCH.get(platform.machine(), platform.machine()),
            },
        }

    def saw_node(self, node: Mapping[str, Any]) -> None:
        """The Node as the apiserver has it now (from a watch). If a condition says other than
        this agent last reported — the node-lifecycle controller marked it Unknown — the next
        status sync reports again, as Kubernetes' kubelet does by comparing its status with the
        Node it reads before every update (else the node would stay NotReady until the 5-minute
        report)."""
        if self._last_status is None:
            return
        conditions = (node.get("status") or {}).get("conditions") or []
        seen = {c.get("type"): c.get("status") for c in conditions}
        if any(seen.get(c["type"]) != c["status"] for c in self._last_status["conditions"]):
            self._last_status_at = None

    def _reported(self, status: Obj) -> None:
        """``status`` is on the server now: the next report is due when it changes, or in
        ``status_report_interval``."""
        self._last_status = status
        self._last_status_at = asyncio.get_running_loop().time()

    async def sync_status(self) -> bool:
        """Write the node status if it changed or is due; True if written."""
        loop = asyncio.get_running_loop()
        desired = self.desired_status()
        due = (
            self._last_status_at is None
            or loop.time() - self._last_status_at >= self.status_report_interval
        )
        if not due and same_normalized(desired, self._last_status or {}):
            return False
        for _ in range(5):
            if self.node is None:
                try:
                    self.node = await self.heartbeats.get(self.nodes, self.config.name)
                except NotFound:
                    await self.register()
                    continue
            body = copy.deepcopy(self.node)
            status = _stamped(desired, old=body.get("status") or {})
            body["status"] = {**(body.get("status") or {}), **status}
            try:
                self.node = await self.heartbeats.update_status(self.nodes, body)
            except Conflict:
                self.node = None
                continue
            except NotFound:
                log.warning("node %s: deleted from the API; registering again", self.config.name)
                self.node = None
                await self.register()
                continue
            self._reported(desired)
            self.status_writes += 1
            return True
        raise Conflict(f"node {self.config.name}: status kept conflicting")
