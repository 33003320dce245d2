"""The ``kubernetes`` Service's endpoints: the apiserver names itself behind its own Service.

Why: the ``kubernetes`` Service in ``default`` has no selector, so no controller fills its
endpoints; Kubernetes' apiserver writes them itself (the "master endpoint reconciler"). Without
them the Service's ClusterIP leads nowhere and the proxy refuses connections to it; with them
``https://kubernetes.default.svc`` inside a pod reaches the apiserver, as client libraries'
in-cluster configuration expects.

What it owns: the Endpoints ``default/kubernetes`` (labelled
``endpointslice.kubernetes.io/skip-mirror: "true"`` so the mirroring controller leaves it alone,
as Kubernetes does) and the EndpointSlice ``default/kubernetes`` (``kubernetes.io/service-name:
kubernetes``), both naming ``address:port`` of the serving apiserver as port ``https``; written
at start and checked again every ``interval`` seconds, so a deleted or edited object comes back.

Not guaranteed: one apiserver's address only — several apiservers would each write their own
(Kubernetes' lease reconciler, which merges the addresses of live apiservers, is not built).
"""

from __future__ import annotations

import asyncio
import copy
import ipaddress
import logging
from typing import Any

from api.errors import StatusError
from services.apiserver.context import ApiContext
from services.apiserver.strategy import default_object, prepare_for_create

__all__ = ["advertised_address", "keep_kubernetes_endpoints", "reconcile_kubernetes_endpoints"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
NAME = "kubernetes"
NAMESPACE = "default"
PORT_NAME = "https"


def advertised_address(bind_address: str) -> str:
    """The address pods should use: the bind address, or loopback when bound to every address."""
    try:
        if ipaddress.ip_address(bind_address).is_unspecified:
            return "127.0.0.1"
    except ValueError:  # a host name: what it resolves to is the caller's business
        pass
    return bind_address


def _endpoints(address: str, port: int) -> tuple[Obj, Obj]:
    """The wanted Endpoints and EndpointSlice bodies (the parts this module owns)."""
    endpoints: Obj = {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"},
        },
        "subsets": [
            {
                "addresses": [{"ip": address}],
                "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}],
            }
        ],
    }
    slice_: Obj = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "labels": {"kubernetes.io/service-name": NAME},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
        "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}],
    }
    return endpoints, slice_


async def _ensure(
    ctx: ApiContext, group: str, plural: str, wanted: Obj, fields: tuple[str, ...]
) -> None:
    """Create ``wanted`` or bring the existing object's ``fields`` and labels in line."""
    rt = ctx.resource(group, plural)
    storage = ctx.storage(rt)

    async def create() -> Obj:
        obj = copy.deepcopy(wanted)
        prepare_for_create(rt, obj)
        default_object(rt, obj)
        return obj

    async def mutate(current: Obj) -> Obj | None:
        labels = current["metadata"].get("labels") or {}
        if all(current.get(f) == wanted[f] for f in fields) and (
            labels.items() >= wanted["metadata"]["labels"].items()
        ):
            return None
        new = copy.deepcopy(current)
        for f in fields:
            new[f] = copy.deepcopy(wanted[f])
        new["metadata"]["labels"] = {**labels, **wanted["metadata"]["labels"]}
        default_object(rt, new)
        return new

    await storage.guaranteed_update(NAMESPACE, NAME, mutate, create=create)


async def reconcile_kubernetes_endpoints(ctx: ApiContext, *, address: str, port: int) -> None:
    """Make ``default/kubernetes`` Endpoints and EndpointSlice name ``address:port``."""
    endpoints, slice_ = _endpoints(address, port)
    await _ensure(ctx, "", "endpoints", endpoints, ("subsets",))
    await _ensure(
        ctx, "discovery.k8s.io", "endpointslices", slice_, ("addressType", "endpoints", "ports")
    )


async def keep_kubernetes_endpoints(
    ctx: ApiContext, *, address: str, port: int, interval: float = 10.0
) -> None:
    """Reconcile at once and then every ``interval`` seconds, until cancelled."""
    log.info("the kubernetes Service's endpoints name %s:%d", address, port)
    while True:
        try:
            await reconcile_kubernetes_endpoints(ctx, address=address, port=port)
        except StatusError as exc:  # refused (a conflict storm, say): try again next round
            log.warning("cannot write the kubernetes Service's endpoints: %s", exc)
        await asyncio.sleep(interval)
