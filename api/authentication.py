"""authentication.k8s.io/v1: TokenReview and SelfSubjectReview — "who is this?" over the API.

Why: a TokenReview hands the apiserver a bearer token and gets back the user it stands for
(webhook token authentication, the kubelet's delegated authentication); a SelfSubjectReview
answers ``kubectl auth whoami`` with the user the request itself was authenticated as. Both are
created (POST) and answered in the same response; nothing is stored.

Limits: the models check shape only; ``services.apiserver.reviews`` answers them.
"""

from __future__ import annotations

from pydantic import Field

from api.meta import KubeModel, ObjectMeta

__all__ = [
    "GROUP",
    "SelfSubjectReview",
    "SelfSubjectReviewStatus",
    "TokenReview",
    "TokenReviewSpec",
    "TokenReviewStatus",
    "UserInfo",
]

GROUP = "authentication.k8s.io"


class UserInfo(KubeModel):
    username: str | None = None
    uid: str | None = None
    groups: list[str] | None = None
    extra: dict[str, list[str]] | None = None


class TokenReviewSpec(KubeModel):
    token: str | None = None
    audiences: list[str] | None = None


class TokenReviewStatus(KubeModel):
    authenticated: bool | None = None
    user: UserInfo | None = None
    audiences: list[str] | None = None
    error: str | None = None


class TokenReview(KubeModel):
    api_version: str = "authentication.k8s.io/v1"
    kind: str = "TokenReview"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TokenReviewSpec
    status: TokenReviewStatus | None = None


class SelfSubjectReviewStatus(KubeModel):
    user_info: UserInfo | None = None


class SelfSubjectReview(KubeModel):
    api_version: str = "authentication.k8s.io/v1"
    kind: str = "SelfSubjectReview"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    status: SelfSubjectReviewStatus | None = None
