"""The Node authorizer: a kubelet reads only what the pods bound to its node need.

Why: every kubelet holds a client certificate for ``system:node:<name>`` in ``system:nodes``.
Were nodes authorized by a role alone, one stolen kubelet credential would read every Secret of
the cluster. Kubernetes' ``Node`` authorization mode (``plugin/pkg/auth/authorizer/node``)
narrows them, and so does this module, first in the chain (``--authorization-mode=Node,RBAC``):

* a user that is not a node (``node_identity``: the ``system:node:`` prefix *and* the
  ``system:nodes`` group) gets no opinion — RBAC decides; a node user without a name after the
  prefix gets no opinion with ``unknown node for user "..."``;
* ``secrets`` and ``configmaps``: get, list and watch of one named object (``metadata.name``
  field selector for list/watch) in a namespace, only when a pod bound to the node references
  it — volumes (``secret``, ``configMap``, ``projected``, any source's ``secretRef`` /
  ``nodePublishSecretRef``), ``env`` ``valueFrom``, ``envFrom``, ``imagePullSecrets``, in
  every container, init container and ephemeral container;
* ``persistentvolumeclaims``: reads of a claim a bound pod mounts (``persistentVolumeClaim``
  or an ``ephemeral`` volume's ``<pod>-<volume>`` claim), update/patch of its ``status``;
  ``persistentvolumes``: reads of the volume bound to such a claim (its ``spec.claimRef``).
  Kubernetes allows only *get* of these two; kubelite's kubelet watches them by name as it
  watches Secrets and ConfigMaps (``services/kubelet/object_cache.py``), so list and watch of
  one named object are allowed too;
* ``serviceaccounts/token``: create for the service account of a bound pod (NodeRestriction
  then checks the token is bound to such a pod);
* ``leases`` in ``coordination.k8s.io``: get, create, update, patch, delete in
  ``kube-node-lease`` of the Lease named as the node (create is left to NodeRestriction, which
  sees the name);
* everything else: the static ``system:node`` rules (``bootstrap_policy.NODE_RULES``) — pods,
  nodes, services, endpoints, events, reviews — with NodeRestriction admission narrowing the
  writes to the node's own objects.

A refusal is a NO_OPINION with Kubernetes' reason (``no relationship found between node 'n1'
and this object``), so RBAC may still allow the request (a binding an administrator made).

Where the relationships come from: the apiserver's own watch caches of pods and volumes
— never the store, never per request. The index (node -> the objects its pods reference) is
rebuilt, like RBAC's, only when a request needs it and one of those caches moved since it was
built (decoding only the pods that changed since: the cache holds them as JSON), so a pod bound a moment ago grants its node access from the moment its write is in the
cache.

Not done (Kubernetes does): ``AuthorizeNodeWithSelectors`` (a node may still list every pod and
node, as Kubernetes allowed before 1.32); the edge from a volume to the Secrets its source names;
ResourceClaims, VolumeAttachments, CSINodes and ResourceSlices (kubelite serves none of them).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from services.apiserver.bootstrap_policy import NODE_RULES
from services.apiserver.identity import Decision, RequestAttributes, UserInfo
from services.apiserver.predicate import Predicate
from services.apiserver.rbac import Rule, rule_allows
from services.apiserver.watchcache import CompactObject, WatchCache

__all__ = [
    "NODES_GROUP",
    "NODE_LEASE_NAMESPACE",
    "NodeAuthorizer",
    "NodeCaches",
    "node_identity",
    "pod_references",
]

Obj = dict[str, Any]

NODES_GROUP = "system:nodes"
NODE_USER_PREFIX = "system:node:"
NODE_LEASE_NAMESPACE = "kube-node-lease"

SECRET, CONFIGMAP, CLAIM, VOLUME, SERVICE_ACCOUNT = (
    "secret",
    "configmap",
    "persistentvolumeclaim",
    "persistentvolume",
    "serviceaccount",
)
"""Vertex types, as Kubernetes' graph names them (its messages print them)."""


def node_identity(user: UserInfo) -> tuple[str, bool]:
    """``(node name, is a node)`` — Kubernetes' ``NodeIdentifier``: a node is a member of
    ``system:nodes`` whose name starts with ``system:node:``; its name may still be empty."""
    if NODES_GROUP not in user.groups or not user.name.startswith(NODE_USER_PREFIX):
        return "", False
    return user.name.removeprefix(NODE_USER_PREFIX), True


# -- what a pod references ---------------------------------------------------------------------


def _named(ref: Any, key: str = "name") -> str:
    return str(ref.get(key) or "") if isinstance(ref, dict) else ""


def _containers(spec: Obj) -> Iterator[Obj]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(key) or []:
            if isinstance(container, dict):
                yield container


def _env_references(container: Obj) -> Iterator[tuple[str, str]]:
    for env in container.get("env") or []:
        source = (env or {}).get("valueFrom") or {}
        if name := _named(source.get("secretKeyRef")):
            yield SECRET, name
        if name := _named(source.get("configMapKeyRef")):
            yield CONFIGMAP, name
    for env_from in container.get("envFrom") or []:
        if name := _named((env_from or {}).get("secretRef")):
            yield SECRET, name
        if name := _named((env_from or {}).get("configMapRef")):
            yield CONFIGMAP, name


def _volume_references(pod_name: str, volume: Obj) -> Iterator[tuple[str, str]]:
    if name := _named(volume.get("secret"), "secretName"):
        yield SECRET, name
    if name := _named(volume.get("configMap")):
        yield CONFIGMAP, name
    for source in (volume.get("projected") or {}).get("sources") or []:
        if name := _named((source or {}).get("secret")):
            yield SECRET, name
        if name := _named((source or {}).get("configMap")):
            yield CONFIGMAP, name
    if name := _named(volume.get("persistentVolumeClaim"), "claimName"):
        yield CLAIM, name
    if volume.get("ephemeral") is not None:
        yield CLAIM, f"{pod_name}-{volume.get('name')}"
    for source in volume.values():  # rbd, cephfs, csi, flexVolume ...: the secret they log in with
        if isinstance(source, dict):
            for key in ("secretRef", "nodePublishSecretRef"):
                if name := _named(source.get(key)):
                    yield SECRET, name


def pod_references(pod: Obj) -> set[tuple[str, str]]:
    """``(vertex type, name)`` of every namespaced object ``pod`` references (its namespace)."""
    spec = pod.get("spec") or {}
    pod_name = str((pod.get("metadata") or {}).get("name") or "")
    refs: set[tuple[str, str]] = set()
    account = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    refs.add((SERVICE_ACCOUNT, str(account)))
    for secret in spec.get("imagePullSecrets") or []:
        if name := _named(secret):
            refs.add((SECRET, name))
    for container in _containers(spec):
        refs.update(_env_references(container))
    for volume in spec.get("volumes") or []:
        if isinstance(volume, dict):
            refs.update(_volume_references(pod_name, volume))
    return refs


# -- the index ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeCaches:
    """The watch caches the relationships are read from."""

    pods: WatchCache
    volumes: WatchCache

    def revisions(self) -> tuple[int, int]:
        return (self.pods.revision, self.volumes.revision)


Edge = tuple[str, str, str, str]
"""``(node, vertex type, namespace, name)``: the node may read that object."""


def _objects(cache: WatchCache) -> Iterator[Obj]:
    events, _ = cache.snapshot(Predicate(rt=cache.rt))
    return (event.obj for event in events)


@dataclass(frozen=True, slots=True)
class _BoundPod:
    """What one version of a bound pod adds to the index, worked out once per version: the
    watch cache keeps pods as JSON, and a rebuild decodes only the pods that changed."""

    state: CompactObject
    node: str
    namespace: str
    references: frozenset[tuple[str, str]]


class _BoundPods:
    """The bound pods of the pod cache, each remembered until its cached state changes."""

    def __init__(self, cache: WatchCache) -> None:
        self._cache = cache
        self._known: dict[str, _BoundPod] = {}

    def current(self) -> Iterator[_BoundPod]:
        events, _ = self._cache.snapshot(Predicate(rt=self._cache.rt))
        known: dict[str, _BoundPod] = {}
        for event in events:
            state = event.current
            node = state.fields.get("spec.nodeName")
            if not node:
                continue
            pod = self._known.get(event.key)
            if pod is None or pod.state is not state:
                references = frozenset(pod_references(state.decoded()))
                pod = _BoundPod(state, node, state.namespace, references)
            known[event.key] = pod
        self._known = known
        return iter(known.values())


def _build(pods: _BoundPods, volumes: WatchCache) -> frozenset[Edge]:
    volume_of: dict[tuple[str, str], str] = {}  # the claim a volume is bound to, by its claimRef
    for pv in _objects(volumes):
        ref = (pv.get("spec") or {}).get("claimRef") or {}
        if ref.get("name"):
            claim = (str(ref.get("namespace") or ""), str(ref["name"]))
            volume_of[claim] = str((pv.get("metadata") or {}).get("name") or "")
    edges: set[Edge] = set()
    for pod in pods.current():
        for kind, name in pod.references:
            edges.add((pod.node, kind, pod.namespace, name))
            volume = volume_of.get((pod.namespace, name)) if kind == CLAIM else None
            if volume:
                edges.add((pod.node, VOLUME, "", volume))
    return frozenset(edges)


# -- the authorizer ----------------------------------------------------------------------------

_NODE_RULES = tuple(Rule.from_dict(rule) for rule in NODE_RULES)
_READ = ("get", "list", "watch")
_LEASE_VERBS = ("get", "create", "update", "patch", "delete")

NO_OPINION = Decision.NO_OPINION
ALLOW = (Decision.ALLOW, "")


class NodeAuthorizer:
    """``Authorizer`` for node users (see the module docstring); no opinion on anyone else."""

    def __init__(self, caches: NodeCaches) -> None:
        self._caches = caches
        self._pods = _BoundPods(caches.pods)
        self._built_at: tuple[int, int] | None = None
        self._edges: frozenset[Edge] = frozenset()

    def _related(self, node: str, kind: str, namespace: str, name: str) -> bool:
        revisions = self._caches.revisions()
        if revisions != self._built_at:
            self._edges = _build(self._pods, self._caches.volumes)
            self._built_at = revisions
        return (node, kind, namespace, name) in self._edges

    async def authorize(self, attrs: RequestAttributes) -> tuple[Decision, str]:
        node, is_node = node_identity(attrs.user)
        if not is_node:
            return NO_OPINION, ""
        if not node:
            return NO_OPINION, f'unknown node for user "{attrs.user.name}"'
        if attrs.resource_request:
            decided = self._subdivided(node, attrs)
            if decided is not None:
                return decided
        if any(rule_allows(rule, attrs) for rule in _NODE_RULES):
            return ALLOW
        return NO_OPINION, ""

    def _subdivided(self, node: str, attrs: RequestAttributes) -> tuple[Decision, str] | None:
        """The decision for the resources the graph guards; None for the rest."""
        match attrs.api_group, attrs.resource:
            case "", "secrets":
                return self._read_namespaced(node, SECRET, attrs)
            case "", "configmaps":
                return self._read_namespaced(node, CONFIGMAP, attrs)
            case "", "persistentvolumeclaims":
                if attrs.subresource == "status":
                    return self._status_update(node, CLAIM, attrs)
                return self._read_namespaced(node, CLAIM, attrs)
            case "", "persistentvolumes":
                return self._read_named(node, VOLUME, attrs)
            case "", "serviceaccounts":
                return self._create_token(node, attrs)
            case "coordination.k8s.io", "leases":
                return _lease(node, attrs)
        return None

    def _read_namespaced(
        self, node: str, kind: str, attrs: RequestAttributes
    ) -> tuple[Decision, str]:
        if attrs.verb in _READ and not attrs.subresource and not attrs.namespace:
            return NO_OPINION, "can only read namespaced object of this type"
        return self._read_named(node, kind, attrs)

    def _read_named(self, node: str, kind: str, attrs: RequestAttributes) -> tuple[Decision, str]:
        if attrs.verb not in _READ:
            return NO_OPINION, "can only read resources of this type"
        if attrs.subresource:
            return NO_OPINION, "cannot read subresource"
        return self._path(node, kind, attrs)

    def _status_update(
        self, node: str, kind: str, attrs: RequestAttributes
    ) -> tuple[Decision, str]:
        if attrs.verb not in ("update", "patch"):
            return NO_OPINION, "can only get/update/patch this type"
        return self._path(node, kind, attrs)

    def _create_token(self, node: str, attrs: RequestAttributes) -> tuple[Decision, str]:
        if attrs.verb != "create" or not attrs.name:
            return NO_OPINION, "can only create tokens for individual service accounts"
        if attrs.subresource != "token":
            return NO_OPINION, "can only create token subresource of serviceaccount"
        return self._path(node, SERVICE_ACCOUNT, attrs)

    def _path(self, node: str, kind: str, attrs: RequestAttributes) -> tuple[Decision, str]:
        if not attrs.name:
            return NO_OPINION, "No Object name found"
        if self._related(node, kind, attrs.namespace, attrs.name):
            return ALLOW
        return NO_OPINION, f"no relationship found between node '{node}' and this object"


def _lease(node: str, attrs: RequestAttributes) -> tuple[Decision, str]:
    if attrs.verb not in _LEASE_VERBS:
        return NO_OPINION, "can only get, create, update, patch, or delete a node lease"
    if attrs.namespace != NODE_LEASE_NAMESPACE:
        return (
            NO_OPINION,
            f'can only access leases in the "{NODE_LEASE_NAMESPACE}" system namespace',
        )
    if attrs.verb != "create" and attrs.name != node:
        return NO_OPINION, "can only access node lease with the same name as the requesting node"
    return ALLOW
