"""metrics.k8s.io/v1beta1: NodeMetrics and PodMetrics, what ``kubectl top`` and the HPA read.

Why: Kubernetes serves resource metrics through an aggregated API (metrics-server) rather than
its own storage; kubelite's apiserver serves the same group itself, scraping the kubelets
(``services/apiserver/resource_metrics.py``). These models give the kinds their wire shape:
``timestamp`` (when measured), ``window`` (over how long the CPU rate was taken) and ``usage``
(``cpu`` in nanocores such as ``"250000000n"``, ``memory`` in ``Ki``) for a node, and per
container for a pod.

Limits: read-only kinds (get and list); never stored, never watched.
"""

from __future__ import annotations

from pydantic import Field

from api.core import ResourceList
from api.meta import KubeModel, ObjectMeta

__all__ = ["ContainerMetrics", "NodeMetrics", "PodMetrics"]


class NodeMetrics(KubeModel):
    api_version: str = "metrics.k8s.io/v1beta1"
    kind: str = "NodeMetrics"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    timestamp: str = ""
    window: str = ""
    usage: ResourceList = Field(default_factory=dict)


class ContainerMetrics(KubeModel):
    name: str
    usage: ResourceList = Field(default_factory=dict)


class PodMetrics(KubeModel):
    api_version: str = "metrics.k8s.io/v1beta1"
    kind: str = "PodMetrics"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    timestamp: str = ""
    window: str = ""
    containers: list[ContainerMetrics] = Field(default_factory=list)
