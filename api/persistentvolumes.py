"""core/v1 PersistentVolume and PersistentVolumeClaim: storage a pod can outlive.

Why: a claim (namespaced) asks for storage by size, access modes and class; a volume
(cluster-scoped) is a piece of storage; the PV controller binds one to the other and a pod
mounts the claim. The kinds are served here so kubectl, the official client and the later
controller, provisioner and kubelet share one typed shape.

Wire facts kept here: ``capacity`` and ``resources.requests`` are quantities held as their
strings (``api.core.Quantity``); both kinds carry a ``status`` written through ``/status`` only;
the defaults (``persistentVolumeReclaimPolicy: Retain``, ``volumeMode: Filesystem``,
``status.phase: Pending``) are ``api.defaults``'; spec immutability is ``api.validation``'s.
Volume sources kubelite will act on (``hostPath``, ``local``) are typed; the cloud and network
sources are declared free-form so a manifest naming them round-trips and a typo is still a typo.

Limits: nothing here binds, provisions or mounts.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from api.core import HostPathVolumeSource, NodeSelector, ObjectReference, ResourceList
from api.meta import KubeModel, LabelSelectorSpec, ObjectMeta

__all__ = [
    "ACCESS_MODES",
    "LocalVolumeSource",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "PersistentVolumeClaimCondition",
    "PersistentVolumeClaimSpec",
    "PersistentVolumeClaimStatus",
    "PersistentVolumeSpec",
    "PersistentVolumeStatus",
    "VolumeNodeAffinity",
    "VolumeResourceRequirements",
]

ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")
"""The access modes Kubernetes accepts, in the order its error messages list them."""

FreeForm = dict[str, Any]


class LocalVolumeSource(KubeModel):
    path: str
    fs_type: str | None = None


class VolumeNodeAffinity(KubeModel):
    required: NodeSelector | None = None


class PersistentVolumeSpec(KubeModel):
    capacity: ResourceList | None = None
    access_modes: list[str] | None = None
    claim_ref: ObjectReference | None = None
    persistent_volume_reclaim_policy: str | None = None
    storage_class_name: str | None = None
    mount_options: list[str] | None = None
    volume_mode: str | None = None
    node_affinity: VolumeNodeAffinity | None = None
    volume_attributes_class_name: str | None = None
    host_path: HostPathVolumeSource | None = None
    local: LocalVolumeSource | None = None
    csi: FreeForm | None = None
    nfs: FreeForm | None = None
    iscsi: FreeForm | None = None
    fc: FreeForm | None = None
    rbd: FreeForm | None = None
    cephfs: FreeForm | None = None
    cinder: FreeForm | None = None
    glusterfs: FreeForm | None = None
    flex_volume: FreeForm | None = None
    flocker: FreeForm | None = None
    gce_persistent_disk: FreeForm | None = None
    aws_elastic_block_store: FreeForm | None = None
    azure_file: FreeForm | None = None
    azure_disk: FreeForm | None = None
    vsphere_volume: FreeForm | None = Field(default=None, alias="vsphereVolume")
    quobyte: FreeForm | None = None
    photon_persistent_disk: FreeForm | None = None
    portworx_volume: FreeForm | None = None
    scale_io: FreeForm | None = Field(default=None, alias="scaleIO")
    storageos: FreeForm | None = None


class PersistentVolumeStatus(KubeModel):
    phase: str | None = None
    message: str | None = None
    reason: str | None = None
    last_phase_transition_time: str | None = None


class PersistentVolume(KubeModel):
    api_version: str = "v1"
    kind: str = "PersistentVolume"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PersistentVolumeSpec = Field(default_factory=PersistentVolumeSpec)
    status: PersistentVolumeStatus = Field(default_factory=PersistentVolumeStatus)


class VolumeResourceRequirements(KubeModel):
    limits: ResourceList | None = None
    requests: ResourceList | None = None


class PersistentVolumeClaimSpec(KubeModel):
    access_modes: list[str] | None = None
    selector: LabelSelectorSpec | None = None
    resources: VolumeResourceRequirements | None = None
    volume_name: str | None = None
    storage_class_name: str | None = None
    volume_mode: str | None = None
    data_source: FreeForm | None = None
    data_source_ref: FreeForm | None = None
    volume_attributes_class_name: str | None = None


class PersistentVolumeClaimCondition(KubeModel):
    type: str
    status: str
    last_probe_time: str | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class PersistentVolumeClaimStatus(KubeModel):
    phase: str | None = None
    access_modes: list[str] | None = None
    capacity: ResourceList | None = None
    conditions: list[PersistentVolumeClaimCondition] | None = None
    allocated_resources: ResourceList | None = None
    allocated_resource_statuses: dict[str, str] | None = None
    current_volume_attributes_class_name: str | None = None
    modify_volume_status: FreeForm | None = None


class PersistentVolumeClaim(KubeModel):
    api_version: str = "v1"
    kind: str = "PersistentVolumeClaim"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PersistentVolumeClaimSpec = Field(default_factory=PersistentVolumeClaimSpec)
    status: PersistentVolumeClaimStatus = Field(default_factory=PersistentVolumeClaimStatus)
