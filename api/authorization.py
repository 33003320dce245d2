"""authorization.k8s.io/v1: the access reviews — "may this user do that?" asked over the API.

Why: ``kubectl auth can-i`` (SelfSubjectAccessReview, SelfSubjectRulesReview for ``--list``),
webhooks and aggregated servers (SubjectAccessReview, LocalSubjectAccessReview) ask the
apiserver's authorizer a question instead of trying the request. Each review is created
(POST) and answered in the same response, with ``status`` filled in; nothing is stored.

Limits: the models check shape only; ``services.apiserver.reviews`` answers them.
"""

from __future__ import annotations

from pydantic import Field

from api.meta import KubeModel, ObjectMeta

__all__ = [
    "GROUP",
    "LocalSubjectAccessReview",
    "NonResourceAttributes",
    "NonResourceRule",
    "ResourceAttributes",
    "ResourceRule",
    "SelfSubjectAccessReview",
    "SelfSubjectAccessReviewSpec",
    "SelfSubjectRulesReview",
    "SelfSubjectRulesReviewSpec",
    "SubjectAccessReview",
    "SubjectAccessReviewSpec",
    "SubjectAccessReviewStatus",
    "SubjectRulesReviewStatus",
]

GROUP = "authorization.k8s.io"


class ResourceAttributes(KubeModel):
    namespace: str | None = None
    verb: str | None = None
    group: str | None = None
    version: str | None = None
    resource: str | None = None
    subresource: str | None = None
    name: str | None = None


class NonResourceAttributes(KubeModel):
    path: str | None = None
    verb: str | None = None


class SubjectAccessReviewSpec(KubeModel):
    resource_attributes: ResourceAttributes | None = None
    non_resource_attributes: NonResourceAttributes | None = None
    user: str | None = None
    groups: list[str] | None = None
    extra: dict[str, list[str]] | None = None
    uid: str | None = None


class SelfSubjectAccessReviewSpec(KubeModel):
    resource_attributes: ResourceAttributes | None = None
    non_resource_attributes: NonResourceAttributes | None = None


class SubjectAccessReviewStatus(KubeModel):
    allowed: bool = False
    denied: bool | None = None
    reason: str | None = None
    evaluation_error: str | None = None


class SubjectAccessReview(KubeModel):
    api_version: str = "authorization.k8s.io/v1"
    kind: str = "SubjectAccessReview"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: SubjectAccessReviewSpec
    status: SubjectAccessReviewStatus | None = None


class LocalSubjectAccessReview(KubeModel):
    api_version: str = "authorization.k8s.io/v1"
    kind: str = "LocalSubjectAccessReview"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: SubjectAccessReviewSpec
    status: SubjectAccessReviewStatus | None = None


class SelfSubjectAccessReview(KubeModel):
    api_version: str = "authorization.k8s.io/v1"
    kind: str = "SelfSubjectAccessReview"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: SelfSubjectAccessReviewSpec
    status: SubjectAccessReviewStatus | None = None


class ResourceRule(KubeModel):
    verbs: list[str] = Field(default_factory=list)
    api_groups: list[str] | None = None
    resources: list[str] | None = None
    resource_names: list[str] | None = None


class NonResourceRule(KubeModel):
    verbs: list[str] = Field(default_factory=list)
    non_resource_urls: list[str] | None = Field(default=None, alias="nonResourceURLs")


class SubjectRulesReviewStatus(KubeModel):
    resource_rules: list[ResourceRule] = Field(default_factory=list)
    non_resource_rules: list[NonResourceRule] = Field(default_factory=list)
    incomplete: bool = False
    evaluation_error: str | None = None


class SelfSubjectRulesReviewSpec(KubeModel):
    namespace: str | None = None


class SelfSubjectRulesReview(KubeModel):
    api_version: str = "authorization.k8s.io/v1"
    kind: str = "SelfSubjectRulesReview"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: SelfSubjectRulesReviewSpec = Field(default_factory=SelfSubjectRulesReviewSpec)
    status: SubjectRulesReviewStatus | None = None
