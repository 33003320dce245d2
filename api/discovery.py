"""discovery.k8s.io/v1 EndpointSlice: a Service's endpoints cut into slices of at most 100.

Why: one Endpoints object holding every backend of a large Service is rewritten (and sent to
every watcher) whenever any one pod changes; slices bound that cost, and they carry what
Endpoints cannot — per-endpoint ``ready``/``serving``/``terminating`` conditions, zone and
hints. kube-proxy (``kubelite proxy``) and cluster DNS read slices, never Endpoints.

Wire facts kept here: ``addressType`` and ``endpoints`` are always serialised (``endpoints: []``
for a Service without backends), as are each endpoint's ``addresses`` and ``conditions`` (``{}``
when nothing is known); everything in a port is optional, and ``api.defaults`` sets ``name: ""``
and ``protocol: TCP`` as Kubernetes' defaulting does. The labels every controller-managed slice
carries are named here.

Limits: only the model; which values are valid is ``api.validation``'s, and who writes slices
is the controller-manager's (``endpointslice`` and ``endpointslice-mirroring`` controllers).
"""

from __future__ import annotations

from pydantic import Field

from api.core import ObjectReference
from api.meta import KubeModel, ObjectMeta

__all__ = [
    "ADDRESS_TYPES",
    "LABEL_MANAGED_BY",
    "LABEL_SERVICE_NAME",
    "MAX_ENDPOINTS_PER_SLICE",
    "Endpoint",
    "EndpointConditions",
    "EndpointHints",
    "EndpointPort",
    "EndpointSlice",
    "ForNode",
    "ForZone",
]

ADDRESS_TYPES = ("IPv4", "IPv6", "FQDN")

LABEL_SERVICE_NAME = "kubernetes.io/service-name"
"""The Service a slice belongs to (how proxies and DNS find a Service's slices)."""

LABEL_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
"""Which controller owns a slice; each controller touches only the slices labelled with its name."""

MAX_ENDPOINTS_PER_SLICE = 1000
"""Validation's limit; controllers cut slices at 100 (``--max-endpoints-per-slice``)."""


class EndpointConditions(KubeModel):
    ready: bool | None = None
    serving: bool | None = None
    terminating: bool | None = None


class ForZone(KubeModel):
    name: str = ""


class ForNode(KubeModel):
    name: str = ""


class EndpointHints(KubeModel):
    for_zones: list[ForZone] | None = None
    for_nodes: list[ForNode] | None = None


class Endpoint(KubeModel):
    addresses: list[str] = Field(default_factory=list)
    conditions: EndpointConditions = Field(default_factory=EndpointConditions)
    hostname: str | None = None
    target_ref: ObjectReference | None = None
    deprecated_topology: dict[str, str] | None = None
    node_name: str | None = None
    zone: str | None = None
    hints: EndpointHints | None = None


class EndpointPort(KubeModel):
    name: str | None = None
    protocol: str | None = None
    port: int | None = None
    app_protocol: str | None = None


class EndpointSlice(KubeModel):
    api_version: str = "discovery.k8s.io/v1"
    kind: str = "EndpointSlice"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    address_type: str = ""
    endpoints: list[Endpoint] = Field(default_factory=list)
    ports: list[EndpointPort] | None = None
