"""apps/v1: ReplicaSet, Deployment, DaemonSet, StatefulSet and ControllerRevision.

Why: the controller-manager reconciles these from informer caches and the apiserver validates
them; all want typed access to ``spec.selector``, ``spec.template`` and the rollout strategy.
Models follow ``api.meta.KubeModel`` (camelCase, unknown fields kept, strict types).
A DaemonSet runs one pod per (matching) node; a StatefulSet runs ``replicas`` pods with stable
names (``web-0``, ``web-1`` ...) and one claim per pod from each ``volumeClaimTemplates`` entry;
both record their pod templates' history as ControllerRevisions (a snapshot in ``data`` with a
``revision`` number), which is what ``kubectl rollout history``/``undo`` read.

Unlike the core ReplicationController (``selector`` is a plain label map), apps/v1 selectors are
``metav1.LabelSelector`` (``matchLabels``/``matchExpressions``), required and immutable.
``maxSurge``/``maxUnavailable`` are IntOrString (``1`` or ``"25%"``) and kept as given.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from api.core import PodTemplateSpec
from api.meta import KubeModel, LabelSelectorSpec, ObjectMeta
from api.persistentvolumes import PersistentVolumeClaim

__all__ = [
    "ControllerRevision",
    "DaemonSet",
    "DaemonSetCondition",
    "DaemonSetSpec",
    "DaemonSetStatus",
    "DaemonSetUpdateStrategy",
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
    "RollingUpdateDaemonSet",
    "RollingUpdateDeployment",
    "RollingUpdateStatefulSetStrategy",
    "StatefulSet",
    "StatefulSetCondition",
    "StatefulSetOrdinals",
    "StatefulSetPersistentVolumeClaimRetentionPolicy",
    "StatefulSetSpec",
    "StatefulSetStatus",
    "StatefulSetUpdateStrategy",
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


class RollingUpdateDaemonSet(KubeModel):
    max_unavailable: IntOrString | None = None
    max_surge: IntOrString | None = None


class DaemonSetUpdateStrategy(KubeModel):
    type: str | None = None
    rolling_update: RollingUpdateDaemonSet | None = None


class DaemonSetSpec(KubeModel):
    selector: LabelSelectorSpec | None = None
    template: PodTemplateSpec | None = None
    update_strategy: DaemonSetUpdateStrategy | None = None
    min_ready_seconds: int | None = None
    revision_history_limit: int | None = None


class DaemonSetCondition(KubeModel):
    type: str
    status: str
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class DaemonSetStatus(KubeModel):
    current_number_scheduled: int = 0
    number_misscheduled: int = 0
    desired_number_scheduled: int = 0
    number_ready: int = 0
    observed_generation: int | None = None
    updated_number_scheduled: int | None = None
    number_available: int | None = None
    number_unavailable: int | None = None
    collision_count: int | None = None
    conditions: list[DaemonSetCondition] | None = None


class DaemonSet(KubeModel):
    api_version: str = "apps/v1"
    kind: str = "DaemonSet"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: DaemonSetSpec = Field(default_factory=DaemonSetSpec)
    status: DaemonSetStatus = Field(default_factory=DaemonSetStatus)


class RollingUpdateStatefulSetStrategy(KubeModel):
    partition: int | None = None
    max_unavailable: IntOrString | None = None


class StatefulSetUpdateStrategy(KubeModel):
    type: str | None = None
    rolling_update: RollingUpdateStatefulSetStrategy | None = None


class StatefulSetPersistentVolumeClaimRetentionPolicy(KubeModel):
    when_deleted: str | None = None
    when_scaled: str | None = None


class StatefulSetOrdinals(KubeModel):
    start: int = 0


class StatefulSetSpec(KubeModel):
    replicas: int | None = None
    selector: LabelSelectorSpec | None = None
    template: PodTemplateSpec | None = None
    volume_claim_templates: list[PersistentVolumeClaim] | None = None
    service_name: str = ""
    """Always on the wire; may be empty (a StatefulSet without a governing Service)."""
    pod_management_policy: str | None = None
    update_strategy: StatefulSetUpdateStrategy | None = None
    revision_history_limit: int | None = None
    min_ready_seconds: int | None = None
    persistent_volume_claim_retention_policy: (
        StatefulSetPersistentVolumeClaimRetentionPolicy | None
    ) = None
    ordinals: StatefulSetOrdinals | None = None


class StatefulSetCondition(KubeModel):
    type: str
    status: str
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class StatefulSetStatus(KubeModel):
    observed_generation: int | None = None
    replicas: int = 0
    ready_replicas: int | None = None
    current_replicas: int | None = None
    updated_replicas: int | None = None
    current_revision: str | None = None
    update_revision: str | None = None
    collision_count: int | None = None
    conditions: list[StatefulSetCondition] | None = None
    available_replicas: int = 0


class StatefulSet(KubeModel):
    api_version: str = "apps/v1"
    kind: str = "StatefulSet"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: StatefulSetSpec = Field(default_factory=StatefulSetSpec)
    status: StatefulSetStatus = Field(default_factory=StatefulSetStatus)


class ControllerRevision(KubeModel):
    api_version: str = "apps/v1"
    kind: str = "ControllerRevision"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    data: dict[str, Any] | None = None
    """The snapshot (for DaemonSets and StatefulSets, a patch holding ``spec.template``)."""
    revision: int = 0
