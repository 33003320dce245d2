"""NodeRestriction admission: a kubelet writes only its own Node, its own Lease, and its pods.

Why: the Node authorizer (``node_authorizer``) lets every node write nodes, pods/status, leases
and pod deletions, because it cannot see the object a write carries. Kubernetes' NodeRestriction
admission plugin (``plugin/pkg/admission/noderestriction``) looks at it, and so does this module,
on every write by a node identity (``node_authorizer.node_identity``; other users pass):

* **nodes**: a node may create, update, patch (and delete) only the Node of its own name
  (``node "n1" is not allowed to modify node "n2"``); it may not set or change labels under
  ``node-restriction.kubernetes.io/``, nor ``kubernetes.io``/``k8s.io`` labels other than the
  kubelet's own (``kubernetes.io/hostname``, ``node.kubernetes.io/*`` ...), and on update not
  its taints;
* **pods**: ``status`` only of pods bound to it, without changing their labels; delete, and
  ``eviction``, only of pods bound to it; create only of mirror pods
  (``kubernetes.io/config.mirror``) bound to it; no other pod update;
* **leases**: only in ``kube-node-lease`` and only the one named as the node;
* **serviceaccounts/token**: only tokens bound to a pod (``boundObjectRef``, with its uid)
  scheduled on the node;
* **persistentvolumeclaims**: nothing but ``status``.

Each refusal is a 403 worded as Kubernetes' ``admission.NewForbidden``:
``pods "web-1" is forbidden: node "node1" can only update pod status for pods with
spec.nodeName set to itself``.

What it owns: ``admit`` (one write, as its operation, old and new object), ``admit_named``
(a write that names a pod it does not carry: delete, eviction — the pod is read from the watch
cache, else the store). It runs inside each write's compare-and-swap (``guaranteed_update``'s
mutate), so what it checks is the object the write replaces.

Not done: the mirror pod's owner-reference and referenced-object checks (kubelite's kubelet
makes no mirror pods: it has no static pods), the PVC status field comparison (only "status
only" is enforced), CSINodes and ResourceSlices (not served).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from api.errors import Forbidden
from api.registry import ResourceType
from services.apiserver.context import ApiContext
from services.apiserver.forbidden import forbidden_resource
from services.apiserver.identity import request_user
from services.apiserver.node_authorizer import NODE_LEASE_NAMESPACE, node_identity

__all__ = ["CREATE", "DELETE", "UPDATE", "Write", "admit", "admit_named"]

Obj = dict[str, Any]

CREATE, UPDATE, DELETE = "CREATE", "UPDATE", "DELETE"
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
NODE_RESTRICTION_LABEL_NAMESPACE = "node-restriction.kubernetes.io"
KUBELET_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "node.kubernetes.io/windows-build",
        "topology.kubernetes.io/region",
        "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
    }
)
"""Labels a kubelet may set on its own Node (``kubeletapis.IsKubeletLabel``) ..."""
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
"""... and every label in these namespaces (or their subdomains)."""


@dataclass(frozen=True, slots=True)
class Write:
    """One write as admission sees it (Kubernetes' ``admission.Attributes``)."""

    rt: ResourceType
    operation: str
    namespace: str | None
    name: str
    subresource: str = ""


def _refuse(write: Write, message: str) -> Forbidden:
    return forbidden_resource(write.rt.plural, write.rt.group, write.name, message)


def admit(request: web.Request, write: Write, *, obj: Obj | None, old: Obj | None) -> None:
    """Refuse ``write`` (403) when a node makes it and NodeRestriction forbids it."""
    node, is_node = node_identity(request_user(request))
    if not is_node:
        return
    if not node:
        raise _refuse(write, f'could not determine node from user "{request_user(request).name}"')
    match write.rt.group, write.rt.plural:
        case "", "pods":
            _admit_pod(node, write, obj=obj, old=old)
        case "", "nodes":
            _admit_node(node, write, obj=obj, old=old)
        case "coordination.k8s.io", "leases":
            _admit_lease(node, write)
        case "", "serviceaccounts" if write.subresource == "token" and write.operation == CREATE:
            _admit_token(node, write, ref=obj, pod=old)
        case "", "persistentvolumeclaims" if write.subresource != "status":
            raise _refuse(write, "may only update PVC status")


async def admit_named(request: web.Request, ctx: ApiContext, write: Write) -> None:
    """``admit`` for a write on a pod it does not carry (delete, eviction), or a token request
    bound to a pod: that pod is read (watch cache first). A pod that does not exist is left to
    the write itself to answer 404."""
    if not node_identity(request_user(request))[1]:
        return
    pod: Obj | None = None
    if write.rt.plural == "pods":
        pod = await _pod(ctx, write.namespace, write.name)
        if pod is None:
            return
    admit(request, write, obj=None, old=pod)


async def _pod(ctx: ApiContext, namespace: str | None, name: str) -> Obj | None:
    return await ctx.cached_get(ctx.resource("", "pods"), namespace, name)


def _node_name(pod: Obj | None) -> str:
    return str(((pod or {}).get("spec") or {}).get("nodeName") or "")


def _labels(obj: Obj | None) -> dict[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("labels") or {})


def _admit_pod(node: str, write: Write, *, obj: Obj | None, old: Obj | None) -> None:
    if write.subresource == "status":
        if write.operation != UPDATE:
            raise _refuse(write, f'unexpected operation "{write.operation}"')
        if _node_name(old) != node:
            raise _refuse(
                write,
                f'node "{node}" can only update pod status for pods with spec.nodeName set to '
                "itself",
            )
        if _labels(old) != _labels(obj):
            raise _refuse(write, f'node "{node}" cannot update labels through pod status')
        return
    if write.subresource == "eviction":
        if _node_name(old) != node:
            raise _refuse(
                write, f"node {node} can only evict pods with spec.nodeName set to itself"
            )
        return
    if write.subresource:
        raise _refuse(
            write,
            f"unexpected pod subresource \"{write.subresource}\", only 'status' and "
            "'eviction' are allowed",
        )
    if write.operation == DELETE:
        if _node_name(old) != node:
            raise _refuse(
                write, f'node "{node}" can only delete pods with spec.nodeName set to itself'
            )
        return
    if write.operation == CREATE:
        annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
        if MIRROR_POD_ANNOTATION not in annotations:
            raise _refuse(
                write,
                f'pod does not have "{MIRROR_POD_ANNOTATION}" annotation, node "{node}" can '
                "only create mirror pods",
            )
        if _node_name(obj) != node:
            raise _refuse(
                write, f'node "{node}" can only create pods with spec.nodeName set to itself'
            )
        return
    raise _refuse(
        write,
        f'unexpected operation "{write.operation}", node "{node}" can only create and delete '
        "mirror pods",
    )


def _label_namespace(key: str) -> str:
    prefix, slash, _ = key.partition("/")
    return prefix if slash else ""


def _in(namespace: str, domain: str) -> bool:
    return namespace == domain or namespace.endswith("." + domain)


def _forbidden_label(key: str) -> bool:
    """``getForbiddenLabels``: node-restriction labels, and Kubernetes' labels a kubelet does
    not own."""
    namespace = _label_namespace(key)
    if _in(namespace, NODE_RESTRICTION_LABEL_NAMESPACE):
        return True
    kubernetes = _in(namespace, "kubernetes.io") or _in(namespace, "k8s.io")
    kubelet = key in KUBELET_LABELS or any(_in(namespace, d) for d in KUBELET_LABEL_NAMESPACES)
    return kubernetes and not kubelet


def _modified_labels(new: dict[str, str], old: dict[str, str]) -> list[str]:
    keys = {k for k in new.keys() | old.keys() if new.get(k) != old.get(k)}
    return sorted(k for k in keys if _forbidden_label(k))


def _admit_node(node: str, write: Write, *, obj: Obj | None, old: Obj | None) -> None:
    if write.name != node:
        raise _refuse(write, f'node "{node}" is not allowed to modify node "{write.name}"')
    if write.operation == CREATE:
        if forbidden := _modified_labels(_labels(obj), {}):
            raise _refuse(
                write,
                f'node "{node}" is not allowed to set the following labels: '
                + ", ".join(forbidden),
            )
    elif write.operation == UPDATE:
        taints = ((obj or {}).get("spec") or {}).get("taints") or []
        if taints != (((old or {}).get("spec") or {}).get("taints") or []):
            raise _refuse(write, f'node "{node}" is not allowed to modify taints')
        if forbidden := _modified_labels(_labels(obj), _labels(old)):
            raise _refuse(write, "is not allowed to modify labels: " + ", ".join(forbidden))


def _admit_lease(node: str, write: Write) -> None:
    if write.namespace != NODE_LEASE_NAMESPACE:
        raise _refuse(
            write, f'can only access leases in the "{NODE_LEASE_NAMESPACE}" system namespace'
        )
    if write.name != node:
        raise _refuse(write, "can only access node lease with the same name as the requesting node")


def _admit_token(node: str, write: Write, *, ref: Obj | None, pod: Obj | None) -> None:
    """``ref``: the TokenRequest's ``spec.boundObjectRef``; ``pod``: the pod it names (the
    TokenRequest API has checked that it exists and carries the uid ``ref`` names)."""
    ref = ref or {}
    if pod is None or ref.get("kind") != "Pod" or ref.get("apiVersion", "v1") != "v1":
        raise _refuse(write, "node requested token not bound to a pod")
    if not ref.get("uid"):
        raise _refuse(write, "node requested token with a pod binding without a uid")
    if _node_name(pod) != node:
        raise _refuse(write, "node requested token bound to a pod scheduled on a different node")
