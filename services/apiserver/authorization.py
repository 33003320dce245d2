"""The authorization middleware: every request is asked about before a handler runs.

Why: Kubernetes' ``WithAuthorization`` filter sits after authentication and impersonation and
before everything else; a request the authorizers do not allow is answered 403 ``Forbidden``
with a message naming the user, the verb and what was asked for —
``pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace
"default"`` — and never reaches storage. This module is that filter and the authorizer chain:

1. members of ``system:masters`` are allowed everything (Kubernetes' privileged-group
   authorizer; the insecure port's ``INSECURE_SUPERUSER`` is one, so nothing changes there);
2. the modes of ``--authorization-mode`` in order, ``Node,RBAC`` by default: the Node
   authorizer (``node_authorizer``: a kubelet reads what its pods reference) and RBAC
   (``services.apiserver.rbac``).

The first ALLOW wins; a request nobody allows is refused, the authorizers' reasons appended.

What it owns: ``AUTHORIZER`` (the chain, on the app), ``authorize_requests`` (the middleware:
impersonation first, then the request's own check, on what ``request_info_of`` read off the
request; the 403 is ``forbidden``'s). The last decision taken for a request — its own, or the
impersonation check that refused it — is left at ``request[audit.AUTHZ_DECISION]`` as
``(Decision, reason)``: the audit log's ``authorization.k8s.io/decision`` and ``/reason``.

Limits: no webhook, ABAC, AlwaysAllow or AlwaysDeny modes.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web
from aiohttp.typedefs import Handler

from api.rbac import GROUP
from services.apiserver.audit import AUTHZ_DECISION
from services.apiserver.context import ApiContext
from services.apiserver.forbidden import forbidden
from services.apiserver.identity import (
    MASTERS_GROUP,
    Authorizer,
    Decision,
    RequestAttributes,
    request_user,
    set_request_user,
)
from services.apiserver.impersonation import impersonate
from services.apiserver.node_authorizer import NodeAuthorizer, NodeCaches
from services.apiserver.rbac import RBACAuthorizer, RbacCaches
from services.apiserver.request_info import attributes_for, request_info_of
from services.apiserver.watchcache import WatchCache

__all__ = [
    "AUTHORIZER",
    "RBAC",
    "AuthorizerChain",
    "authorize_requests",
    "setup_authorization",
]


class AuthorizerChain:
    """``system:masters`` first, then each authorizer in order; the first ALLOW or DENY wins."""

    def __init__(self, authorizers: Sequence[Authorizer]) -> None:
        self.authorizers = tuple(authorizers)

    async def authorize(self, attrs: RequestAttributes) -> tuple[Decision, str]:
        if MASTERS_GROUP in attrs.user.groups:
            return Decision.ALLOW, ""
        reasons: list[str] = []
        for authorizer in self.authorizers:
            decision, reason = await authorizer.authorize(attrs)
            if decision is not Decision.NO_OPINION:
                return decision, reason
            if reason:
                reasons.append(reason)
        return Decision.NO_OPINION, "\n".join(reasons)


AUTHORIZER: web.AppKey[Authorizer] = web.AppKey("authorizer", Authorizer)
RBAC: web.AppKey[RBACAuthorizer] = web.AppKey("rbac_authorizer", RBACAuthorizer)
"""The RBAC link of the chain, for what asks it directly (rules reviews, the escalation check)."""


class _Recorded:
    """``authorizer``, each decision left on ``request`` for the audit log."""

    def __init__(self, authorizer: Authorizer, request: web.Request) -> None:
        self.authorizer = authorizer
        self.request = request

    async def authorize(self, attrs: RequestAttributes) -> tuple[Decision, str]:
        decision, reason = await self.authorizer.authorize(attrs)
        self.request[AUTHZ_DECISION] = (decision, reason)
        return decision, reason


@web.middleware
async def authorize_requests(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Impersonation (if asked for), then the request itself; 403 unless allowed."""
    authorizer = _Recorded(request.app[AUTHORIZER], request)
    user = await impersonate(request, request_user(request), authorizer=authorizer)
    set_request_user(request, user)
    if MASTERS_GROUP in user.groups:  # what the chain answers first, without the question
        request[AUTHZ_DECISION] = (Decision.ALLOW, "")
        return await handler(request)
    attrs = attributes_for(user, request_info_of(request))
    decision, reason = await authorizer.authorize(attrs)
    if decision is not Decision.ALLOW:
        raise forbidden(attrs, reason)
    return await handler(request)


def setup_authorization(app: web.Application, ctx: ApiContext) -> None:
    """Put the authorizer chain (masters, then ``--authorization-mode``'s authorizers over
    ``ctx``'s watch caches) on ``app``."""

    def cache(group: str, kind: str) -> WatchCache:
        found = ctx.cache(ctx.registry.require(group, kind))
        if found is None:
            raise KeyError(f"no watch cache for {kind}: cannot authorize")
        return found

    rbac = RBACAuthorizer(
        RbacCaches(
            roles=cache(GROUP, "Role"),
            cluster_roles=cache(GROUP, "ClusterRole"),
            role_bindings=cache(GROUP, "RoleBinding"),
            cluster_role_bindings=cache(GROUP, "ClusterRoleBinding"),
        )
    )
    modes: dict[str, Authorizer] = {"RBAC": rbac}
    if "Node" in ctx.options.authorization_modes:
        modes["Node"] = NodeAuthorizer(
            NodeCaches(pods=cache("", "Pod"), volumes=cache("", "PersistentVolume"))
        )
    app[RBAC] = rbac
    app[AUTHORIZER] = AuthorizerChain([modes[mode] for mode in ctx.options.authorization_modes])
