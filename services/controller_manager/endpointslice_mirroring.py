"""The endpointslice-mirroring controller: hand-written Endpoints copied into EndpointSlices.

Why: a Service without a selector gets its backends from an Endpoints object someone writes by
hand (an external database, the apiserver itself); proxies and DNS read only slices, so
kube-controller-manager's ``endpointslice-mirroring`` controller
(``pkg/controller/endpointslicemirroring``) mirrors such Endpoints. This is it:

* **Keys** are Endpoints keys (``ns/name``, the Service's too). An Endpoints add, update or
  delete enqueues it; a Service's add, update or delete enqueues its name (gaining a selector
  stops the mirroring); a mirrored slice that changes or goes enqueues its Endpoints.
* **Sync**: mirror only when the Service exists, has no selector, and the Endpoints is not
  labelled ``endpointslice.kubernetes.io/skip-mirror: "true"``; otherwise delete the mirrored
  slices. Each subset becomes endpoints with ``ready`` true (``addresses``) or false
  (``notReadyAddresses``), their ``nodeName``, ``hostname`` and ``targetRef``, under the
  subset's ports; ``endpointslice_reconcile`` makes the writes (at most 100 endpoints a slice).
  Slices are labelled with the Endpoints' labels plus ``kubernetes.io/service-name`` and
  ``endpointslice.kubernetes.io/managed-by: endpointslicemirroring-controller.k8s.io``, and
  owned by the Endpoints object.

Limits: addresses beyond 1000 per subset are mirrored too (Kubernetes truncates them);
annotations are not copied.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from api.discovery import LABEL_MANAGED_BY, LABEL_SERVICE_NAME
from api.registry import REGISTRY
from client.cache import NAMESPACE_INDEX
from client.controller import Controller
from client.rest import ApiClient
from client.workqueue import WorkQueue
from services.controller_manager.endpoint_pods import address_type, service_selector
from services.controller_manager.endpointslice_reconcile import (
    ENDPOINT_SLICES,
    Group,
    SlicePlan,
    SliceWriter,
    managed_slices,
    plan_owned_slices,
    slice_owner_key,
)
from services.controller_manager.informers import SharedInformers

__all__ = ["CONTROLLER_NAME", "SKIP_MIRROR_LABEL", "EndpointSliceMirroringController"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

CONTROLLER_NAME = "endpointslicemirroring-controller.k8s.io"
SKIP_MIRROR_LABEL = "endpointslice.kubernetes.io/skip-mirror"
MAX_ENDPOINTS_PER_SLICE = 100
STALE_CACHE_RECHECK = 1.0


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def _endpoint(address: Mapping[str, Any], *, ready: bool) -> Obj:
    endpoint: Obj = {"addresses": [address.get("ip")], "conditions": {"ready": ready}}
    for field in ("hostname", "targetRef", "nodeName"):
        if address.get(field):
            endpoint[field] = address[field]
    return endpoint


def mirrored_groups(endpoints: Obj) -> list[Group]:
    """The slice groups an Endpoints object's subsets become."""
    groups: dict[Any, Group] = {}
    for subset in endpoints.get("subsets") or []:
        ports = [
            {
                "name": p.get("name") or "",
                "port": p.get("port"),
                "protocol": p.get("protocol") or "TCP",
                **({"appProtocol": p["appProtocol"]} if p.get("appProtocol") else {}),
            }
            for p in subset.get("ports") or []
        ]
        for field, ready in (("addresses", True), ("notReadyAddresses", False)):
            for address in subset.get(field) or []:
                group = Group(address_type(str(address.get("ip") or "")), ports)
                groups.setdefault(group.key, group).endpoints.append(
                    _endpoint(address, ready=ready)
                )
    return list(groups.values())


class EndpointSliceMirroringController:
    """``await run()`` until cancelled; ``sync(key)`` converges one Endpoints' mirrored slices."""

    def __init__(self, *, client: ApiClient, informers: SharedInformers, workers: int = 5) -> None:
        self.name = "endpointslice-mirroring"
        self.client = client
        self.workers = workers
        self.endpoints_rt = REGISTRY.require("", "Endpoints")
        self.endpoints = informers.get(self.endpoints_rt)
        self.services = informers.get(REGISTRY.require("", "Service"))
        self.slices = informers.get(ENDPOINT_SLICES)
        self.writer = SliceWriter(client)
        self.queue: WorkQueue[str] = WorkQueue(name="endpointslice-mirroring")
        for informer in (self.endpoints, self.services):
            informer.add_handler(on_change=self._enqueue)
        self.slices.add_handler(on_change=self._slice_changed)

    async def run(self) -> None:
        await Controller(
            name=self.name,
            queue=self.queue,
            reconcile=self.sync,
            workers=self.workers,
            wait_for=[self.endpoints, self.services, self.slices],
        ).run()

    def _enqueue(self, obj: Obj) -> None:
        self.queue.add(f"{_meta(obj).get('namespace')}/{_meta(obj).get('name')}")

    def _slice_changed(self, es: Obj) -> None:
        key = slice_owner_key(es, managed_by=CONTROLLER_NAME)
        if key is not None:
            self.queue.add(key)

    def _should_mirror(self, ep: Obj | None, svc: Obj | None) -> bool:
        if ep is None or svc is None or service_selector(svc) is not None:
            return False
        if (svc.get("spec") or {}).get("type") == "ExternalName":
            return False
        return (_meta(ep).get("labels") or {}).get(SKIP_MIRROR_LABEL) != "true"

    async def sync(self, key: str) -> float | None:
        namespace, _, name = key.partition("/")
        if not self.writer.observed(key, self.slices):
            return STALE_CACHE_RECHECK
        ep, svc = self.endpoints.get(key), self.services.get(key)
        mirrored = managed_slices(
            self.slices.by_index(NAMESPACE_INDEX, namespace),
            service_name=name,
            managed_by=CONTROLLER_NAME,
        )
        if ep is None or not self._should_mirror(ep, svc):
            if mirrored:
                await self.writer.apply(key, namespace, SlicePlan(delete=mirrored))
            return None
        plan = plan_owned_slices(
            owner=ep,
            owner_rt=self.endpoints_rt,
            managed=mirrored,
            desired=mirrored_groups(ep),
            labels={
                **(_meta(ep).get("labels") or {}),
                LABEL_SERVICE_NAME: name,
                LABEL_MANAGED_BY: CONTROLLER_NAME,
            },
            max_per_slice=MAX_ENDPOINTS_PER_SLICE,
        )
        if plan:
            await self.writer.apply(key, namespace, plan)
        return None
