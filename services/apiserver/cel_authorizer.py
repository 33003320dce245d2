"""The ``authorizer`` variable of admission CEL: "may this user do that?" inside an expression.

Why: a policy or a webhook's match condition often depends on what the requester may do
(``authorizer.group('apps').resource('deployments').check('delete').allowed()``). Kubernetes
gives admission expressions its authorization library (``k8s.io/apiserver/pkg/cel/library/
authz.go``); this module is that library for ``celpy``, over the apiserver's own authorizer chain:

* ``authorizer.path('/healthz')`` and ``authorizer.group(g)`` start a check; ``.resource(r)``,
  ``.subresource(s)``, ``.namespace(ns)``, ``.name(n)`` narrow a resource check;
  ``authorizer.requestResource`` is the request's own resource;
* ``.check(verb)`` asks the chain (``system:masters`` first, then ``--authorization-mode``) as the
  requesting user, or as ``authorizer.serviceAccount(ns, name)``'s service account;
* the decision answers ``.allowed()``, ``.reason()``, ``.errored()`` and ``.error()``.

Limits: CEL is evaluated synchronously, so a check is answered only by an authorizer that
decides without waiting (kubelite's RBAC and Node authorizers read their watch caches); one that
would wait makes the decision ``errored()``. No ``fieldSelector``/``labelSelector`` on checks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, cast

from celpy.celtypes import BoolType, MapType, StringType

from services.apiserver.authentication import SERVICE_ACCOUNTS_GROUP
from services.apiserver.identity import Authorizer, Decision, RequestAttributes, UserInfo
from services.apiserver.service_account_tokens import service_account_username

__all__ = ["FUNCTIONS", "AuthorizerValue", "authorizer_value"]


@dataclass(frozen=True, slots=True)
class _Asker:
    """Who a check is made for, and the chain that answers."""

    user: UserInfo
    chain: Authorizer


class AuthorizerValue(MapType):
    """``authorizer``: a map holding ``requestResource``, and the start of every check."""

    asker: _Asker


@dataclass(frozen=True, slots=True)
class _PathCheck:
    asker: _Asker
    path: str


@dataclass(frozen=True, slots=True)
class _ResourceCheck:
    asker: _Asker
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""


@dataclass(frozen=True, slots=True)
class _Decision:
    allowed: bool = False
    reason: str = ""
    error: str = ""


def authorizer_value(
    *, user: UserInfo, chain: Authorizer, request: RequestAttributes
) -> AuthorizerValue:
    """The ``authorizer`` variable for a request by ``user`` (``request``: what it asks for)."""
    asker = _Asker(user=user, chain=chain)
    value = _value_for(asker)
    own = _ResourceCheck(
        asker,
        group=request.api_group,
        resource=request.resource,
        subresource=request.subresource,
        namespace=request.namespace,
        name=request.name,
    )
    value[StringType("requestResource")] = cast(Any, own)  # celpy hands it to the functions
    return value


def _value_for(asker: _Asker) -> AuthorizerValue:
    value = AuthorizerValue({})
    value.asker = asker
    return value


def _decide(chain: Authorizer, attrs: RequestAttributes) -> _Decision:
    """The chain's decision, driven without an event loop (see the module's limits)."""
    pending = chain.authorize(attrs)
    try:
        pending.send(None)
    except StopIteration as done:
        decision, reason = done.value
        return _Decision(allowed=decision is Decision.ALLOW, reason=str(reason))
    except Exception as exc:  # the authorizer failed: an errored decision, as in Kubernetes
        return _Decision(error=str(exc))
    pending.close()
    return _Decision(error="the authorizer cannot decide without waiting")


def _service_account(value: AuthorizerValue, namespace: Any, name: Any) -> AuthorizerValue:
    user = UserInfo(
        name=service_account_username(str(namespace), str(name)),
        groups=(SERVICE_ACCOUNTS_GROUP, f"{SERVICE_ACCOUNTS_GROUP}:{namespace}"),
    )
    return _value_for(replace(value.asker, user=user))


def _check(target: _PathCheck | _ResourceCheck, verb: Any) -> _Decision:
    if isinstance(target, _PathCheck):
        attrs = RequestAttributes(
            user=target.asker.user, verb=str(verb), resource_request=False, path=target.path
        )
    else:
        attrs = RequestAttributes(
            user=target.asker.user,
            verb=str(verb),
            resource_request=True,
            api_group=target.group,
            api_version="*",
            resource=target.resource,
            subresource=target.subresource,
            namespace=target.namespace,
            name=target.name,
        )
    return _decide(target.asker.chain, attrs)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "path": lambda value, path: _PathCheck(value.asker, str(path)),
    "group": lambda value, group: _ResourceCheck(value.asker, group=str(group)),
    "serviceAccount": _service_account,
    "resource": lambda check, value: replace(check, resource=str(value)),
    "subresource": lambda check, value: replace(check, subresource=str(value)),
    "namespace": lambda check, value: replace(check, namespace=str(value)),
    "name": lambda check, value: replace(check, name=str(value)),
    "check": _check,
    "allowed": lambda decision: BoolType(decision.allowed),
    "reason": lambda decision: StringType(decision.reason),
    "errored": lambda decision: BoolType(bool(decision.error)),
    "error": lambda decision: StringType(decision.error),
}
"""The library's functions, by the method name CEL calls them with."""
