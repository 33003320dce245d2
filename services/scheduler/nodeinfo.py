"""What the scheduler knows about a pod and a node, precomputed once per object version.

Why: a scheduling cycle asks the same questions of hundreds of nodes — how much cpu is left,
which taints, which labels — and a burst asks them for thousands of pods. Parsing quantities and
walking nested JSON on every question would dominate the cost, so ``PodInfo`` and ``NodeInfo``
are built once at the informer edge (from the wire JSON or an ``api`` model) and hold plain
ints, dicts and tuples the plugins read directly.

``NodeInfo`` also aggregates the pods on the node — bound ones from the informer and *assumed*
ones the scheduler has chosen but whose binding the watch has not confirmed yet — so resource
fit and spreading see a burst's own decisions. The aggregation is kept incrementally
(``add_pod``/``remove_pod``); ``generation`` bumps on every change.

Limits: the resources modelled are cpu, memory, ephemeral-storage, the pod count and extended
resources by name; hugepages, pod-level resources and in-place resize are not. A node without
``status.allocatable`` is taken at its ``status.capacity`` (Kubernetes would see zero) so that
hand-written Node objects are usable.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from api import quantity

__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "DEFAULT_SCHEDULER_NAME",
    "KubeObject",
    "NodeInfo",
    "PodInfo",
    "Resources",
    "Taint",
    "as_dict",
]

DEFAULT_SCHEDULER_NAME = "default-scheduler"

# kube-scheduler scores a container without requests as if it asked for 0.1 cpu and 200 MiB,
# so that many request-less pods do not all pile onto the emptiest-looking node. Filtering
# still uses the real (zero) requests.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

# The pod count Kubernetes' kubelet allows by default; used when a node declares no "pods".
_DEFAULT_MAX_PODS = 110


# Quantities are exact Fractions in ``api.quantity``, which is slow to parse; a cluster uses a
# handful of distinct strings ("100m", "128Mi"), so remember them.
cpu_millis = functools.lru_cache(maxsize=4096)(quantity.cpu_millis)
to_bytes = functools.lru_cache(maxsize=4096)(quantity.to_bytes)


class SupportsToDict(Protocol):
    """An ``api`` model (``api.meta.Model``)."""

    def to_dict(self) -> Mapping[str, Any]: ...


KubeObject = Mapping[str, Any] | SupportsToDict
"""What the scheduler is handed: Kubernetes JSON from an informer, or an ``api`` model."""


def as_dict(obj: KubeObject) -> Mapping[str, Any]:
    """Kubernetes JSON for ``obj``: a dict passes through, an ``api`` model is dumped once."""
    if isinstance(obj, Mapping):
        return obj
    to_dict = getattr(obj, "to_dict", None)
    if to_dict is None:
        raise TypeError(f"not a Kubernetes object: {type(obj).__name__}")
    return obj.to_dict()


@dataclass(slots=True)
class Resources:
    """Amounts of the resources fit and scoring compare, in integer units."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    scalar: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_list(cls, resources: Mapping[str, Any] | None) -> Resources:
        out = cls()
        for name, q in (resources or {}).items():
            out.set(name, q)
        return out

    def set(self, name: str, q: str | int | float) -> None:
        if name == "cpu":
            self.milli_cpu = cpu_millis(q)
        elif name == "memory":
            self.memory = to_bytes(q)
        elif name == "ephemeral-storage":
            self.ephemeral_storage = to_bytes(q)
        elif name != "pods":
            self.scalar[name] = to_bytes(q)

    def add(self, other: Resources, sign: int = 1) -> None:
        self.milli_cpu += sign * other.milli_cpu
        self.memory += sign * other.memory
        self.ephemeral_storage += sign * other.ephemeral_storage
        for name, v in other.scalar.items():
            self.scalar[name] = self.scalar.get(name, 0) + sign * v

    def set_max(self, other: Resources) -> None:
        self.milli_cpu = max(self.milli_cpu, other.milli_cpu)
        self.memory = max(self.memory, other.memory)
        self.ephemeral_storage = max(self.ephemeral_storage, other.ephemeral_storage)
        for name, v in other.scalar.items():
            self.scalar[name] = max(self.scalar.get(name, 0), v)

    @property
    def is_zero(self) -> bool:
        return not (
            self.milli_cpu or self.memory or self.ephemeral_storage or any(self.scalar.values())
        )


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


def _pod_requests(spec: Mapping[str, Any]) -> tuple[Resources, Resources]:
    """(requests, non-zero requests): containers summed, init containers as a max, plus overhead.

    Init containers run one after another before the app containers, so the pod needs the
    largest of them or the sum of the app containers, whichever is more — per resource.
    """
    requests = Resources()
    non_zero = Resources()
    for c in spec.get("containers") or ():
        req = (c.get("resources") or {}).get("requests") or {}
        r = Resources.from_list(req)
        requests.add(r)
        non_zero.milli_cpu += r.milli_cpu if "cpu" in req else DEFAULT_MILLI_CPU_REQUEST
        non_zero.memory += r.memory if "memory" in req else DEFAULT_MEMORY_REQUEST
    for c in spec.get("initContainers") or ():
        req = (c.get("resources") or {}).get("requests") or {}
        r = Resources.from_list(req)
        requests.set_max(r)
        non_zero.milli_cpu = max(
            non_zero.milli_cpu, r.milli_cpu if "cpu" in req else DEFAULT_MILLI_CPU_REQUEST
        )
        non_zero.memory = max(
            non_zero.memory, r.memory if "memory" in req else DEFAULT_MEMORY_REQUEST
        )
    overhead = spec.get("overhead")
    if overhead:
        o = Resources.from_list(overhead)
        requests.add(o)
        non_zero.milli_cpu += o.milli_cpu
        non_zero.memory += o.memory
    return requests, non_zero


class PodInfo:
    """A pod as the scheduler sees it: identity, constraints and requests, parsed once."""

    __slots__ = (
        "_constraint_key",
        "affinity_preferred",
        "affinity_required",
        "claims",
        "controller_uid",
        "deleting",
        "key",
        "labels",
        "name",
        "namespace",
        "node_name",
        "node_selector",
        "non_zero_requests",
        "obj",
        "phase",
        "priority",
        "requests",
        "resource_version",
        "scheduler_name",
        "tolerations",
        "uid",
    )

    def __init__(self, obj: KubeObject) -> None:
        d = as_dict(obj)
        self.obj = d
        meta = d.get("metadata") or {}
        spec = d.get("spec") or {}
        self.namespace: str = meta.get("namespace") or "default"
        self.name: str = meta.get("name") or ""
        self.key = f"{self.namespace}/{self.name}"
        self.uid: str = meta.get("uid") or ""
        self.resource_version: str = meta.get("resourceVersion") or ""
        self.labels: Mapping[str, str] = meta.get("labels") or {}
        self.deleting = bool(meta.get("deletionTimestamp"))
        self.controller_uid = ""
        for ref in meta.get("ownerReferences") or ():
            if ref.get("controller"):
                self.controller_uid = ref.get("uid") or ""
                break
        self.node_name: str = spec.get("nodeName") or ""
        self.scheduler_name: str = spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME
        self.priority: int = int(spec.get("priority") or 0)
        self.phase: str = (d.get("status") or {}).get("phase") or ""
        self.node_selector: Mapping[str, str] = spec.get("nodeSelector") or {}
        node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
        required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
        self.affinity_required: list[Mapping[str, Any]] | None = (
            list(required.get("nodeSelectorTerms") or ()) if required else None
        )
        self.affinity_preferred: list[Mapping[str, Any]] = list(
            node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
        )
        self.tolerations: list[Mapping[str, Any]] = list(spec.get("tolerations") or ())
        self.claims: tuple[str, ...] = tuple(
            str(v["persistentVolumeClaim"].get("claimName") or "")
            for v in spec.get("volumes") or ()
            if v.get("persistentVolumeClaim")
        )
        """The names of the PersistentVolumeClaims the pod's volumes use (its namespace)."""
        self.requests, self.non_zero_requests = _pod_requests(spec)
        self._constraint_key: str | None = None

    @property
    def constraint_key(self) -> str:
        """The pod's node constraints as one string: equal keys, equal node-static verdicts."""
        if self._constraint_key is None:
            self._constraint_key = json.dumps(
                [self.node_name, self.node_selector, self.affinity_required, self.tolerations],
                sort_keys=True,
                separators=(",", ":"),
            )
        return self._constraint_key

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    def __repr__(self) -> str:
        return f"PodInfo({self.key} on {self.node_name or '-'})"


class NodeInfo:
    """A node's scheduling-relevant facts plus the pods (bound and assumed) placed on it."""

    __slots__ = (
        "allocatable",
        "allowed_pods",
        "generation",
        "labels",
        "name",
        "node",
        "non_zero_requested",
        "owner_counts",
        "pods",
        "ready",
        "requested",
        "taints",
        "unschedulable",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.node: Mapping[str, Any] | None = None
        """The Node object; None while only pods naming this node are known."""
        self.labels: Mapping[str, str] = {}
        self.unschedulable = False
        self.ready = False
        self.taints: tuple[Taint, ...] = ()
        self.allocatable = Resources()
        self.allowed_pods = 0
        self.pods: dict[str, PodInfo] = {}
        self.requested = Resources()
        self.non_zero_requested = Resources()
        self.owner_counts: dict[str, int] = {}
        """Pods on this node per controller uid, for spreading replicas."""
        self.generation = 0

    def set_node(self, obj: KubeObject) -> None:
        d = as_dict(obj)
        self.node = d
        meta = d.get("metadata") or {}
        spec = d.get("spec") or {}
        status = d.get("status") or {}
        self.labels = meta.get("labels") or {}
        self.unschedulable = bool(spec.get("unschedulable"))
        self.taints = tuple(
            Taint(t.get("key") or "", t.get("value") or "", t.get("effect") or "")
            for t in spec.get("taints") or ()
        )
        self.ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or ()
        )
        resources = status.get("allocatable") or status.get("capacity") or {}
        self.allocatable = Resources.from_list(resources)
        self.allowed_pods = (
            to_bytes(resources["pods"]) if "pods" in resources else _DEFAULT_MAX_PODS
        )
        self.generation += 1

    def add_pod(self, pod: PodInfo) -> None:
        old = self.pods.get(pod.key)
        if old is not None:
            self.remove_pod(old.key)
        self.pods[pod.key] = pod
        self.requested.add(pod.requests)
        self.non_zero_requested.add(pod.non_zero_requests)
        if pod.controller_uid:
            self.owner_counts[pod.controller_uid] = self.owner_counts.get(pod.controller_uid, 0) + 1
        self.generation += 1

    def remove_pod(self, key: str) -> PodInfo | None:
        pod = self.pods.pop(key, None)
        if pod is None:
            return None
        self.requested.add(pod.requests, -1)
        self.non_zero_requested.add(pod.non_zero_requests, -1)
        if pod.controller_uid:
            left = self.owner_counts.get(pod.controller_uid, 0) - 1
            if left > 0:
                self.owner_counts[pod.controller_uid] = left
            else:
                self.owner_counts.pop(pod.controller_uid, None)
        self.generation += 1
        return pod

    def __repr__(self) -> str:
        return f"NodeInfo({self.name}, {len(self.pods)} pods)"
