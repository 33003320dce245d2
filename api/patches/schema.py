"""Patch metadata for strategic merge patch: which lists merge, and by which key.

Upstream reads this from Go struct tags (``patchStrategy:"merge" patchMergeKey:"name"`` in
``api/core/v1/types.go`` and friends). Here it is data: one table per API type, written as
JSON paths relative to that type, composed per kind into a tree of ``PatchMeta`` nodes.

A path is a dotted list of field names; ``[]`` after a field marks a list, and the segments
after it describe the fields of each list item (``containers[].ports``). A value is the Go tag's
strategy and the merge key:

* ``"merge"`` with a key: a list of objects merged item by item on that key;
* ``"merge"`` without a key: a list of scalars kept as a set (``finalizers``, ``podCIDRs``);
* ``"merge,retainKeys"``: as ``merge``, and the items honour ``$retainKeys`` (volume sources);
* ``"replace"``: an object replaced wholesale rather than merged.

Everything absent from the tables follows the default: objects merge recursively, lists are
atomic (the patch's list replaces the live one) — so ``tolerations``, ``command``, ``args``,
node ``taints`` (no patch strategy upstream) are replaced whole. A kind without a table gets
only the ``ObjectMeta`` rules under ``metadata``.

Limits: the tables cover the kinds kubelite serves and their usual neighbours (the Kubernetes
1.32 tags); a field upstream added later, or a CRD, falls back to the default rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from types import MappingProxyType

__all__ = ["KINDS", "PatchMeta", "for_kind"]


@dataclass(frozen=True, slots=True)
class PatchMeta:
    """How one field merges; ``fields`` describe its value's fields (or each list item's)."""

    strategy: str = ""
    merge_key: str | None = None
    retain_keys: bool = False
    fields: Mapping[str, PatchMeta] = field(default_factory=lambda: _NO_FIELDS)

    @property
    def merges(self) -> bool:
        """True for a list merged item by item (or as a set of scalars)."""
        return self.strategy == "merge"

    @property
    def replaces(self) -> bool:
        """True for an object replaced wholesale by the patch."""
        return self.strategy == "replace"

    def child(self, name: str) -> PatchMeta:
        """The metadata of field ``name``; the default rules when the table says nothing."""
        return self.fields.get(name, DEFAULT)


_NO_FIELDS: Mapping[str, PatchMeta] = MappingProxyType({})
DEFAULT = PatchMeta()
"""No metadata: objects merge recursively, lists are replaced atomically."""

Table = Mapping[str, tuple[str, str | None]]

# --- per-type tables (paths relative to the type) -------------------------------------------

OBJECT_META: Table = {
    "ownerReferences": ("merge", "uid"),
    "finalizers": ("merge", None),
}

CONTAINER: Table = {
    "ports": ("merge", "containerPort"),
    "env": ("merge", "name"),
    "volumeMounts": ("merge", "mountPath"),
    "volumeDevices": ("merge", "devicePath"),
}

POD_SPEC: Table = {
    "volumes": ("merge,retainKeys", "name"),
    "initContainers": ("merge", "name"),
    "containers": ("merge", "name"),
    "ephemeralContainers": ("merge", "name"),
    "imagePullSecrets": ("merge", "name"),
    "hostAliases": ("merge", "ip"),
    "topologySpreadConstraints": ("merge", "topologyKey"),
    "schedulingGates": ("merge", "name"),
    "resourceClaims": ("merge,retainKeys", "name"),
}

POD_STATUS: Table = {
    "conditions": ("merge", "type"),
    "podIPs": ("merge", "ip"),
    "hostIPs": ("merge", "ip"),
    "resourceClaimStatuses": ("merge,retainKeys", "name"),
}

CONDITIONS_BY_TYPE: Table = {"conditions": ("merge", "type")}

NODE_SPEC: Table = {"podCIDRs": ("merge", None)}

NODE_STATUS: Table = {
    "conditions": ("merge", "type"),
    "addresses": ("merge", "type"),
}

SERVICE_SPEC: Table = {"ports": ("merge", "port")}


def _under(prefix: str, table: Table) -> dict[str, tuple[str, str | None]]:
    return {f"{prefix}.{path}": rule for path, rule in table.items()}


def _pod_spec(prefix: str) -> dict[str, tuple[str, str | None]]:
    rules = _under(prefix, POD_SPEC)
    for containers in ("initContainers", "containers", "ephemeralContainers"):
        rules |= _under(f"{prefix}.{containers}[]", CONTAINER)
    return rules


def _pod_template(prefix: str) -> dict[str, tuple[str, str | None]]:
    return _under(f"{prefix}.metadata", OBJECT_META) | _pod_spec(f"{prefix}.spec")


_META = _under("metadata", OBJECT_META)
_WORKLOAD = _META | _pod_template("spec.template") | _under("status", CONDITIONS_BY_TYPE)

KINDS: Mapping[str, Table] = MappingProxyType(
    {
        "Pod": _META | _pod_spec("spec") | _under("status", POD_STATUS),
        "PodTemplate": _META | _pod_template("template"),
        "ReplicationController": _WORKLOAD,
        "ReplicaSet": _WORKLOAD,
        "Deployment": _WORKLOAD,
        "StatefulSet": _WORKLOAD,
        "DaemonSet": _WORKLOAD,
        "Job": _WORKLOAD,
        "CronJob": _META | _pod_template("spec.jobTemplate.spec.template"),
        "Node": _META | _under("spec", NODE_SPEC) | _under("status", NODE_STATUS),
        "Namespace": _META | _under("status", CONDITIONS_BY_TYPE),
        "Service": _META | _under("spec", SERVICE_SPEC) | _under("status", CONDITIONS_BY_TYPE),
        "Lease": _META,
        "Event": _META,
        "ConfigMap": _META,
        "Secret": _META,
    }
)
"""Every kind with known patch metadata, as (path -> (strategy, merge key)) tables."""


class _Builder:
    """A mutable node used while compiling a table into frozen ``PatchMeta`` trees."""

    __slots__ = ("fields", "is_list", "rule")

    def __init__(self) -> None:
        self.rule: tuple[str, str | None] | None = None
        self.is_list = False
        self.fields: dict[str, _Builder] = {}

    def freeze(self) -> PatchMeta:
        strategy, merge_key = self.rule or ("", None)
        parts = {p.strip() for p in strategy.split(",") if p.strip()}
        unknown = parts - {"merge", "replace", "retainKeys"}
        if unknown:
            raise ValueError(f"unknown patch strategy {sorted(unknown)}")
        fields = MappingProxyType({k: b.freeze() for k, b in self.fields.items()})
        return PatchMeta(
            strategy="merge" if "merge" in parts else "replace" if "replace" in parts else "",
            merge_key=merge_key,
            retain_keys="retainKeys" in parts,
            fields=fields if fields else _NO_FIELDS,
        )


def compile_table(table: Table) -> PatchMeta:
    """Turn a (path -> rule) table into the tree ``for_kind`` returns (exposed for tests)."""
    root = _Builder()
    for path, rule in table.items():
        node = root
        for segment in path.split("."):
            name = segment.removesuffix("[]")
            node = node.fields.setdefault(name, _Builder())
            node.is_list = node.is_list or segment.endswith("[]")
        if node.rule is not None and node.rule != rule:
            raise ValueError(f"conflicting rules for {path}: {node.rule} vs {rule}")
        node.rule = rule
    return root.freeze()


@cache
def for_kind(kind: str) -> PatchMeta:
    """The patch metadata of a whole object of ``kind`` (ObjectMeta rules only if unknown)."""
    return compile_table(KINDS.get(kind, _META))
