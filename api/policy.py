"""policy/v1: Eviction — the body of a ``pods/eviction`` POST.

Why: evicting a pod (node drain, the node-lifecycle controller) is a create on the pod's
``eviction`` subresource; the body names the pod and may carry ``deleteOptions``. kubelite
does not implement PodDisruptionBudgets, so an eviction is a graceful delete.
"""

from __future__ import annotations

from pydantic import Field

from api.meta import DeleteOptions, KubeModel, ObjectMeta

__all__ = ["Eviction"]


class Eviction(KubeModel):
    api_version: str = "policy/v1"
    kind: str = "Eviction"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    delete_options: DeleteOptions | None = None
