"""The endpointslice controller: a selector Service's endpoints as discovery.k8s.io/v1 slices.

Why: ``kubelite proxy`` and cluster DNS route by EndpointSlices, so they must follow pods within
a watch event of a pod turning ready, unready or terminating. This is kube-controller-manager's
``endpointslice`` controller (``pkg/controller/endpointslice``):

* **Keys** are Service keys. Services enqueue themselves; a pod's add, update or delete enqueues
  the Services in its namespace whose selector matches its old or new labels (no resync delay);
  a slice this controller manages (label ``endpointslice.kubernetes.io/managed-by:
  endpointslice-controller.k8s.io``) that changes or goes enqueues the Service named by its
  ``kubernetes.io/service-name`` label, so a slice deleted by hand comes back.
* **Sync** (from the caches): a Service without a selector is left alone (the mirroring
  controller serves it); an ``ExternalName`` one has its slices deleted. Each selected pod with
  an IP that is not terminal becomes an endpoint — terminating pods included — with
  ``conditions`` ``serving`` (the pod is Ready), ``terminating`` (it is being deleted) and
  ``ready`` (serving and not terminating, or always with ``publishNotReadyAddresses``),
  ``nodeName``, ``zone`` (the node's ``topology.kubernetes.io/zone``), ``targetRef`` and
  ``hostname`` when the pod's ``hostname``/``subdomain`` name this Service. Ports are the
  Service's, with each pod's resolved target port, so pods resolving a named port differently
  land in different slices. ``endpointslice_reconcile`` turns that into the fewest writes;
  slices are named ``<service>-<random>``, labelled with the Service's labels plus
  ``kubernetes.io/service-name`` and ``managed-by``, owned by the Service (the garbage
  collector removes them with it), and hold at most ``--max-endpoints-per-slice`` (100).
* A sync whose slice cache has not yet seen this controller's own last writes for the Service
  waits for it (the slice watch event requeues the Service), so a restart or a lagging cache
  never makes a duplicate slice.

Limits: no topology hints, no ``trafficDistribution``; single-stack (one address type).
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
from services.controller_manager.endpoint_pods import (
    address_type,
    enqueue_services_and_their_pods,
    find_port,
    hostname_for,
    is_ready,
    is_terminating,
    pod_ref,
    service_selector,
    should_be_in_endpoints,
)
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

__all__ = ["CONTROLLER_NAME", "DEFAULT_MAX_ENDPOINTS_PER_SLICE", "EndpointSliceController"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

CONTROLLER_NAME = "endpointslice-controller.k8s.io"
DEFAULT_MAX_ENDPOINTS_PER_SLICE = 100
HEADLESS_LABEL = "service.kubernetes.io/headless"
ZONE_LABEL = "topology.kubernetes.io/zone"
STALE_CACHE_RECHECK = 1.0
"""Seconds before a sync that found its own writes missing from the cache looks again (the
slice's watch event normally requeues the Service sooner)."""


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def _labels(svc: Obj) -> dict[str, str]:
    labels = dict(_meta(svc).get("labels") or {})
    labels[LABEL_SERVICE_NAME] = str(_meta(svc).get("name"))
    labels[LABEL_MANAGED_BY] = CONTROLLER_NAME
    if (svc.get("spec") or {}).get("clusterIP") == "None":
        labels[HEADLESS_LABEL] = ""
    return labels


def _slice_ports(svc: Obj, pod: Obj) -> list[Obj]:
    ports = []
    for svc_port in (svc.get("spec") or {}).get("ports") or []:
        number = find_port(pod, svc_port)
        if number is None:
            continue
        port: Obj = {
            "name": svc_port.get("name") or "",
            "port": number,
            "protocol": svc_port.get("protocol") or "TCP",
        }
        if svc_port.get("appProtocol"):
            port["appProtocol"] = svc_port["appProtocol"]
        ports.append(port)
    return ports


class EndpointSliceController:
    """``await run()`` until cancelled; ``sync(key)`` converges one Service's slices."""

    def __init__(
        self,
        *,
        client: ApiClient,
        informers: SharedInformers,
        max_endpoints_per_slice: int = DEFAULT_MAX_ENDPOINTS_PER_SLICE,
        workers: int = 5,
    ) -> None:
        self.name = "endpointslice"
        self.client = client
        self.workers = workers
        self.max_per_slice = max_endpoints_per_slice
        self.services_rt = REGISTRY.require("", "Service")
        self.services = informers.get(self.services_rt)
        self.pods = informers.get(REGISTRY.require("", "Pod"))
        self.nodes = informers.get(REGISTRY.require("", "Node"))
        self.slices = informers.get(ENDPOINT_SLICES)
        self.writer = SliceWriter(client)
        self.queue: WorkQueue[str] = WorkQueue(name="endpointslice")
        enqueue_services_and_their_pods(self.queue, services=self.services, pods=self.pods)
        self.slices.add_handler(on_change=self._slice_changed)

    async def run(self) -> None:
        await Controller(
            name=self.name,
            queue=self.queue,
            reconcile=self.sync,
            workers=self.workers,
            wait_for=[self.services, self.pods, self.nodes, self.slices],
        ).run()

    def _slice_changed(self, es: Obj) -> None:
        key = slice_owner_key(es, managed_by=CONTROLLER_NAME)
        if key is not None:
            self.queue.add(key)

    def _endpoint(self, svc: Obj, pod: Obj) -> Obj:
        serving, terminating = is_ready(pod), is_terminating(pod)
        publish = (svc.get("spec") or {}).get("publishNotReadyAddresses") is True
        endpoint: Obj = {
            "addresses": [pod["status"]["podIP"]],
            "conditions": {
                "ready": publish or (serving and not terminating),
                "serving": serving,
                "terminating": terminating,
            },
        }
        hostname = hostname_for(pod, svc)
        if hostname:
            endpoint["hostname"] = hostname
        endpoint["targetRef"] = pod_ref(pod)
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name:
            endpoint["nodeName"] = node_name
            zone = (_meta(self.nodes.get(node_name)).get("labels") or {}).get(ZONE_LABEL)
            if zone:
                endpoint["zone"] = zone
        return endpoint

    def desired(self, svc: Obj) -> list[Group]:
        namespace = _meta(svc).get("namespace")
        selector = service_selector(svc)
        groups: dict[Any, Group] = {}
        for pod in self.pods.by_index(NAMESPACE_INDEX, str(namespace)):
            if selector is None or not selector.matches(_meta(pod).get("labels") or {}):
                continue
            if not should_be_in_endpoints(pod, include_terminating=True):
                continue
            group = Group(address_type(pod["status"]["podIP"]), _slice_ports(svc, pod))
            groups.setdefault(group.key, group).endpoints.append(self._endpoint(svc, pod))
        return list(groups.values())

    async def sync(self, key: str) -> float | None:
        namespace, _, name = key.partition("/")
        svc = self.services.get(key)
        if svc is None:
            self.writer.forget(key)
            return None  # the garbage collector deletes the slices it owned
        if not self.writer.observed(key, self.slices):
            return STALE_CACHE_RECHECK
        spec = svc.get("spec") or {}
        if spec.get("type") != "ExternalName" and service_selector(svc) is None:
            return None  # no selector: endpoints come from a hand-written Endpoints (mirrored)
        managed = managed_slices(
            self.slices.by_index(NAMESPACE_INDEX, namespace),
            service_name=name,
            managed_by=CONTROLLER_NAME,
        )
        if spec.get("type") == "ExternalName":
            plan = SlicePlan(delete=managed)
        else:
            plan = plan_owned_slices(
                owner=svc,
                owner_rt=self.services_rt,
                managed=managed,
                desired=self.desired(svc),
                labels=_labels(svc),
                max_per_slice=self.max_per_slice,
            )
        if plan:
            await self.writer.apply(key, namespace, plan)
        return None
