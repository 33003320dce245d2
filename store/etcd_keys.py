"""Kubernetes' key layout in etcd: where each of kubelite's store keys lives in an etcd cluster.

Why: the store contract's keys are the apiserver's own, ``/registry/<group>/<resource>/...``
(``core`` for the legacy group), the same on every backend. In etcd, kube-apiserver names a
built-in resource by its plural alone (``/registry/pods/<ns>/<name>``,
``/registry/deployments/<ns>/<name>``), keeps a few historical names (services under
``/registry/services/specs``, endpoints under ``/registry/services/endpoints``, nodes under
``/registry/minions``, replication controllers under ``/registry/controllers``), and puts custom
resources and CRDs under ``/registry/<group>/<resource>``. An etcd written by kubelite should read
like one written by Kubernetes (``etcdctl get --prefix /registry/pods``), so the etcd store
translates at its edge: ``to_etcd`` on the way in, ``from_etcd`` on the way out. The names are
those of kube-apiserver's storage-path integration test (test/integration/etcd/data.go).

What it covers: the built-in resources kubelite stores, and a few it may come to serve
(``KUBERNETES_NAMES``); every other key (custom resources, CRDs, kubelite's own allocator and
compactor keys) keeps its path, which for custom resources already is Kubernetes' layout. A
built-in kind added to kubelite belongs in the table too, or it is kept at its kubelite path.
``events.k8s.io`` Events are left out: Kubernetes stores them with core Events (one object, two
versions), which kubelite's registry would have to convert between first. Keys are translated by their first two segments
after ``/registry/``, so a listing prefix must end at a resource (``/registry/core/pods/``,
``/registry/core/pods/ns/``) or cover everything (``""``, ``/registry/``).

What it does not guarantee: a listing across resources (prefix ``""``) comes back in etcd's key
order, which is Kubernetes' order, not the contract's. A store key that would land in one of
Kubernetes' names without coming from kubelite's layout (``/registry/pods/x``) is refused: it
would read back under another name.
"""

from __future__ import annotations

from typing import Final

__all__ = ["KUBERNETES_NAMES", "LEGACY_PREFIXES", "from_etcd", "to_etcd"]

REGISTRY: Final = "/registry/"

KUBERNETES_NAMES: Final[dict[tuple[str, str], str]] = {
    ("core", "configmaps"): "configmaps",
    ("core", "limitranges"): "limitranges",
    ("core", "podtemplates"): "podtemplates",
    ("core", "resourcequotas"): "resourcequotas",
    ("core", "endpoints"): "services/endpoints",
    ("core", "events"): "events",
    ("core", "namespaces"): "namespaces",
    ("core", "nodes"): "minions",
    ("core", "persistentvolumeclaims"): "persistentvolumeclaims",
    ("core", "persistentvolumes"): "persistentvolumes",
    ("core", "pods"): "pods",
    ("core", "replicationcontrollers"): "controllers",
    ("core", "secrets"): "secrets",
    ("core", "serviceaccounts"): "serviceaccounts",
    ("core", "services"): "services/specs",
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): (
        "mutatingwebhookconfigurations"
    ),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"): (
        "validatingadmissionpolicies"
    ),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"): (
        "validatingadmissionpolicybindings"
    ),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): (
        "validatingwebhookconfigurations"
    ),
    ("apps", "controllerrevisions"): "controllerrevisions",
    ("apps", "daemonsets"): "daemonsets",
    ("apps", "deployments"): "deployments",
    ("apps", "replicasets"): "replicasets",
    ("apps", "statefulsets"): "statefulsets",
    ("autoscaling", "horizontalpodautoscalers"): "horizontalpodautoscalers",
    ("batch", "cronjobs"): "cronjobs",
    ("batch", "jobs"): "jobs",
    ("certificates.k8s.io", "certificatesigningrequests"): "certificatesigningrequests",
    ("coordination.k8s.io", "leases"): "leases",
    ("discovery.k8s.io", "endpointslices"): "endpointslices",
    ("flowcontrol.apiserver.k8s.io", "flowschemas"): "flowschemas",
    ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations"): (
        "prioritylevelconfigurations"
    ),
    ("networking.k8s.io", "ingressclasses"): "ingressclasses",
    ("networking.k8s.io", "ingresses"): "ingress",
    ("networking.k8s.io", "networkpolicies"): "networkpolicies",
    ("node.k8s.io", "runtimeclasses"): "runtimeclasses",
    ("policy", "poddisruptionbudgets"): "poddisruptionbudgets",
    ("rbac.authorization.k8s.io", "clusterrolebindings"): "clusterrolebindings",
    ("rbac.authorization.k8s.io", "clusterroles"): "clusterroles",
    ("rbac.authorization.k8s.io", "rolebindings"): "rolebindings",
    ("rbac.authorization.k8s.io", "roles"): "roles",
    ("scheduling.k8s.io", "priorityclasses"): "priorityclasses",
    ("storage.k8s.io", "csidrivers"): "csidrivers",
    ("storage.k8s.io", "csinodes"): "csinodes",
    ("storage.k8s.io", "storageclasses"): "storageclasses",
    ("storage.k8s.io", "volumeattachments"): "volumeattachments",
}
"""kubelite's (group, resource) -> the path under ``/registry/`` kube-apiserver stores it at."""

_BACK: Final = {name: f"{group}/{plural}" for (group, plural), name in KUBERNETES_NAMES.items()}
_TAKEN: Final = {name.partition("/")[0] for name in KUBERNETES_NAMES.values()}
"""First segments of Kubernetes' names: a key passed through unchanged must not start with one."""

LEGACY_PREFIXES: Final = {
    f"{REGISTRY}{group}/{plural}/": f"{REGISTRY}{name}/"
    for (group, plural), name in KUBERNETES_NAMES.items()
}
"""Where earlier kubelite versions kept each resource in etcd (its store key) -> where it
lives now: the etcd store moves keys it finds at the former on first use."""


def to_etcd(key: str) -> str:
    """The etcd key (without the store's prefix) of a store key or listing prefix."""
    if not key.startswith(REGISTRY):
        return key
    group, _, rest = key[len(REGISTRY) :].partition("/")
    plural, slash, tail = rest.partition("/")
    name = KUBERNETES_NAMES.get((group, plural)) if slash else None
    if name is not None:
        return f"{REGISTRY}{name}/{tail}"
    if group in _TAKEN and (slash or rest):
        raise ValueError(
            f"store key {key!r} is not in kubelite's /registry/<group>/<resource>/ layout "
            f"and would collide with Kubernetes' /registry/{group}/ in etcd"
        )
    return key


def from_etcd(key: str) -> str:
    """The store key of an etcd key (without the store's prefix): ``to_etcd`` undone."""
    if not key.startswith(REGISTRY):
        return key
    first, _, rest = key[len(REGISTRY) :].partition("/")
    if first not in _TAKEN:
        return key
    if first == "services":  # the one name with two segments: services/specs, services/endpoints
        second, _, rest = rest.partition("/")
        first = f"services/{second}"
    back = _BACK.get(first)
    return key if back is None else f"{REGISTRY}{back}/{rest}"
