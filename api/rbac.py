"""rbac.authorization.k8s.io/v1: Role, ClusterRole, RoleBinding and ClusterRoleBinding.

Why: these four kinds are the whole of role-based access control — a (Cluster)Role lists
``PolicyRule``s (verbs on API groups, resources, resource names, or non-resource URLs); a
(Cluster)RoleBinding grants one role to users, groups and service accounts. The apiserver's
RBAC authorizer reads them from its watch caches; the controller-manager's
``clusterrole-aggregation`` controller fills a ClusterRole carrying an ``aggregationRule`` with
the rules of the ClusterRoles its label selectors pick (that is how ``admin``, ``edit`` and
``view`` grow when a role labelled ``rbac.authorization.k8s.io/aggregate-to-edit: "true"``
appears).

Wire facts kept here: ``rules`` and a rule's ``verbs`` are always serialised (Go fields without
``omitempty``); a binding's ``roleRef`` is required and cannot change; a subject's ``apiGroup``
is ``rbac.authorization.k8s.io`` for users and groups and ``""`` for service accounts
(``api.defaults`` fills it in as Kubernetes' defaulting does).

Limits: the models check shape only; ``api.validation`` holds Kubernetes' semantic rules.
"""

from __future__ import annotations

from pydantic import Field

from api.meta import KubeModel, LabelSelectorSpec, ObjectMeta

__all__ = [
    "AGGREGATE_TO_LABEL_PREFIX",
    "AUTOUPDATE_ANNOTATION",
    "GROUP",
    "GROUP_KIND",
    "SERVICE_ACCOUNT_KIND",
    "USER_KIND",
    "AggregationRule",
    "ClusterRole",
    "ClusterRoleBinding",
    "PolicyRule",
    "Role",
    "RoleBinding",
    "RoleRef",
    "Subject",
]

GROUP = "rbac.authorization.k8s.io"
USER_KIND = "User"
GROUP_KIND = "Group"
SERVICE_ACCOUNT_KIND = "ServiceAccount"

AUTOUPDATE_ANNOTATION = "rbac.authorization.kubernetes.io/autoupdate"
"""``"true"`` on a bootstrap role or binding: the apiserver restores it at every start; set it
to ``"false"`` to keep your own edits."""

AGGREGATE_TO_LABEL_PREFIX = "rbac.authorization.k8s.io/aggregate-to-"
"""``<prefix>admin|edit|view: "true"`` adds a ClusterRole's rules to that default role."""


class PolicyRule(KubeModel):
    verbs: list[str] = Field(default_factory=list)
    api_groups: list[str] | None = None
    resources: list[str] | None = None
    resource_names: list[str] | None = None
    non_resource_urls: list[str] | None = Field(default=None, alias="nonResourceURLs")


class AggregationRule(KubeModel):
    cluster_role_selectors: list[LabelSelectorSpec] | None = None


class Role(KubeModel):
    api_version: str = "rbac.authorization.k8s.io/v1"
    kind: str = "Role"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    rules: list[PolicyRule] = Field(default_factory=list)


class ClusterRole(KubeModel):
    api_version: str = "rbac.authorization.k8s.io/v1"
    kind: str = "ClusterRole"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    rules: list[PolicyRule] = Field(default_factory=list)
    aggregation_rule: AggregationRule | None = None


class Subject(KubeModel):
    kind: str
    name: str
    api_group: str | None = None
    namespace: str | None = None


class RoleRef(KubeModel):
    api_group: str
    kind: str
    name: str


class RoleBinding(KubeModel):
    api_version: str = "rbac.authorization.k8s.io/v1"
    kind: str = "RoleBinding"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    subjects: list[Subject] | None = None
    role_ref: RoleRef


class ClusterRoleBinding(KubeModel):
    api_version: str = "rbac.authorization.k8s.io/v1"
    kind: str = "ClusterRoleBinding"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    subjects: list[Subject] | None = None
    role_ref: RoleRef
