"""audit.k8s.io/v1: the audit ``Policy`` people write and the ``Event`` lines the apiserver logs.

Why: ``--audit-policy-file`` takes the same YAML a real cluster takes, and a log consumer built
for Kubernetes' audit log (jq scripts, log shippers, Falco's k8saudit) must read kubelite's
lines unchanged. The shapes live here once, beside the other kinds; the apiserver's
``audit_policy`` decides levels from a ``Policy`` and ``audit`` writes ``Event`` JSON.

A policy is read strictly, as kube-apiserver reads it: an unknown field, an unknown level or
stage is an error at start, not a silently wider or narrower log.

Limits: shapes only. Which rule matches a request is ``services.apiserver.audit_policy``'s;
the apiserver writes events as plain dicts of this shape (one per request, no model on the hot
path) — ``Event`` is the schema they are checked against.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from api.meta import KubeModel, ObjectMeta

__all__ = [
    "LEVELS",
    "STAGES",
    "Event",
    "GroupResources",
    "Level",
    "ObjectReference",
    "Policy",
    "PolicyRule",
    "Stage",
    "UserInfo",
]

Level = Literal["None", "Metadata", "Request", "RequestResponse"]
LEVELS: tuple[Level, ...] = ("None", "Metadata", "Request", "RequestResponse")
"""In increasing order of what an event carries."""

Stage = Literal["RequestReceived", "ResponseStarted", "ResponseComplete", "Panic"]
STAGES: tuple[Stage, ...] = ("RequestReceived", "ResponseStarted", "ResponseComplete", "Panic")


class _Strict(KubeModel):
    """A configuration shape: unknown fields are refused (kube-apiserver decodes it strictly)."""

    model_config = ConfigDict(extra="forbid")


class GroupResources(_Strict):
    group: str = ""
    """The API group; "" is the core group."""
    resources: list[str] = Field(default_factory=list)
    """Plural names, ``resource/subresource``, ``*``, ``*/subresource`` or ``resource/*``;
    empty matches every resource of the group."""
    resource_names: list[str] = Field(default_factory=list)


class PolicyRule(_Strict):
    level: Level
    users: list[str] = Field(default_factory=list)
    user_groups: list[str] = Field(default_factory=list)
    verbs: list[str] = Field(default_factory=list)
    resources: list[GroupResources] = Field(default_factory=list)
    namespaces: list[str] = Field(default_factory=list)
    """"" matches cluster-scoped resources."""
    non_resource_urls: list[str] = Field(default_factory=list, alias="nonResourceURLs")
    """Paths, or prefixes ending in ``*``."""
    omit_stages: list[Stage] = Field(default_factory=list)
    omit_managed_fields: bool | None = None


class Policy(_Strict):
    api_version: Literal["audit.k8s.io/v1"] = "audit.k8s.io/v1"
    kind: Literal["Policy"] = "Policy"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    rules: list[PolicyRule] = Field(default_factory=list)
    """First match wins; a request no rule matches is not logged."""
    omit_stages: list[Stage] = Field(default_factory=list)
    omit_managed_fields: bool = False


class UserInfo(KubeModel):
    username: str = ""
    uid: str | None = None
    groups: list[str] | None = None
    extra: dict[str, list[str]] | None = None


class ObjectReference(KubeModel):
    resource: str | None = None
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None
    api_group: str | None = None
    api_version: str | None = None
    resource_version: str | None = None
    subresource: str | None = None


class Event(KubeModel):
    """One audit event, one JSON line of the audit log."""

    api_version: Literal["audit.k8s.io/v1"] = "audit.k8s.io/v1"
    kind: Literal["Event"] = "Event"
    level: Level
    audit_id: str = Field(alias="auditID")
    stage: Stage
    request_uri: str = Field(alias="requestURI")
    verb: str
    user: UserInfo
    impersonated_user: UserInfo | None = None
    source_ips: list[str] | None = Field(default=None, alias="sourceIPs")
    user_agent: str | None = None
    object_ref: ObjectReference | None = None
    response_status: dict[str, Any] | None = None
    request_object: dict[str, Any] | list[Any] | None = None
    response_object: dict[str, Any] | None = None
    request_received_timestamp: str
    stage_timestamp: str
    annotations: dict[str, str] | None = None
