"""The cluster as the DNS server sees it: Services, EndpointSlices and Namespaces, list-watched.

Why a module of its own: ``records.resolve`` reads a ``ClusterView``; this is the one made of
informers (``client.informer``), as CoreDNS's ``dnsController`` is made of client-go
informers — list, then watch, relist after a 410, resync after a restart of either side.

What it owns: ``InformerView`` — three informers, the indexes ``resolve`` looks up by
(a slice's Service, a Service's ClusterIPs, a slice's addresses), and ``generation``, bumped by
every change any informer sees (the SOA serial, and the server's cue to drop cached answers).
``has_synced`` once all three listed.

What it does not guarantee: answers are as fresh as the watches (the server answers from the
caches, never from the apiserver); nothing is filtered by namespace or label (CoreDNS's
``namespaces`` and ``labels`` options).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from api.registry import REGISTRY
from client.informer import Informer
from client.rest import ApiClient
from services.dns.records import SERVICE_NAME_LABEL

__all__ = ["InformerView"]

Obj = dict[str, Any]

SLICE_SERVICE_INDEX = "service"
"""EndpointSlices by ``<namespace>/<kubernetes.io/service-name>``."""
ADDRESS_INDEX = "address"
"""EndpointSlices by every endpoint address; Services by every ClusterIP."""


def _slice_service(obj: Mapping[str, Any]) -> list[str]:
    meta = obj.get("metadata") or {}
    service = (meta.get("labels") or {}).get(SERVICE_NAME_LABEL)
    return [f"{meta.get('namespace')}/{service}"] if service else []


def _slice_addresses(obj: Mapping[str, Any]) -> list[str]:
    return sorted({str(a) for e in obj.get("endpoints") or () for a in (e.get("addresses") or ())})


def _cluster_ips(obj: Mapping[str, Any]) -> list[str]:
    spec = obj.get("spec") or {}
    ips = {str(ip) for ip in (spec.get("clusterIPs") or ())} | {str(spec.get("clusterIP") or "")}
    return sorted(ips - {"", "None"})


class InformerView:
    def __init__(self, client: ApiClient) -> None:
        self.services = Informer(
            client,
            REGISTRY.require("", "Service"),
            indexers={ADDRESS_INDEX: _cluster_ips},
            name="services",
        )
        self.slices = Informer(
            client,
            REGISTRY.require("discovery.k8s.io", "EndpointSlice"),
            indexers={SLICE_SERVICE_INDEX: _slice_service, ADDRESS_INDEX: _slice_addresses},
            name="endpointslices",
        )
        self.namespaces = Informer(client, REGISTRY.require("", "Namespace"), name="namespaces")
        self.informers = (self.services, self.slices, self.namespaces)
        self._generation = 0
        for informer in self.informers:
            informer.add_handler(
                on_add=self._changed, on_update=self._updated, on_delete=self._changed
            )

    def _changed(self, obj: Obj) -> None:
        self._generation += 1

    def _updated(self, old: Obj, new: Obj) -> None:
        if old is not new:  # a resync replays the cache: nothing changed
            self._generation += 1

    def start(self) -> list[asyncio.Task[None]]:
        return [informer.start() for informer in self.informers]

    @property
    def has_synced(self) -> bool:
        return all(informer.has_synced for informer in self.informers)

    async def wait_synced(self) -> None:
        await asyncio.gather(*(informer.wait_synced() for informer in self.informers))

    # -- records.ClusterView ---------------------------------------------------------------

    @property
    def generation(self) -> int:
        return self._generation

    def namespace_exists(self, name: str) -> bool:
        return self.namespaces.get(name) is not None

    def service(self, namespace: str, name: str) -> Obj | None:
        return self.services.get(f"{namespace}/{name}")

    def endpoint_slices(self, namespace: str, service: str) -> list[Obj]:
        return self.slices.by_index(SLICE_SERVICE_INDEX, f"{namespace}/{service}")

    def services_with_ip(self, ip: str) -> list[Obj]:
        return self.services.by_index(ADDRESS_INDEX, ip)

    def slices_with_address(self, ip: str) -> list[Obj]:
        return self.slices.by_index(ADDRESS_INDEX, ip)
