"""The endpoints controller: every selector Service has an Endpoints object of its name.

Why: ``kubectl get ep``, ``kubectl describe svc`` and older clients read a Service's backends
from core/v1 Endpoints; kube-controller-manager's ``endpoint`` controller
(``pkg/controller/endpoint``) keeps them. This is it:

* **Keys** are Service keys (``ns/name``). A Service's add, update or delete enqueues it; a
  pod's add, update or delete enqueues every Service in its namespace whose selector matches
  the pod's old or new labels — straight from the watch event, so a pod turning ready or
  unready is reflected by the next sync (no resync period involved); an Endpoints object
  changed or deleted by someone else enqueues its Service, which puts it back.
* **Sync** (level-triggered, from the caches): a Service that is gone has its Endpoints
  deleted; one without a selector (its Endpoints are written by hand) or of type
  ``ExternalName`` is left alone. Otherwise each selected pod with an IP that is not terminal
  gives an address (``ip``, ``nodeName``, ``targetRef``, ``hostname`` when its
  ``hostname``/``subdomain`` name this Service) under every Service port whose target port it
  has (a named ``targetPort`` resolved in that pod's ``containerPorts``): under ``addresses``
  when Ready or the Service has ``publishNotReadyAddresses``, else under ``notReadyAddresses``.
  Terminating pods are left out (kept, as ready, only with ``publishNotReadyAddresses``). A
  headless Service without ports gets port-less addresses. Addresses sharing a port set share
  a subset (``RepackSubsets``), sorted so equal content compares equal.
* **Writes** only when subsets or labels differ from the cached object (labels are the
  Service's plus ``service.kubernetes.io/headless`` for a headless one), as a compare-and-swap on
  the cached resourceVersion; a conflict or ``AlreadyExists`` retries from a fresher cache.
  ``endpoints.kubernetes.io/last-change-trigger-time`` carries the newest pod readiness change
  or Service creation reflected; past 1000 addresses the rest are cut (ready ones kept first)
  and ``endpoints.kubernetes.io/over-capacity: truncated`` says so.

Limits: the trigger time is the newest change reflected, where Kubernetes tracks the oldest
change not yet written (both are within a sync of each other); no ``FailedToUpdateEndpoint``
events; IPv4/IPv6 single-stack.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from api.endpoints import (
    ENDPOINTS_LAST_CHANGE_TRIGGER_TIME,
    ENDPOINTS_OVER_CAPACITY,
    MAX_ENDPOINTS_PER_OBJECT,
)
from api.errors import NotFound
from api.registry import REGISTRY
from client.cache import NAMESPACE_INDEX
from client.controller import Controller
from client.rest import ApiClient
from client.workqueue import WorkQueue
from services.controller_manager.endpoint_pods import (
    enqueue_services_and_their_pods,
    find_port,
    hostname_for,
    is_ready,
    pod_ref,
    service_selector,
    should_be_in_endpoints,
)
from services.controller_manager.informers import SharedInformers

__all__ = ["HEADLESS_LABEL", "EndpointsController", "desired_subsets"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

HEADLESS_LABEL = "service.kubernetes.io/headless"
PODS = REGISTRY.require("", "Pod")
ENDPOINTS = REGISTRY.require("", "Endpoints")


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _address(pod: Obj, svc: Obj) -> dict[str, Any]:
    addr: dict[str, Any] = {"ip": pod["status"]["podIP"]}
    hostname = hostname_for(pod, svc)
    if hostname:
        addr["hostname"] = hostname
    if (pod.get("spec") or {}).get("nodeName"):
        addr["nodeName"] = pod["spec"]["nodeName"]
    addr["targetRef"] = pod_ref(pod)
    return addr


def _endpoint_port(svc_port: Mapping[str, Any], number: int) -> dict[str, Any]:
    port: dict[str, Any] = {"port": number, "protocol": svc_port.get("protocol") or "TCP"}
    if svc_port.get("name"):
        port["name"] = svc_port["name"]
    if svc_port.get("appProtocol"):
        port["appProtocol"] = svc_port["appProtocol"]
    return port


def _port_key(port: Mapping[str, Any]) -> tuple[str, int, str]:
    return (str(port.get("name") or ""), int(port["port"]), str(port["protocol"]))


def desired_subsets(svc: Obj, pods: list[Obj]) -> tuple[list[Obj], bool]:
    """The Endpoints ``subsets`` for ``svc`` over the selected ``pods``, and whether more than
    ``MAX_ENDPOINTS_PER_OBJECT`` addresses were cut off."""
    spec = svc.get("spec") or {}
    publish = spec.get("publishNotReadyAddresses") is True
    svc_ports = [p for p in spec.get("ports") or [] if isinstance(p, Mapping)]
    headless = spec.get("clusterIP") == "None"
    # address (by pod ip) -> (address, ready, its ports)
    by_ip: dict[str, tuple[dict[str, Any], bool, list[dict[str, Any]]]] = {}
    for pod in pods:
        if not should_be_in_endpoints(pod, include_terminating=publish):
            continue
        ports = []
        for svc_port in svc_ports:
            number = find_port(pod, svc_port)
            if number is not None:
                ports.append(_endpoint_port(svc_port, number))
        if not ports and not (headless and not svc_ports):
            continue  # the pod has none of the Service's target ports
        by_ip[pod["status"]["podIP"]] = (_address(pod, svc), publish or is_ready(pod), ports)
    kept = sorted(by_ip.values(), key=lambda a: (not a[1], a[0]["ip"]))
    truncated = len(kept) > MAX_ENDPOINTS_PER_OBJECT
    groups: dict[tuple[tuple[str, int, str], ...], Obj] = {}
    for addr, ready, ports in kept[:MAX_ENDPOINTS_PER_OBJECT]:
        ports = sorted(ports, key=_port_key)
        subset = groups.setdefault(tuple(_port_key(p) for p in ports), {"ports": ports})
        subset.setdefault("addresses" if ready else "notReadyAddresses", []).append(addr)
    subsets = []
    for key in sorted(groups):
        subset = groups[key]
        for field in ("addresses", "notReadyAddresses"):
            if field in subset:
                subset[field].sort(key=lambda a: a["ip"])
        if not subset["ports"]:
            del subset["ports"]
        subsets.append(subset)
    return subsets, truncated


def _trigger_time(svc: Obj, pods: list[Obj]) -> str | None:
    """The newest pod readiness change or Service creation, as an RFC 3339 string."""
    times = [str(_meta(svc).get("creationTimestamp") or "")]
    for pod in pods:
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Ready" and cond.get("lastTransitionTime"):
                times.append(str(cond["lastTransitionTime"]))
    newest = max(times)  # RFC 3339 UTC strings order as the times do
    return newest or None


class EndpointsController:
    """``await run()`` until cancelled; ``sync(key)`` converges one Service's Endpoints."""

    def __init__(self, *, client: ApiClient, informers: SharedInformers, workers: int = 5) -> None:
        self.name = "endpoint"
        self.client = client
        self.workers = workers
        self.services = informers.get(REGISTRY.require("", "Service"))
        self.pods = informers.get(PODS)
        self.endpoints = informers.get(ENDPOINTS)
        self.queue: WorkQueue[str] = WorkQueue(name="endpoint")
        enqueue_services_and_their_pods(self.queue, services=self.services, pods=self.pods)
        self.endpoints.add_handler(
            on_update=lambda _old, new: self._enqueue(new), on_delete=self._enqueue
        )

    async def run(self) -> None:
        await Controller(
            name=self.name,
            queue=self.queue,
            reconcile=self.sync,
            workers=self.workers,
            wait_for=[self.services, self.pods, self.endpoints],
        ).run()

    def _enqueue(self, obj: Obj) -> None:
        self.queue.add(f"{_meta(obj).get('namespace')}/{_meta(obj).get('name')}")

    async def sync(self, key: str) -> None:
        namespace, _, name = key.partition("/")
        svc = self.services.get(key)
        current = self.endpoints.get(key)
        if svc is None:
            if current is not None:
                try:
                    await self.client.delete(ENDPOINTS, name, namespace=namespace)
                except NotFound:
                    pass
                log.info("deleted endpoints %s: its service is gone", key)
            return
        selector = service_selector(svc)
        if selector is None:
            return  # written by hand (no selector) or ExternalName: not ours
        pods = [
            p
            for p in self.pods.by_index(NAMESPACE_INDEX, namespace)
            if selector.matches(_meta(p).get("labels") or {})
        ]
        subsets, truncated = desired_subsets(svc, pods)
        labels = dict(_meta(svc).get("labels") or {})
        if (svc.get("spec") or {}).get("clusterIP") == "None":
            labels[HEADLESS_LABEL] = ""
        annotations = dict(_meta(current).get("annotations") or {}) if current else {}
        was_truncated = annotations.get(ENDPOINTS_OVER_CAPACITY) == "truncated"
        if (
            current is not None
            and (current.get("subsets") or []) == subsets
            and (_meta(current).get("labels") or {}) == labels
            and was_truncated == truncated
        ):
            return
        trigger = _trigger_time(svc, pods)
        if trigger:
            annotations[ENDPOINTS_LAST_CHANGE_TRIGGER_TIME] = trigger
        annotations.pop(ENDPOINTS_OVER_CAPACITY, None)
        if truncated:
            annotations[ENDPOINTS_OVER_CAPACITY] = "truncated"
        meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels}
        if annotations:
            meta["annotations"] = annotations
        body: Obj = {"apiVersion": "v1", "kind": "Endpoints", "metadata": meta}
        if subsets:
            body["subsets"] = subsets
        if current is None:
            await self.client.create(ENDPOINTS, body, namespace=namespace)
            log.info("created endpoints %s", key)
        else:
            meta["resourceVersion"] = _meta(current).get("resourceVersion")
            await self.client.update(ENDPOINTS, body, namespace=namespace)
            log.info("updated endpoints %s", key)
