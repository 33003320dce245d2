"""Impersonation: a user acting as another, when it may (``Impersonate-*`` headers).

Why: ``kubectl --as alice --as-group devs`` and controllers acting for users send
``Impersonate-User``, ``Impersonate-Group`` (repeatable), ``Impersonate-Uid`` and
``Impersonate-Extra-<key>`` headers. As Kubernetes' ``WithImpersonation`` filter does, each one
is authorized for the *requesting* user with the verb ``impersonate`` on

* ``users`` (name: the user) — or ``serviceaccounts`` in its namespace for a
  ``system:serviceaccount:<ns>:<name>`` user, who then gets the groups ``system:serviceaccounts``
  and ``system:serviceaccounts:<ns>`` unless groups were asked for;
* ``groups`` (name: the group);
* ``userextras/<key>`` in ``authentication.k8s.io`` (name: the value);
* ``uids`` in ``authentication.k8s.io`` (name: the uid);

and the first refusal answers 403 (``users "bob" is forbidden: User "alice" cannot impersonate
resource "users" in API group "" at the cluster scope``). Once allowed, the request goes on as the
impersonated user (``system:authenticated`` added, or ``system:unauthenticated`` for
``system:anonymous``); the requester is kept (``impersonator``) for the audit log.

Limits: an ``Impersonate-Group``, ``-Uid`` or ``-Extra-`` without ``Impersonate-User`` is
refused (500, as Kubernetes answers it).
"""

from __future__ import annotations

from urllib.parse import unquote

from aiohttp import web

from api.errors import InternalError
from services.apiserver.forbidden import forbidden
from services.apiserver.identity import (
    ANONYMOUS,
    AUTHENTICATED_GROUP,
    UNAUTHENTICATED_GROUP,
    Authorizer,
    Decision,
    RequestAttributes,
    UserInfo,
)

__all__ = ["IMPERSONATOR", "impersonate", "impersonator"]

IMPERSONATOR: web.RequestKey[UserInfo] = web.RequestKey("impersonator", UserInfo)
"""The user who sent an impersonating request (the audit log's ``user``)."""

_USER = "Impersonate-User"
_UID = "Impersonate-Uid"
_GROUP = "Impersonate-Group"
_EXTRA = "impersonate-extra-"
_SA_PREFIX = "system:serviceaccount:"
_AUTHN_GROUP = "authentication.k8s.io"


def impersonator(request: web.Request) -> UserInfo | None:
    """Who sent ``request`` when it impersonates someone; None otherwise."""
    return request.get(IMPERSONATOR)


def _extras(request: web.Request) -> dict[str, tuple[str, ...]]:
    extra: dict[str, list[str]] = {}
    for header, value in request.headers.items():
        if header.lower().startswith(_EXTRA):
            key = unquote(header[len(_EXTRA) :]).lower()
            extra.setdefault(key, []).append(value)
    return {k: tuple(v) for k, v in extra.items()}


async def _require(authorizer: Authorizer, attrs: RequestAttributes) -> None:
    decision, reason = await authorizer.authorize(attrs)
    if decision is not Decision.ALLOW:
        raise forbidden(attrs, reason)


async def impersonate(request: web.Request, user: UserInfo, *, authorizer: Authorizer) -> UserInfo:
    """The user ``request`` acts as: ``user`` itself, or whom it may impersonate (else 403)."""
    headers = request.headers
    name = headers.get(_USER, "")
    groups = tuple(headers.getall(_GROUP, ()))
    uid = headers.get(_UID, "")
    extra = _extras(request)
    if not name:
        if groups or uid or extra:
            raise InternalError(
                "Internal error occurred: requested impersonation of "
                + ", ".join(
                    [f'group "{g}"' for g in groups]
                    + [f'extra "{k}"' for k in extra]
                    + ([f'uid "{uid}"'] if uid else [])
                )
                + " without impersonating a user"
            )
        return user

    def ask(**fields: str) -> RequestAttributes:
        return RequestAttributes(user=user, verb="impersonate", resource_request=True, **fields)

    asked_groups = list(groups)
    if name.startswith(_SA_PREFIX) and name.count(":") == 3:
        namespace, sa_name = name[len(_SA_PREFIX) :].split(":")
        await _require(
            authorizer, ask(resource="serviceaccounts", namespace=namespace, name=sa_name)
        )
        if not groups:
            asked_groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
    else:
        await _require(authorizer, ask(resource="users", name=name))
    for group in groups:
        await _require(authorizer, ask(resource="groups", name=group))
    for key, values in extra.items():
        for value in values:
            await _require(
                authorizer,
                ask(api_group=_AUTHN_GROUP, resource="userextras", subresource=key, name=value),
            )
    if uid:
        await _require(authorizer, ask(api_group=_AUTHN_GROUP, resource="uids", name=uid))
    implied = UNAUTHENTICATED_GROUP if name == ANONYMOUS.name else AUTHENTICATED_GROUP
    if implied not in asked_groups:
        asked_groups.append(implied)
    request[IMPERSONATOR] = user
    return UserInfo(name=name, uid=uid, groups=tuple(asked_groups), extra=extra)
