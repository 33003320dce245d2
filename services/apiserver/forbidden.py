"""The 403 ``Forbidden`` answer, worded exactly as Kubernetes words it.

Why: kubectl prints this message to people and scripts grep it; the authorization middleware,
impersonation, the escalation check and the review endpoints all refuse with it, so its
wording lives in one place (``responsewriters.Forbidden`` + ``errors.NewForbidden``):

* ``pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the
  namespace "default"``
* ``nodes "n1" is forbidden: User "alice" cannot get resource "nodes" in API group "" at the
  cluster scope``
* ``forbidden: User "alice" cannot get path "/metrics"``

with the authorizers' reason appended after ``": "`` when there is one, and ``details``
``{name, group, kind: <resource>}``.
"""

from __future__ import annotations

from api.errors import Forbidden
from services.apiserver.identity import RequestAttributes

__all__ = ["forbidden", "forbidden_message", "forbidden_resource"]


def forbidden_message(attrs: RequestAttributes) -> str:
    """``User "alice" cannot list resource "pods" in API group "" in the namespace "default"``."""
    user = attrs.user.name
    if not attrs.resource_request:
        return f'User "{user}" cannot {attrs.verb} path "{attrs.path}"'
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    head = (
        f'User "{user}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.api_group}"'
    )
    if attrs.namespace:
        return f'{head} in the namespace "{attrs.namespace}"'
    return f"{head} at the cluster scope"


def forbidden_resource(resource: str, group: str, name: str, message: str) -> Forbidden:
    """``NewForbidden``: ``<resource>[.<group>] ["<name>"] is forbidden: <message>``."""
    qualified = f"{resource}.{group}" if group else resource
    head = f'{qualified} "{name}"' if name else qualified
    return Forbidden(
        f"{head} is forbidden: {message}", kind=resource, name=name or None, group=group or None
    )


def forbidden(attrs: RequestAttributes, reason: str = "") -> Forbidden:
    """The 403 for a refused request."""
    message = forbidden_message(attrs)
    if reason:
        message = f"{message}: {reason}"
    if not attrs.resource_request or not (attrs.resource or attrs.api_group):
        return Forbidden(f"forbidden: {message}")
    return forbidden_resource(attrs.resource, attrs.api_group, attrs.name, message)
