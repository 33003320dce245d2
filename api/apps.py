"""apps/v1: ReplicaSet and Deployment.

Why: the controller-manager reconciles these from informer caches and the apiserver validates
them; both want typed access to ``spec.selector``, ``spec.template`` and the rollout strategy.
Models follow ``api.meta.KubeModel`` (camelCase, unknown fields kept, strict types).

Unlike the core ReplicationController (``selector`` is a plain label map), apps/v1 selectors are
``metav1.LabelSelector`` (``matchLabels``/``matchExpressions``), required and immutable.
``maxSurge``/``maxUnavailable`` are IntOrString (``1`` or ``"25%"``) and kept as given.
"""

from __future__ import annotations

from pydantic import Field

from api.core import PodTemplateSpec
from api.meta import KubeModel, LabelSelectorSpec, ObjectMeta

__all__ = [
    "Deployment",
    "DeploymentCondition",
    "DeploymentSpec",
    "DeploymentStatus",
    "DeploymentStrategy",
    "IntOrString",
    "ReplicaSet",
    "ReplicaSetCondition",
    "ReplicaSetSpec",
    "ReplicaSetStatus",
    "RollingUpdateDeployment",
]

IntOrString = int | str


class ReplicaSetSpec(KubeModel):
    replicas: int | None = None
    min_ready_seconds: int | None = None
    selector: LabelSelectorSpec | None = None
    template: PodTemplateSpec | None = None


class ReplicaSetCondition(KubeModel):
    type: str
    status: str
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class ReplicaSetStatus(KubeModel):
    replicas: int = 0
    fully_labeled_replicas: int | None = None
    ready_replicas: int | None = None
    available_replicas: int | None = None
    terminating_replicas: int | None = None
    observed_generation: int | None = None
    conditions: list[ReplicaSetCondition] | None = None


class ReplicaSet(KubeModel):
    api_version: str = "apps/v1"
    kind: str = "ReplicaSet"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ReplicaSetSpec = Field(default_factory=ReplicaSetSpec)
    status: ReplicaSetStatus = Field(default_factory=ReplicaSetStatus)


class RollingUpdateDeployment(KubeModel):
    max_unavailable: IntOrString | None = None
    max_surge: IntOrString | None = None


class DeploymentStrategy(KubeModel):
    type: str | None = None
    rolling_update: RollingUpdateDeployment | None = None


class DeploymentSpec(KubeModel):
    replicas: int | None = None
    selector: LabelSelectorSpec | None = None
    template: PodTemplateSpec | None = None
    strategy: DeploymentStrategy | None = None
    min_ready_seconds: int | None = None
    revision_history_limit: int | None = None
    paused: bool | None = None
    progress_deadline_seconds: int | None = None


class DeploymentCondition(KubeModel):
    type: str
    status: str
    last_update_time: str | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class DeploymentStatus(KubeModel):
    observed_generation: int | None = None
    replicas: int | None = None
    updated_replicas: int | None = None
    ready_replicas: int | None = None
    available_replicas: int | None = None
    unavailable_replicas: int | None = None
    terminating_replicas: int | None = None
    conditions: list[DeploymentCondition] | None = None
    collision_count: int | None = None


class Deployment(KubeModel):
    api_version: str = "apps/v1"
    kind: str = "Deployment"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: DeploymentSpec = Field(default_factory=DeploymentSpec)
    status: DeploymentStatus = Field(default_factory=DeploymentStatus)
