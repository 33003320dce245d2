"""autoscaling/v1: Scale — the ``/scale`` subresource of RCs, ReplicaSets and Deployments.

Why: ``kubectl scale`` reads and writes ``.../scale`` rather than the whole object. The apiserver
builds a Scale from the parent (``spec.replicas``, ``status.replicas``, and ``status.selector``
as a label-selector *string*, e.g. ``app=web``) and applies a written Scale back to
``spec.replicas`` only.
"""

from __future__ import annotations

from pydantic import Field

from api.meta import KubeModel, ObjectMeta

__all__ = ["Scale", "ScaleSpec", "ScaleStatus"]


class ScaleSpec(KubeModel):
    replicas: int | None = None


class ScaleStatus(KubeModel):
    replicas: int = 0
    selector: str | None = None


class Scale(KubeModel):
    api_version: str = "autoscaling/v1"
    kind: str = "Scale"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ScaleSpec = Field(default_factory=ScaleSpec)
    status: ScaleStatus = Field(default_factory=ScaleStatus)
