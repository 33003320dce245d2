"""storage.k8s.io/v1 StorageClass: how claims that name a class get their volumes.

Why: a PersistentVolumeClaim names a class (or gets the default one, marked with the
``storageclass.kubernetes.io/is-default-class: "true"`` annotation, from admission); the class
says which provisioner makes its volumes, with what parameters, whether they are kept or
deleted after release (``reclaimPolicy``, default ``Delete``) and when binding happens
(``volumeBindingMode``: ``Immediate``, the default, or ``WaitForFirstConsumer``).

kubelite's own class is ``local-path`` (provisioner ``kubelite.io/local-path``: directories
under a node's state dir, as k3s' ``rancher.io/local-path`` does), created by the apiserver at
bootstrap; its constants live here so the apiserver and the provisioner agree on them.

Limits: ``provisioner``, ``parameters``, ``reclaimPolicy`` and ``volumeBindingMode`` cannot
change after creation (``api.validation``); ``allowedTopologies`` is stored, not interpreted.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from api.meta import KubeModel, ObjectMeta

__all__ = [
    "DEFAULT_CLASS_ANNOTATION",
    "LOCAL_PATH_CLASS",
    "LOCAL_PATH_PROVISIONER",
    "LOCAL_PATH_ROOT_ANNOTATION",
    "SELECTED_NODE_ANNOTATION",
    "StorageClass",
    "is_default_class",
]

DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
"""``"true"`` marks the class a claim without ``storageClassName`` gets."""
BETA_DEFAULT_CLASS_ANNOTATION = "storageclass.beta.kubernetes.io/is-default-class"
"""The older spelling, still honoured by Kubernetes' DefaultStorageClass admission."""

LOCAL_PATH_CLASS = "local-path"
LOCAL_PATH_PROVISIONER = "kubelite.io/local-path"
LOCAL_PATH_ROOT_ANNOTATION = "kubelite.io/local-path-root"
"""On a Node: the directory its kubelet keeps local-path volumes in (``<state dir>/storage``)."""
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
"""On a WaitForFirstConsumer claim: the node the scheduler put its first pod on."""


def is_default_class(obj: Any) -> bool:
    """True for a StorageClass dict annotated as the default (either spelling)."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    annotations = (meta or {}).get("annotations") or {}
    return "true" in (
        annotations.get(DEFAULT_CLASS_ANNOTATION),
        annotations.get(BETA_DEFAULT_CLASS_ANNOTATION),
    )


class StorageClass(KubeModel):
    api_version: str = "storage.k8s.io/v1"
    kind: str = "StorageClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    provisioner: str = ""
    """Always on the wire (a Go field without ``omitempty``)."""
    parameters: dict[str, str] | None = None
    reclaim_policy: str | None = None
    mount_options: list[str] | None = None
    allow_volume_expansion: bool | None = None
    volume_binding_mode: str | None = None
    allowed_topologies: list[dict[str, Any]] | None = None
