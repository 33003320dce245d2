"""What a request asks for, read off its method, path and query alone (Kubernetes' RequestInfo).

Why: authorization, impersonation and the audit log must all agree on what a request is —
``GET /api/v1/namespaces/default/pods`` is *list pods in default*, ``?watch=true`` makes it a
*watch*, ``DELETE`` on a collection is *deletecollection* — before any handler has run, and
without asking the registry (an unknown resource is still authorized, then answered 404, as in
Kubernetes). This module is ``RequestInfoFactory.NewRequestInfo`` of
``k8s.io/apiserver/pkg/endpoints/request``:

* paths under ``/api`` (group-less) and ``/apis/<group>`` with a version and a resource are
  *resource requests*; everything else (``/healthz``, ``/version``, ``/apis``, ``/api/v1``,
  ``/openapi/v2``) is a *non-resource request* whose verb is the lower-cased method;
* the verb: POST create, GET/HEAD get, PUT update, PATCH patch, DELETE delete; a GET without a
  name is list, list with ``watch=true`` (or under the deprecated ``/watch/`` prefix) is watch,
  DELETE without a name is deletecollection; a list or watch whose ``fieldSelector`` is
  ``metadata.name=<x>`` names ``<x>``;
* ``namespaces/<ns>/<resource>/...`` sets the namespace; ``namespaces/<ns>`` alone (and its
  ``status``/``finalize`` subresources) is the namespace object itself.

Each request is parsed once: ``request_info_of`` keeps the answer on the request
(``REQUEST_INFO``), and every middleware that needs it — metrics, authorization, priority and
fairness — asks that function, so a request costs one parse however many layers read it.

Limits: what the path says is what it is; no check that the resource exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aiohttp import web

from services.apiserver.identity import RequestAttributes, UserInfo
from services.apiserver.query import query_flag

__all__ = ["REQUEST_INFO", "RequestInfo", "attributes_for", "request_info", "request_info_of"]

_VERBS = {
    "POST": "create",
    "GET": "get",
    "HEAD": "get",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
_NAMESPACE_SUBRESOURCES = ("status", "finalize")


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """One request as authorization sees it (``request.RequestInfo``)."""

    verb: str
    path: str
    resource_request: bool = False
    api_prefix: str = ""
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""


def _name_from_field_selector(selector: str) -> str:
    """``metadata.name=x`` (or ``==``) as a list's only requirement names ``x``."""
    for op in ("==", "="):
        key, found, value = selector.partition(op)
        if found and key.strip() == "metadata.name" and "," not in value and "!" not in key:
            return value.strip()
    return ""


def request_info(method: str, path: str, query: Mapping[str, str]) -> RequestInfo:
    """``method``/``path``/``query`` of one HTTP request -> what it asks for."""
    parts = path.strip("/").split("/")
    prefix, parts = parts[0], parts[1:]
    group = ""
    if prefix == "apis":
        if len(parts) < 3:  # /apis, /apis/<group>, /apis/<group>/<version>: discovery
            return RequestInfo(verb=method.lower(), path=path)
        group, parts = parts[0], parts[1:]
    elif prefix != "api" or len(parts) < 2:  # not the API, or /api, /api/v1: discovery
        return RequestInfo(verb=method.lower(), path=path)
    version, parts = parts[0], parts[1:]
    verb = _VERBS.get(method.upper(), method.lower())
    if parts and parts[0] == "watch":
        if verb == "get":
            verb = "watch"
        parts = parts[1:]
    namespace = ""
    if parts and parts[0] == "namespaces":
        if len(parts) > 1:
            namespace = parts[1]
            if len(parts) > 2 and parts[2] not in _NAMESPACE_SUBRESOURCES:
                parts = parts[2:]
    resource = parts[0] if parts else ""
    name = parts[1] if len(parts) > 1 else ""
    subresource = parts[2] if len(parts) > 2 else ""
    if not name:
        if verb == "get":
            verb = "watch" if query_flag(query.get("watch")) else "list"
        elif verb == "delete":
            verb = "deletecollection"
    if verb in ("list", "watch") and not name:
        name = _name_from_field_selector(query.get("fieldSelector", ""))
    return RequestInfo(
        verb=verb,
        path=path,
        resource_request=True,
        api_prefix=prefix,
        api_group=group,
        api_version=version,
        namespace=namespace,
        resource=resource,
        subresource=subresource,
        name=name,
    )


REQUEST_INFO: web.RequestKey[RequestInfo] = web.RequestKey("request_info", RequestInfo)
"""Where ``request_info_of`` keeps a request's ``RequestInfo``."""


def request_info_of(request: web.Request) -> RequestInfo:
    """``request``'s ``RequestInfo``, parsed at the first call and kept on the request."""
    info = request.get(REQUEST_INFO)
    if info is None:
        info = request[REQUEST_INFO] = request_info(request.method, request.path, request.query)
    return info


def attributes_for(user: UserInfo, info: RequestInfo) -> RequestAttributes:
    """The authorizer's question: may ``user`` do what ``info`` asks?"""
    return RequestAttributes(
        user=user,
        verb=info.verb,
        resource_request=info.resource_request,
        api_group=info.api_group,
        api_version=info.api_version,
        resource=info.resource,
        subresource=info.subresource,
        namespace=info.namespace,
        name=info.name,
        path=info.path,
    )
