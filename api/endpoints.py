"""core/v1 Endpoints: the addresses behind a Service, in the original (pre-slice) shape.

Why: ``kubectl get ep``, ``kubectl describe svc`` and many client libraries still read
Endpoints, and a Service without a selector is given its backends by writing an Endpoints
object of the same name by hand (which the endpointslice-mirroring controller then copies into
EndpointSlices). The controller-manager's ``endpoints`` controller keeps one per selector
Service (``services/controller_manager/endpoints.py``).

Wire facts kept here: an Endpoints has no spec or status, only ``subsets``; each subset is the
cross product of its addresses and ports. ``ip`` and ``port`` are always serialised (Go fields
without ``omitempty``); ``protocol`` defaults to ``TCP`` (``api.defaults``). The annotations the
controller writes are named here.

Limits: only the model; validation (with kubelite's loopback exception) is ``api.validation``'s.
"""

from __future__ import annotations

from pydantic import Field

from api.core import ObjectReference
from api.meta import KubeModel, ObjectMeta

__all__ = [
    "ENDPOINTS_LAST_CHANGE_TRIGGER_TIME",
    "ENDPOINTS_OVER_CAPACITY",
    "MAX_ENDPOINTS_PER_OBJECT",
    "EndpointAddress",
    "EndpointPort",
    "EndpointSubset",
    "Endpoints",
]

ENDPOINTS_LAST_CHANGE_TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time"
"""When the newest change (pod or Service) that this Endpoints reflects happened (RFC 3339)."""

ENDPOINTS_OVER_CAPACITY = "endpoints.kubernetes.io/over-capacity"
"""Set to ``truncated`` when more than ``MAX_ENDPOINTS_PER_OBJECT`` addresses were cut off."""

MAX_ENDPOINTS_PER_OBJECT = 1000
"""The endpoints controller keeps at most this many addresses in one Endpoints object."""


class EndpointAddress(KubeModel):
    ip: str = ""
    hostname: str | None = None
    node_name: str | None = None
    target_ref: ObjectReference | None = None


class EndpointPort(KubeModel):
    name: str | None = None
    port: int = 0
    protocol: str | None = None
    app_protocol: str | None = None


class EndpointSubset(KubeModel):
    addresses: list[EndpointAddress] | None = None
    not_ready_addresses: list[EndpointAddress] | None = None
    ports: list[EndpointPort] | None = None


class Endpoints(KubeModel):
    api_version: str = "v1"
    kind: str = "Endpoints"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    subsets: list[EndpointSubset] | None = None
