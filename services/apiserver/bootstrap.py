"""What exists from the first start: the system namespaces, the default storage class, the
``kubernetes`` Service and the system priority classes.

Kubernetes' apiserver creates ``default``, ``kube-system``, ``kube-public`` and
``kube-node-lease`` itself (the "system namespaces" controller), so a fresh cluster accepts pods
in ``default`` and kubelets' Leases in ``kube-node-lease`` without anyone creating them. A
cluster people use straight away also ships a default StorageClass (k3s' ``local-path``), so
a claim without ``storageClassName`` gets one; kubelite's is ``local-path`` too, provisioned
by ``kubelite.io/local-path`` and bound when the first pod uses the claim
(``WaitForFirstConsumer``), since a node-local directory must be made where the pod runs.

The ``kubernetes`` Service in ``default`` (Kubernetes' ``controlplane`` bootstrap controller)
holds the first address of ``--service-cluster-ip-range`` and port 443 (``https``), labelled
``component: apiserver`` and ``provider: kubernetes``, without a selector: its endpoints name the
apiserver itself.

The two system PriorityClasses, ``system-node-critical`` and ``system-cluster-critical``, are
created as Kubernetes' scheduling post-start hook creates them (the only classes whose names may
start ``system-``).

This runs at every start and creates whichever are missing; existing ones are left as they are
(a user who deleted ``local-path`` gets it back at the next start, as with k3s' manifest).
"""

from __future__ import annotations

import logging
from typing import Any

from api.errors import AlreadyExists, StatusError
from api.registry import ResourceType
from api.schema_kinds.priorityclass import SYSTEM_PRIORITY_CLASSES
from api.storage import DEFAULT_CLASS_ANNOTATION, LOCAL_PATH_CLASS, LOCAL_PATH_PROVISIONER
from services.apiserver.context import ApiContext
from services.apiserver.strategy import default_object, prepare_for_create

__all__ = [
    "DEFAULT_STORAGE_CLASS",
    "ensure_default_storage_class",
    "ensure_kubernetes_service",
    "ensure_namespaces",
    "ensure_system_priority_classes",
]

log = logging.getLogger(__name__)

DEFAULT_STORAGE_CLASS: dict[str, Any] = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {
        "name": LOCAL_PATH_CLASS,
        "annotations": {DEFAULT_CLASS_ANNOTATION: "true"},
    },
    "provisioner": LOCAL_PATH_PROVISIONER,
    "reclaimPolicy": "Delete",
    "volumeBindingMode": "WaitForFirstConsumer",
}
"""The class a fresh cluster has (k3s ships the same shape under ``rancher.io/local-path``)."""


async def _create_missing(ctx: ApiContext, rt: ResourceType, obj: dict[str, Any]) -> bool:
    """Create the cluster-scoped ``obj`` unless it exists; True if this call created it."""
    storage = ctx.storage(rt)
    if await storage.get_or_none(None, obj["metadata"]["name"]) is not None:
        return False
    prepare_for_create(rt, obj)
    default_object(rt, obj)
    try:
        await storage.create(obj)
    except AlreadyExists:
        return False
    return True


async def ensure_namespaces(ctx: ApiContext) -> list[str]:
    """Create the missing initial namespaces; returns the names created."""
    rt = ctx.resource("", "namespaces")
    created = []
    for name in ctx.options.initial_namespaces:
        obj = {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": name}}
        if await _create_missing(ctx, rt, obj):
            created.append(name)
    if created:
        log.info("created namespaces %s", ", ".join(created))
    return created


async def ensure_default_storage_class(ctx: ApiContext) -> bool:
    """Create the ``local-path`` StorageClass if it is missing; True if it was created."""
    rt = ctx.resource("storage.k8s.io", "storageclasses")
    obj = {**DEFAULT_STORAGE_CLASS, "metadata": {**DEFAULT_STORAGE_CLASS["metadata"]}}
    obj["metadata"]["annotations"] = dict(DEFAULT_STORAGE_CLASS["metadata"]["annotations"])
    created = await _create_missing(ctx, rt, obj)
    if created:
        log.info("created the default StorageClass %s", LOCAL_PATH_CLASS)
    return created


async def ensure_system_priority_classes(ctx: ApiContext) -> list[str]:
    """Create the missing system PriorityClasses; returns the names created."""
    rt = ctx.resource("scheduling.k8s.io", "priorityclasses")
    created = []
    for system_class in SYSTEM_PRIORITY_CLASSES:
        obj = {**system_class, "metadata": dict(system_class["metadata"])}
        if await _create_missing(ctx, rt, obj):
            created.append(obj["metadata"]["name"])
    if created:
        log.info("created priority classes %s", ", ".join(created))
    return created


async def ensure_kubernetes_service(ctx: ApiContext) -> bool:
    """Create the ``kubernetes`` Service if it is missing; True if it was created."""
    rt = ctx.resource("", "services")
    storage = ctx.storage(rt)
    allocator = ctx.services
    if allocator is None or await storage.get_or_none("default", "kubernetes") is not None:
        return False
    port = ctx.options.secure_port if ctx.options.secure_port > 0 else ctx.options.port
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "labels": {"component": "apiserver", "provider": "kubernetes"},
        },
        "spec": {
            "clusterIP": allocator.kubernetes_ip,
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}],
        },
    }
    prepare_for_create(rt, obj)
    default_object(rt, obj)
    try:
        reservation = await allocator.reserve(obj)
    except StatusError as exc:
        log.warning("cannot create the kubernetes Service: %s", exc)
        return False
    try:
        await storage.create(obj)
    except BaseException:
        await reservation.settle(None)
        raise
    log.info("created the kubernetes Service at %s", allocator.kubernetes_ip)
    return True
