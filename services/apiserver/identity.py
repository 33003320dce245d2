"""Who is asking and what for: the seam between authentication, authorization, admission and audit.

Why a module of its own: authentication (x509 client certificates, bearer tokens,
service-account JWTs) decides *who* a request comes from; authorization (RBAC, the Node
authorizer) decides whether that user may do *what* the request asks; admission (NodeRestriction)
and the audit log read both. Each of those lives in a module of its own and meets the others
only here, as Kubernetes' ``user.Info`` and ``authorizer.Attributes`` do.

What it owns: ``UserInfo`` (name, uid, groups, extra), the well-known users and groups,
``RequestAttributes`` (user, verb, resource or non-resource path), ``Decision`` and the
``Authorizer`` protocol, and where a request carries its user (``request_user`` /
``set_request_user``).

What it does not guarantee: nothing here authenticates or authorizes; a request on the
loopback-only insecure port carries ``INSECURE_SUPERUSER``, as Kubernetes' insecure port did.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from aiohttp import web

__all__ = [
    "ANONYMOUS",
    "AUTHENTICATED_GROUP",
    "INSECURE_SUPERUSER",
    "MASTERS_GROUP",
    "UNAUTHENTICATED_GROUP",
    "Authorizer",
    "Decision",
    "RequestAttributes",
    "UserInfo",
    "request_user",
    "set_request_user",
]

AUTHENTICATED_GROUP = "system:authenticated"
UNAUTHENTICATED_GROUP = "system:unauthenticated"
MASTERS_GROUP = "system:masters"
"""Members are allowed everything, before any authorizer is asked (as in Kubernetes)."""


@dataclass(frozen=True, slots=True)
class UserInfo:
    """An authenticated identity (Kubernetes' ``user.Info``)."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


ANONYMOUS = UserInfo(name="system:anonymous", groups=(UNAUTHENTICATED_GROUP,))
INSECURE_SUPERUSER = UserInfo(name="system:unsecured", groups=(MASTERS_GROUP, AUTHENTICATED_GROUP))
"""The user of every request on the insecure (loopback, plain-HTTP) port."""


@dataclass(frozen=True, slots=True)
class RequestAttributes:
    """What a request asks for (Kubernetes' ``authorizer.Attributes``).

    A resource request names ``api_group``/``resource``/``subresource``/``namespace``/``name``
    and a Kubernetes verb (get, list, watch, create, update, patch, delete, deletecollection,
    or impersonate/escalate/bind/approve...); a non-resource request names ``path`` and the
    lower-cased HTTP method as its verb.
    """

    user: UserInfo
    verb: str
    resource_request: bool
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""


class Decision(enum.Enum):
    ALLOW = "allow"
    DENY = "deny"
    NO_OPINION = "no-opinion"


class Authorizer(Protocol):
    """One link of the authorization chain; the first ALLOW or DENY wins."""

    async def authorize(self, attrs: RequestAttributes) -> tuple[Decision, str]:
        """The decision and, for DENY/NO_OPINION, the reason (shown in the 403 message)."""
        ...


_USER: web.RequestKey[UserInfo] = web.RequestKey("kubelite.user", UserInfo)


def set_request_user(request: web.Request, user: UserInfo) -> None:
    """Record who ``request`` comes from (the authentication middleware does this)."""
    request[_USER] = user


def request_user(request: web.Request) -> UserInfo:
    """Who ``request`` comes from; ``INSECURE_SUPERUSER`` when nothing authenticated it."""
    user = request.get(_USER)
    return user if isinstance(user, UserInfo) else INSECURE_SUPERUSER
