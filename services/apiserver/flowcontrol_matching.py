"""Which FlowSchema a request belongs to, and its flow within it (APF's classifier).

Why: priority and fairness starts by sorting each request into a *flow*: the first
``FlowSchema`` (lowest ``matchingPrecedence``, then name) one of whose rules matches the
request's user and what it asks for, plus a *distinguisher* that splits the schema's traffic
into flows (``ByUser``: the user's name; ``ByNamespace``: the request's namespace; none: one
flow). This is ``matchesFlowSchema`` and ``computeFlowDistinguisher`` of
``k8s.io/apiserver/pkg/util/flowcontrol`` (``apf_controller.go``, ``rule.go``):

* a rule matches when one of its subjects matches the user **and** one of its resource rules
  (a resource request) or non-resource rules (any other request) matches what is asked;
* subjects: ``User`` by name, ``Group`` by one of the user's groups, ``ServiceAccount`` by
  namespace and name of a ``system:serviceaccount:<ns>:<name>`` user; ``*`` matches any name;
* resource rules: verb, API group, resource (``pods/status`` for a subresource) — each list
  matching its value or holding ``*``; a namespaced request needs its namespace (or ``*``) in
  ``namespaces``, a cluster-scoped one needs ``clusterScope``;
* non-resource rules: verb, and a URL that equals one listed, or lies under a ``/prefix/*``
  entry, or any with ``*``.

Why not ``rbac.rule_allows``: APF's rules are another shape with other semantics — no
``resourceNames``, no ``*/<subresource>``, namespaces and ``clusterScope`` in the rule, and
subjects nested (``user.name``) with ``*`` names — so only the service-account user name is
shared (``rbac.service_account_user``).

What it does not do: read the objects from storage, or check that a schema's priority level
exists (``services.apiserver.flowcontrol`` skips schemas whose level is missing, as
Kubernetes does with dangling ones).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from api.flowcontrol import DEFAULT_MATCHING_PRECEDENCE
from services.apiserver.identity import UserInfo
from services.apiserver.rbac import service_account_user
from services.apiserver.request_info import RequestInfo

__all__ = ["Match", "classify", "distinguisher", "matches", "precedence_order"]

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Match:
    """The schema a request matched and the flow distinguisher it computed."""

    schema: Obj
    distinguisher: str


def _spec(obj: Obj) -> Obj:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _dicts(value: Any) -> list[Obj]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _has(values: Any, wanted: str) -> bool:
    listed = _strings(values)
    return wanted in listed or "*" in listed


def _subject_matches(subject: Obj, user: UserInfo) -> bool:
    kind = subject.get("kind")
    if kind == "User":
        name = (subject.get("user") or {}).get("name")
        return name == "*" or name == user.name
    if kind == "Group":
        name = (subject.get("group") or {}).get("name")
        return name == "*" or name in user.groups
    if kind == "ServiceAccount":
        account = subject.get("serviceAccount") or {}
        namespace, name = str(account.get("namespace") or ""), str(account.get("name") or "")
        if name == "*":  # any account of the namespace
            return user.name.startswith(service_account_user(namespace, ""))
        return user.name == service_account_user(namespace, name)
    return False


def _resource_rule_matches(rule: Obj, info: RequestInfo) -> bool:
    resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    if not (
        _has(rule.get("verbs"), info.verb)
        and _has(rule.get("apiGroups"), info.api_group)
        and _has(rule.get("resources"), resource)
    ):
        return False
    if not info.namespace:
        return rule.get("clusterScope") is True
    return _has(rule.get("namespaces"), info.namespace)


def _url_matches(pattern: str, path: str) -> bool:
    if pattern in ("*", path):
        return True
    return pattern.endswith("/*") and path.startswith(pattern[:-1])


def _non_resource_rule_matches(rule: Obj, info: RequestInfo) -> bool:
    return _has(rule.get("verbs"), info.verb) and any(
        _url_matches(p, info.path) for p in _strings(rule.get("nonResourceURLs"))
    )


def _rules_match(rules: Obj, user: UserInfo, info: RequestInfo) -> bool:
    if not any(_subject_matches(s, user) for s in _dicts(rules.get("subjects"))):
        return False
    if info.resource_request:
        return any(_resource_rule_matches(r, info) for r in _dicts(rules.get("resourceRules")))
    return any(_non_resource_rule_matches(r, info) for r in _dicts(rules.get("nonResourceRules")))


def matches(schema: Obj, user: UserInfo, info: RequestInfo) -> bool:
    """Does one of ``schema``'s rules match ``user`` asking for ``info``?"""
    return any(_rules_match(r, user, info) for r in _dicts(_spec(schema).get("rules")))


def distinguisher(schema: Obj, user: UserInfo, info: RequestInfo) -> str:
    """The flow within ``schema``: the user's name, the namespace, or ``""``."""
    method = (_spec(schema).get("distinguisherMethod") or {}).get("type")
    if method == "ByUser":
        return user.name
    if method == "ByNamespace":
        return info.namespace
    return ""


def precedence_order(schemas: Iterable[Obj]) -> list[Obj]:
    """``schemas`` in the order they are tried: by ``matchingPrecedence``, then by name."""

    def key(schema: Obj) -> tuple[int, str]:
        precedence = _spec(schema).get("matchingPrecedence")
        name = (schema.get("metadata") or {}).get("name") or ""
        return (precedence if isinstance(precedence, int) else DEFAULT_MATCHING_PRECEDENCE, name)

    return sorted(schemas, key=key)


def classify(ordered: Iterable[Obj], user: UserInfo, info: RequestInfo) -> Match | None:
    """The first schema of ``ordered`` (see ``precedence_order``) that matches, or None."""
    for schema in ordered:
        if matches(schema, user, info):
            return Match(schema, distinguisher(schema, user, info))
    return None
