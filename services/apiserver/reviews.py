"""The review endpoints: questions to the authorizer and the authenticator, answered on create.

Why: Kubernetes serves six kinds that are never stored — a POST returns the object with its
``status`` filled in (201):

* ``SubjectAccessReview`` — may the user in ``spec`` (user, groups, extra, uid) do what
  ``spec.resourceAttributes`` / ``spec.nonResourceAttributes`` describe?
* ``LocalSubjectAccessReview`` — the same, confined to the URL's namespace;
* ``SelfSubjectAccessReview`` — may *I* (``kubectl auth can-i``);
* ``SelfSubjectRulesReview`` — everything I may do in a namespace (``kubectl auth can-i
  --list``), from the RBAC rules that apply to me;
* ``SelfSubjectReview`` — who am I (``kubectl auth whoami``);
* ``TokenReview`` — whom does this bearer token stand for.

Creating one is itself authorized first (``create`` on ``selfsubjectaccessreviews`` ...; the
bootstrap policy grants the self-reviews to every authenticated user).

A ``TokenReview`` asks the secure port's own token authenticators (``AUTHENTICATION`` on the
app, ``Authentication.review_token``): ``status.user`` as a request with that token would be
(``system:authenticated`` included; a service-account token's pod name, pod uid and
credential id in ``extra``), ``status.audiences`` the audiences it is good for, or
``authenticated: false`` with Kubernetes' ``status.error``. As in Kubernetes, a review without
a token is 400 and the review asks the token authenticators only (no client certificates).

Limits: a review's answer is the authorizer's (or the authenticator's) at that moment.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from api.errors import BadRequest, Invalid
from api.validation import invalid
from services.apiserver.authentication import AUTHENTICATION, InvalidCredentials
from services.apiserver.authorization import AUTHORIZER, RBAC
from services.apiserver.codec import json_response
from services.apiserver.context import CONTEXT
from services.apiserver.identity import (
    Decision,
    RequestAttributes,
    UserInfo,
    request_user,
)

__all__ = ["REVIEW_GROUPS", "create_review"]

Obj = dict[str, Any]

REVIEW_GROUPS = ("authorization.k8s.io", "authentication.k8s.io")


def _user_info(user: UserInfo) -> Obj:
    out: Obj = {"username": user.name}
    if user.uid:
        out["uid"] = user.uid
    if user.groups:
        out["groups"] = list(user.groups)
    if user.extra:
        out["extra"] = {k: list(v) for k, v in user.extra.items()}
    return out


def _attributes(kind: str, user: UserInfo, spec: Obj, *, namespace: str = "") -> RequestAttributes:
    """The question a (Self|Local)SubjectAccessReview's spec asks; 422 as Kubernetes words it."""
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    if isinstance(resource, dict) == isinstance(non_resource, dict):
        raise Invalid.of(
            kind,
            "",
            [
                invalid(
                    "spec.resourceAttributes",
                    resource,
                    "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                )
            ],
            group="authorization.k8s.io",
        )
    if isinstance(non_resource, dict):
        return RequestAttributes(
            user=user,
            verb=str(non_resource.get("verb") or ""),
            resource_request=False,
            path=str(non_resource.get("path") or ""),
        )
    assert isinstance(resource, dict)
    ns = str(resource.get("namespace") or "")
    if namespace and ns != namespace:
        raise Invalid.of(
            kind,
            "",
            [invalid("spec.resourceAttributes.namespace", ns, "must match metadata.namespace")],
            group="authorization.k8s.io",
        )
    return RequestAttributes(
        user=user,
        verb=str(resource.get("verb") or ""),
        resource_request=True,
        api_group=str(resource.get("group") or ""),
        api_version=str(resource.get("version") or ""),
        resource=str(resource.get("resource") or ""),
        subresource=str(resource.get("subresource") or ""),
        namespace=ns,
        name=str(resource.get("name") or ""),
    )


def _spec_user(kind: str, spec: Obj) -> UserInfo:
    name, groups = str(spec.get("user") or ""), spec.get("groups") or []
    if not name and not groups:
        raise Invalid.of(
            kind,
            "",
            [invalid("spec.user", name, "at least one of user or group must be specified")],
            group="authorization.k8s.io",
        )
    extra = {k: tuple(v) for k, v in (spec.get("extra") or {}).items()}
    return UserInfo(name=name, uid=str(spec.get("uid") or ""), groups=tuple(groups), extra=extra)


async def _access_review(request: web.Request, body: Obj, *, namespace: str = "") -> Obj:
    kind = str(body.get("kind"))
    spec = body.get("spec") or {}
    if kind == "SelfSubjectAccessReview":
        user = request_user(request)
    else:
        user = _spec_user(kind, spec)
    attrs = _attributes(kind, user, spec, namespace=namespace)
    decision, reason = await request.app[AUTHORIZER].authorize(attrs)
    status: Obj = {"allowed": decision is Decision.ALLOW}
    if decision is Decision.DENY:
        status["denied"] = True
    if reason:
        status["reason"] = reason
    if kind == "SelfSubjectAccessReview":
        spec = {
            k: v for k, v in spec.items() if k in ("resourceAttributes", "nonResourceAttributes")
        }
    return {**body, "spec": spec, "status": status}


def _rules_review(request: web.Request, body: Obj) -> Obj:
    spec = body.get("spec") or {}
    namespace = str(spec.get("namespace") or "")
    rules, errors = request.app[RBAC].rules_for(request_user(request), namespace)
    resource_rules: list[Obj] = []
    non_resource_rules: list[Obj] = []
    for rule in rules:
        as_dict = rule.to_dict()
        if rule.resources:
            resource_rules.append({k: v for k, v in as_dict.items() if k != "nonResourceURLs"})
        if rule.non_resource_urls:
            non_resource_rules.append(
                {"verbs": as_dict["verbs"], "nonResourceURLs": as_dict["nonResourceURLs"]}
            )
    status: Obj = {
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": bool(errors),
    }
    if errors:
        status["evaluationError"] = "; ".join(errors)
    return {**body, "spec": spec, "status": status}


async def _token_review(request: web.Request, body: Obj) -> Obj:
    spec = body.get("spec") or {}
    token = str(spec.get("token") or "")
    if not token:
        raise BadRequest("token is required for TokenReview in authentication")
    audiences = [str(a) for a in spec.get("audiences") or []]
    authentication = request.app[AUTHENTICATION]
    status: Obj
    try:
        reviewed = await authentication.review_token(
            token, audiences=audiences, ctx=request.app[CONTEXT]
        )
    except InvalidCredentials as exc:
        status = {"authenticated": False, "user": {}, "error": str(exc)}
    else:
        status = {"authenticated": True, "user": _user_info(reviewed.user)}
        if reviewed.audiences:
            status["audiences"] = list(reviewed.audiences)
    return {**body, "status": status}


async def create_review(request: web.Request, body: Obj, *, namespace: str | None) -> web.Response:
    """Answer the review ``body`` (its kind already checked against the URL)."""
    kind = body.get("kind")
    meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    body = {**body, "metadata": meta}
    if kind in ("SubjectAccessReview", "SelfSubjectAccessReview", "LocalSubjectAccessReview"):
        answer = await _access_review(request, body, namespace=namespace or "")
    elif kind == "SelfSubjectRulesReview":
        answer = _rules_review(request, body)
    elif kind == "SelfSubjectReview":
        answer = {**body, "status": {"userInfo": _user_info(request_user(request))}}
    else:
        answer = await _token_review(request, body)
    return json_response(answer, status=201)
