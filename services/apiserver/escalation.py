"""The RBAC escalation check: nobody grants, through a role or a binding, what it does not hold.

Why: if writing a Role were authorized by ``create roles`` alone, anyone allowed to manage
roles in a namespace could give itself anything there. Kubernetes' RBAC storage
(``pkg/registry/rbac/{role,clusterrole,rolebinding,clusterrolebinding}/policybased``) therefore
checks every create and update of the four kinds, after authorization and before the write:

* a Role or ClusterRole: allowed when the user may ``escalate`` that role, or when the rules the
  user holds (in the role's namespace, cluster-wide ones included) cover every rule of the new
  role; an ``aggregationRule`` needs ``escalate`` (Kubernetes: cluster-admin privileges);
* a RoleBinding or ClusterRoleBinding: allowed when the user may ``bind`` the referenced role,
  or when it holds every permission that role grants (in the binding's namespace).

A refusal is 403: ``roles.rbac.authorization.k8s.io "x" is forbidden: user "alice"
(groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently
held:`` and the missing rules, one per line, as Kubernetes prints them. Members of
``system:masters`` are never checked.

Limits: the user's own rules come from the authorizer's cache (as in Kubernetes); the role a
binding refers to is read from the store, so a role written just before its binding is found.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from api.errors import NotFound
from api.rbac import GROUP
from api.registry import ResourceType
from services.apiserver.authorization import AUTHORIZER, RBAC
from services.apiserver.context import ApiContext
from services.apiserver.forbidden import forbidden_resource
from services.apiserver.identity import MASTERS_GROUP, Decision, RequestAttributes, UserInfo
from services.apiserver.rbac import RBACAuthorizer, Rule, compact, go_quoted, missing_rules

__all__ = ["check_no_escalation"]

Obj = dict[str, Any]


async def _may(request: web.Request, user: UserInfo, verb: str, **fields: str) -> bool:
    attrs = RequestAttributes(
        user=user, verb=verb, resource_request=True, api_group=GROUP, **fields
    )
    decision, _ = await request.app[AUTHORIZER].authorize(attrs)
    return decision is Decision.ALLOW


def _refuse(rt: ResourceType, name: str, user: UserInfo, missing: list[Rule]) -> Exception:
    lines = sorted({rule.compact_string() for rule in compact(missing)})
    message = (
        f'user "{user.name}" (groups={go_quoted(user.groups)}) is attempting to grant RBAC '
        "permissions not currently held:\n" + "\n".join(lines)
    )
    return forbidden_resource(rt.plural, GROUP, name, message)


async def _role_rules(ctx: ApiContext, ref: Obj, namespace: str) -> list[Rule]:
    kind, name = str(ref.get("kind") or ""), str(ref.get("name") or "")
    plural = "clusterroles" if kind == "ClusterRole" else "roles"
    rt = ctx.registry.require(GROUP, kind or "Role")
    role = await ctx.storage(rt).get_or_none(namespace if kind == "Role" else None, name)
    if role is None:
        raise NotFound.of(plural, name, group=GROUP)
    return [Rule.from_dict(r) for r in role.get("rules") or []]


async def check_no_escalation(
    request: web.Request, ctx: ApiContext, rt: ResourceType, obj: Obj, *, user: UserInfo
) -> None:
    """Refuse (403) a write of ``obj`` (an RBAC kind) that grants more than ``user`` holds."""
    if rt.group != GROUP or MASTERS_GROUP in user.groups:
        return
    meta = obj.get("metadata") or {}
    name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
    rbac: RBACAuthorizer = request.app[RBAC]
    held, _ = rbac.rules_for(user, namespace)
    if rt.kind in ("Role", "ClusterRole"):
        if await _may(
            request, user, "escalate", resource=rt.plural, namespace=namespace, name=name
        ):
            return
        if obj.get("aggregationRule"):
            raise forbidden_resource(
                rt.plural,
                GROUP,
                name,
                "must have cluster-admin privileges to use an aggregationRule",
            )
        wanted = [Rule.from_dict(r) for r in obj.get("rules") or []]
    else:
        ref = obj.get("roleRef") or {}
        role_plural = "clusterroles" if ref.get("kind") == "ClusterRole" else "roles"
        if await _may(
            request,
            user,
            "bind",
            resource=role_plural,
            namespace=namespace,
            name=str(ref.get("name") or ""),
        ):
            return
        wanted = await _role_rules(ctx, ref, namespace)
    missing = missing_rules(held, wanted)
    if missing:
        raise _refuse(rt, name, user, missing)
