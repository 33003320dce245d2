"""core/v1 configuration kinds: ConfigMap, Secret and ServiceAccount.

Why: these are what a pod is configured from (env ``valueFrom``/``envFrom``, configMap and
secret volumes, ``imagePullSecrets``) and what client libraries' own tests reach for first, so
they must read and write exactly as a real cluster's do.

Wire facts kept here: a Secret's ``data`` and a ConfigMap's ``binaryData`` hold base64 strings
(Go ``[]byte`` fields); ``stringData`` is write-only — ``api.defaults`` merges it into ``data``
before anything is stored, so it is never stored or returned; ``type`` defaults to ``Opaque``.
Key syntax, sizes, per-type required keys and ``immutable`` are ``api.validation``'s.

Limits: no token controller fills service-account-token Secrets (token projection comes with
authentication); ``ServiceAccount.secrets`` is stored as written.
"""

from __future__ import annotations

from pydantic import Field

from api.core import LocalObjectReference, ObjectReference
from api.meta import KubeModel, ObjectMeta

__all__ = [
    "SECRET_TYPES",
    "ConfigMap",
    "Secret",
    "ServiceAccount",
]

SECRET_TYPES = (
    "Opaque",
    "kubernetes.io/service-account-token",
    "kubernetes.io/dockercfg",
    "kubernetes.io/dockerconfigjson",
    "kubernetes.io/basic-auth",
    "kubernetes.io/ssh-auth",
    "kubernetes.io/tls",
    "bootstrap.kubernetes.io/token",
)
"""The Secret types Kubernetes names (``core.SecretType*``); any other string is accepted too."""


class ConfigMap(KubeModel):
    api_version: str = "v1"
    kind: str = "ConfigMap"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    data: dict[str, str] | None = None
    binary_data: dict[str, str] | None = None
    """Base64 of the bytes, as Go encodes ``[]byte``."""
    immutable: bool | None = None


class Secret(KubeModel):
    api_version: str = "v1"
    kind: str = "Secret"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    data: dict[str, str] | None = None
    """Base64 of the bytes, as Go encodes ``[]byte``."""
    string_data: dict[str, str] | None = None
    """Write-only: merged into ``data`` on every write, never stored."""
    type: str | None = None
    immutable: bool | None = None


class ServiceAccount(KubeModel):
    api_version: str = "v1"
    kind: str = "ServiceAccount"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    secrets: list[ObjectReference] | None = None
    image_pull_secrets: list[LocalObjectReference] | None = None
    automount_service_account_token: bool | None = None
