"""The service-lb controller: LoadBalancer Services get an ingress IP from a loopback range.

Why: a Service of ``type: LoadBalancer`` waits for a cloud's load balancer to fill
``status.loadBalancer.ingress``; kubelite has no cloud, so — as k3s ships ServiceLB — this
controller hands out addresses from ``--service-lb-range`` (default ``127.192.0.0/16``, disjoint
from pod and ClusterIP ranges; ``kubelite proxy`` listens on them):

* **Keys** are Service keys; every Service add, update and delete enqueues one. One worker, so
  two Services are never given the same address by concurrent syncs.
* **Sync**: a Service that is ``LoadBalancer`` with no ``spec.loadBalancerClass`` (a class names
  another implementation, which Kubernetes' own service controller also leaves alone) keeps the
  in-range ingress IP it has, or gets the lowest free one (``status.loadBalancer.ingress:
  [{ip, ipMode: VIP}]``) through ``services/{name}/status`` as a compare-and-swap, and a
  ``EnsuredLoadBalancer`` event. A Service that stopped being ours (type or class changed) has
  its ingress cleared. Addresses in use are those in the Service cache plus those this process
  assigned and its cache has not shown yet; a deleted Service's address is free again.
* Range exhausted: a Warning ``SyncLoadBalancerFailed`` event and a retry with backoff.

Limits: IPv4 ranges only; ``spec.loadBalancerIP`` is ignored (deprecated upstream); no
health-check node port.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Mapping
from typing import Any

from api.registry import REGISTRY
from client.controller import Controller
from client.events import EventRecorder
from client.rest import ApiClient
from client.workqueue import WorkQueue
from services.controller_manager.informers import SharedInformers

__all__ = ["DEFAULT_SERVICE_LB_RANGE", "RangeExhausted", "ServiceLBController", "is_ours"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

DEFAULT_SERVICE_LB_RANGE = "127.192.0.0/16"


class RangeExhausted(Exception):
    """Every address of the range is in use."""


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def is_ours(svc: Mapping[str, Any]) -> bool:
    spec = svc.get("spec") or {}
    return spec.get("type") == "LoadBalancer" and not spec.get("loadBalancerClass")


def _ingress_ips(svc: Mapping[str, Any]) -> list[str]:
    ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    return [str(i["ip"]) for i in ingress if isinstance(i, Mapping) and i.get("ip")]


class ServiceLBController:
    """``await run()`` until cancelled; ``sync(key)`` converges one Service's ingress."""

    def __init__(
        self,
        *,
        client: ApiClient,
        informers: SharedInformers,
        recorder: EventRecorder,
        lb_range: str = DEFAULT_SERVICE_LB_RANGE,
    ) -> None:
        self.name = "service-lb"
        self.client = client
        self.recorder = recorder
        self.network = ipaddress.IPv4Network(lb_range)
        self.services_rt = REGISTRY.require("", "Service")
        self.services = informers.get(self.services_rt)
        self.assigned: dict[str, str] = {}
        """uid -> address this process wrote and its cache may not show yet."""
        self.queue: WorkQueue[str] = WorkQueue(name="service-lb")
        self.services.add_handler(
            on_add=self._enqueue,
            on_update=lambda _old, new: self._enqueue(new),
            on_delete=self._deleted,
        )

    async def run(self) -> None:
        await Controller(
            name=self.name, queue=self.queue, reconcile=self.sync, wait_for=[self.services]
        ).run()

    def _enqueue(self, svc: Obj) -> None:
        self.queue.add(f"{_meta(svc).get('namespace')}/{_meta(svc).get('name')}")

    def _deleted(self, svc: Obj) -> None:
        self.assigned.pop(str(_meta(svc).get("uid")), None)

    def _in_range(self, ip: str) -> bool:
        try:
            return ipaddress.IPv4Address(ip) in self.network
        except ValueError:
            return False

    def _allocate(self, uid: str) -> str:
        used = set(self.assigned.values())
        for svc in self.services.list():
            if _meta(svc).get("uid") != uid and is_ours(svc):
                used.update(_ingress_ips(svc))
        for host in self.network.hosts():
            if str(host) not in used:
                return str(host)
        raise RangeExhausted(f"no free address in --service-lb-range {self.network}")

    async def sync(self, key: str) -> None:
        svc = self.services.get(key)
        if svc is None:
            return
        uid = str(_meta(svc).get("uid"))
        current = _ingress_ips(svc)
        if not is_ours(svc):
            self.assigned.pop(uid, None)
            if current and all(self._in_range(ip) for ip in current):
                await self._write(svc, [])
                log.info("released load-balancer address %s of %s", current[0], key)
            return
        if len(current) == 1 and self._in_range(current[0]):
            self.assigned.pop(uid, None)  # the cache shows it now
            return
        try:
            ip = self.assigned.get(uid) or self._allocate(uid)
        except RangeExhausted as exc:
            self.recorder.event(svc, "Warning", "SyncLoadBalancerFailed", str(exc))
            raise
        await self._write(svc, [{"ip": ip, "ipMode": "VIP"}])
        self.assigned[uid] = ip
        self.recorder.event(svc, "Normal", "EnsuredLoadBalancer", "Ensured load balancer")
        log.info("gave %s load-balancer address %s", key, ip)

    async def _write(self, svc: Obj, ingress: list[Obj]) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": _meta(svc).get("name"),
                "namespace": _meta(svc).get("namespace"),
                "resourceVersion": _meta(svc).get("resourceVersion"),
            },
            "spec": svc.get("spec") or {},
            "status": {
                **(svc.get("status") or {}),
                "loadBalancer": {"ingress": ingress} if ingress else {},
            },
        }
        await self.client.update_status(self.services_rt, body)
