"""The ``kube-dns`` Service in ``kube-system``: how pods and people find the cluster DNS.

Why a module of its own: in Kubernetes the DNS addon's manifest creates the ``kube-dns``
Service (ClusterIP ``.10`` of the service range, ports ``dns`` 53/UDP and ``dns-tcp`` 53/TCP,
labels ``k8s-app: kube-dns`` and ``kubernetes.io/cluster-service: "true"``) and its
EndpointSlices list the CoreDNS pods. kubelite's DNS server is a process, not a pod, so it
registers itself: ``KubeDnsRegistration.run()`` makes sure that

* the Service exists (created without a selector, so no endpoint controller claims it; an
  existing one is left alone — its ClusterIP cannot change — with a warning if its address is
  not the one this server was told);
* when the server listens elsewhere than ``<ClusterIP>:53`` (``--dns-port`` other than 53, say),
  an EndpointSlice ``kube-dns`` (``kubernetes.io/service-name: kube-dns``, managed by
  ``kubelite-dns``) lists its address and port, so ``<.10>:53`` reaches it through
  ``kubelite proxy``; it is rewritten (compare-and-swap on its resourceVersion, again on
  Conflict) when they change;
* when the server answers on ``<ClusterIP>:53`` itself, there is *no* slice (one left by an
  earlier run is deleted): a Service without endpoints is one the proxy does not listen for,
  so the proxy never holds the address the server must bind.

Failures (the apiserver away, the Service kind refused) are retried with the shared back-off,
logged with what happens next; the server answers queries meanwhile.

What it does not do: remove the slice when the server stops (a stopped server's slice lists an
address nobody answers on until it starts again, as a dead pod's does until the controller
notices), maintain a legacy Endpoints object.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from api.errors import AlreadyExists, Conflict, NotFound, StatusError
from api.registry import REGISTRY
from client.backoff import Backoff
from client.rest import ApiClient
from services.dns.records import SERVICE_NAME_LABEL

__all__ = ["KUBE_DNS", "KUBE_SYSTEM", "KubeDnsRegistration", "kube_dns_service"]

log = logging.getLogger("kubelite.dns")

KUBE_DNS = "kube-dns"
KUBE_SYSTEM = "kube-system"
MANAGED_BY = "kubelite-dns"
DNS_SERVICE_PORT = 53


@dataclass(frozen=True, slots=True)
class KubeDnsRegistration:
    client: ApiClient
    cluster_ip: str
    """The Service's ClusterIP (``.10`` of the service range)."""
    address: str
    """Where this server listens."""
    port: int

    @property
    def direct(self) -> bool:
        """The server answers on the Service's own address and port: no proxy in between."""
        return self.address == self.cluster_ip and self.port == DNS_SERVICE_PORT

    async def run(self) -> None:
        """Until the Service and this server's slice are in place; retries with back-off."""
        backoff = Backoff()
        while True:
            try:
                await self._ensure_service()
                if self.direct:
                    await self._remove_slice()
                else:
                    await self._ensure_slice()
            except (StatusError, OSError) as exc:
                delay = backoff.next_delay()
                log.warning(
                    "could not register %s/%s (%s); will retry in %.1fs",
                    KUBE_SYSTEM, KUBE_DNS, exc, delay,
                )  # fmt: skip
                await backoff.sleep(delay)
                continue
            log.info(
                "%s/%s: ClusterIP %s, %s %s:%d",
                KUBE_SYSTEM, KUBE_DNS, self.cluster_ip,
                "answered directly on" if self.direct else "endpoint", self.address, self.port,
            )  # fmt: skip
            return

    async def _ensure_service(self) -> None:
        rt = REGISTRY.require("", "Service")
        # read first: creating it again would be refused for its ClusterIP (422, "provided IP
        # is already allocated") before its name (409)
        try:
            existing = await self.client.get(rt, KUBE_DNS, namespace=KUBE_SYSTEM)
        except NotFound:
            with contextlib.suppress(AlreadyExists):
                await self.client.create(
                    rt, kube_dns_service(self.cluster_ip, target_port=self.port)
                )
            return
        ip = (existing.get("spec") or {}).get("clusterIP")
        if ip != self.cluster_ip:
            log.warning(
                "%s/%s already has ClusterIP %s, not %s; pods pointed at %s will not "
                "reach this server through the Service",
                KUBE_SYSTEM, KUBE_DNS, ip, self.cluster_ip, self.cluster_ip,
            )  # fmt: skip

    async def _remove_slice(self) -> None:
        rt = REGISTRY.require("discovery.k8s.io", "EndpointSlice")
        with contextlib.suppress(NotFound):
            await self.client.delete(rt, KUBE_DNS, namespace=KUBE_SYSTEM)

    async def _ensure_slice(self) -> None:
        rt = REGISTRY.require("discovery.k8s.io", "EndpointSlice")
        wanted = self._slice()
        while True:
            try:
                await self.client.create(rt, wanted)
                return
            except AlreadyExists:
                pass
            current = await self.client.get(rt, KUBE_DNS, namespace=KUBE_SYSTEM)
            if all(current.get(k) == wanted[k] for k in ("addressType", "endpoints", "ports")):
                return
            updated = {**current, **{k: wanted[k] for k in ("addressType", "endpoints", "ports")}}
            try:
                await self.client.update(rt, updated)
                return
            except Conflict:
                continue  # someone wrote it meanwhile: read it again

    def _slice(self) -> dict[str, Any]:
        return {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": KUBE_DNS,
                "namespace": KUBE_SYSTEM,
                "labels": {
                    SERVICE_NAME_LABEL: KUBE_DNS,
                    "endpointslice.kubernetes.io/managed-by": MANAGED_BY,
                },
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": [self.address], "conditions": {"ready": True}}],
            "ports": [
                {"name": "dns", "protocol": "UDP", "port": self.port},
                {"name": "dns-tcp", "protocol": "TCP", "port": self.port},
            ],
        }


def kube_dns_service(cluster_ip: str, *, target_port: int) -> dict[str, Any]:
    """The Service as the DNS addon's manifest declares it (less the selector and metrics)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": KUBE_DNS,
            "namespace": KUBE_SYSTEM,
            "labels": {
                "k8s-app": KUBE_DNS,
                "kubernetes.io/cluster-service": "true",
                "kubernetes.io/name": "CoreDNS",
            },
        },
        "spec": {
            "clusterIP": cluster_ip,
            "ports": [
                {
                    "name": "dns",
                    "port": DNS_SERVICE_PORT,
                    "protocol": "UDP",
                    "targetPort": target_port,
                },
                {
                    "name": "dns-tcp",
                    "port": DNS_SERVICE_PORT,
                    "protocol": "TCP",
                    "targetPort": target_port,
                },
            ],
        },
    }
