"""The RBAC authorizer: may this user do that, according to the Roles and bindings stored?

Why: Kubernetes' ``plugin/pkg/auth/authorizer/rbac`` decides every request on the secure port
from four kinds (``api.rbac``). A request is allowed when some ClusterRoleBinding, or some
RoleBinding in the request's namespace, names the user (by name, by one of its groups —
``system:authenticated``, ``system:serviceaccounts[:<ns>]`` included — or as the service
account ``system:serviceaccount:<ns>:<name>``) and the role it refers to has a rule matching the
request: verb, API group, resource (``pods``, ``pods/log``, ``*/scale``, ``*``), resource name,
or for non-resource requests the path (``/healthz``, ``/apis/*``). Nothing denies: a request no
rule allows gets no opinion, and the chain ends in a 403.

What it owns: rule matching (``rule_allows``), the subjects' match, ``RBACAuthorizer`` (an
``Authorizer``) with ``rules_for`` (every rule a user holds in a namespace, for
SelfSubjectRulesReview and the escalation check), and ``covers`` / ``missing_rules`` — whether
one set of rules grants everything another does, rule by broken-down rule, as Kubernetes'
``validation.Covers``.

Where it reads from: the apiserver's own watch caches of the four kinds — no store reads and
no network round trips; an index of bindings by namespace and roles by name is rebuilt when any
of those caches has moved past the revisions the index was built at, so a binding is in force
from the moment its write is in the cache (the same moment a watch sees it).

Limits: a binding to a role that does not exist grants nothing and is named in the denial's
reason (``RBAC: clusterrole.rbac.authorization.k8s.io "x" not found``), as in Kubernetes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from api.rbac import GROUP, GROUP_KIND, SERVICE_ACCOUNT_KIND, USER_KIND
from services.apiserver.identity import Decision, RequestAttributes, UserInfo
from services.apiserver.predicate import Predicate
from services.apiserver.watchcache import WatchCache

__all__ = [
    "RBACAuthorizer",
    "RbacCaches",
    "Rule",
    "covers",
    "missing_rules",
    "rule_allows",
    "service_account_user",
]

Obj = dict[str, Any]
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True, slots=True)
class Rule:
    """One ``PolicyRule``, its lists as tuples (hashable, comparable)."""

    verbs: tuple[str, ...] = ()
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, rule: Mapping[str, Any]) -> Rule:
        def strings(key: str) -> tuple[str, ...]:
            value = rule.get(key)
            return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()

        return cls(
            verbs=strings("verbs"),
            api_groups=strings("apiGroups"),
            resources=strings("resources"),
            resource_names=strings("resourceNames"),
            non_resource_urls=strings("nonResourceURLs"),
        )

    def to_dict(self) -> Obj:
        out: Obj = {"verbs": list(self.verbs)}
        for key, values in (
            ("apiGroups", self.api_groups),
            ("resources", self.resources),
            ("resourceNames", self.resource_names),
            ("nonResourceURLs", self.non_resource_urls),
        ):
            if values:
                out[key] = list(values)
        return out

    def compact_string(self) -> str:
        """``{APIGroups:[""], Resources:["pods"], Verbs:["get"]}``, as Kubernetes prints a rule."""
        parts = [
            f"{label}:{go_quoted(values)}"
            for label, values in (
                ("APIGroups", self.api_groups),
                ("Resources", self.resources),
                ("NonResourceURLs", self.non_resource_urls),
                ("ResourceNames", self.resource_names),
                ("Verbs", self.verbs),
            )
            if values
        ]
        return "{" + ", ".join(parts) + "}"


def go_quoted(values: Iterable[str]) -> str:
    """A string list as Go's ``%q`` prints it: ``["a" "b"]``."""
    return (
        "["
        + " ".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values)
        + "]"
    )


def _matches(values: tuple[str, ...], wanted: str) -> bool:
    return "*" in values or wanted in values


def _resource_matches(rule: Rule, resource: str, subresource: str) -> bool:
    combined = f"{resource}/{subresource}" if subresource else resource
    for candidate in rule.resources:
        if candidate in ("*", combined):
            return True
        if subresource and candidate == "*/" + subresource:
            return True
    return False


def _url_matches(rule: Rule, path: str) -> bool:
    for url in rule.non_resource_urls:
        if url in ("*", path):
            return True
        if url.endswith("*") and path.startswith(url[:-1]):
            return True
    return False


def rule_allows(rule: Rule, attrs: RequestAttributes) -> bool:
    """Whether ``rule`` grants ``attrs`` (``rbac.RuleAllows``)."""
    if not _matches(rule.verbs, attrs.verb):
        return False
    if not attrs.resource_request:
        return _url_matches(rule, attrs.path)
    return (
        _matches(rule.api_groups, attrs.api_group)
        and _resource_matches(rule, attrs.resource, attrs.subresource)
        and (not rule.resource_names or attrs.name in rule.resource_names)
    )


def service_account_user(namespace: str, name: str) -> str:
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def _applies_to(subject: Mapping[str, Any], user: UserInfo, *, namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == USER_KIND:
        return user.name == name
    if kind == GROUP_KIND:
        return name in user.groups
    if kind == SERVICE_ACCOUNT_KIND:
        sa_namespace = subject.get("namespace") or namespace
        return bool(sa_namespace) and user.name == service_account_user(
            str(sa_namespace), str(name)
        )
    return False


def _describe_subject(subject: Mapping[str, Any], namespace: str) -> str:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == SERVICE_ACCOUNT_KIND:
        return f'{kind} "{subject.get("namespace") or namespace}/{name}"'
    return f'{kind} "{name}"'


@dataclass(frozen=True, slots=True)
class _Binding:
    kind: str
    namespace: str
    name: str
    subjects: tuple[Mapping[str, Any], ...]
    role_kind: str
    role_name: str

    @classmethod
    def from_obj(cls, obj: Obj) -> _Binding:
        meta = obj.get("metadata") or {}
        ref = obj.get("roleRef") or {}
        subjects = tuple(s for s in obj.get("subjects") or [] if isinstance(s, Mapping))
        return cls(
            kind=str(obj.get("kind") or ""),
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            subjects=subjects,
            role_kind=str(ref.get("kind") or ""),
            role_name=str(ref.get("name") or ""),
        )


@dataclass
class _Index:
    revisions: tuple[int, ...]
    cluster_roles: dict[str, tuple[Rule, ...]] = field(default_factory=dict)
    roles: dict[tuple[str, str], tuple[Rule, ...]] = field(default_factory=dict)
    cluster_bindings: list[_Binding] = field(default_factory=list)
    bindings: dict[str, list[_Binding]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RbacCaches:
    """The watch caches the authorizer reads (the apiserver's own, one per RBAC kind)."""

    roles: WatchCache
    cluster_roles: WatchCache
    role_bindings: WatchCache
    cluster_role_bindings: WatchCache

    def all(self) -> tuple[WatchCache, ...]:
        return (self.roles, self.cluster_roles, self.role_bindings, self.cluster_role_bindings)


def _objects(cache: WatchCache) -> list[Obj]:
    events, _ = cache.snapshot(Predicate(rt=cache.rt))
    return [event.obj for event in events]


def _rules(obj: Obj) -> tuple[Rule, ...]:
    return tuple(Rule.from_dict(r) for r in obj.get("rules") or [] if isinstance(r, Mapping))


@dataclass(frozen=True, slots=True)
class _Grant:
    """One binding's role, as a rule source: the rules, or why there are none."""

    binding: _Binding
    rules: tuple[Rule, ...]
    error: str = ""


class RBACAuthorizer:
    """An ``Authorizer`` over the RBAC kinds in ``caches``; see the module docstring."""

    def __init__(self, caches: RbacCaches) -> None:
        self._caches = caches
        self._index = _Index(revisions=(-1,))

    def _current(self) -> _Index:
        revisions = tuple(c.revision for c in self._caches.all())
        if revisions == self._index.revisions:
            return self._index
        index = _Index(revisions=revisions)
        for obj in _objects(self._caches.cluster_roles):
            index.cluster_roles[str(obj["metadata"]["name"])] = _rules(obj)
        for obj in _objects(self._caches.roles):
            meta = obj["metadata"]
            index.roles[(str(meta.get("namespace")), str(meta["name"]))] = _rules(obj)
        for obj in _objects(self._caches.cluster_role_bindings):
            index.cluster_bindings.append(_Binding.from_obj(obj))
        for obj in _objects(self._caches.role_bindings):
            binding = _Binding.from_obj(obj)
            index.bindings.setdefault(binding.namespace, []).append(binding)
        self._index = index
        return index

    def _grants(self, user: UserInfo, namespace: str) -> Iterator[_Grant]:
        """Each binding that names ``user`` and applies in ``namespace`` (ClusterRoleBindings
        first, as Kubernetes visits them), with its role's rules."""
        index = self._current()
        candidates = list(index.cluster_bindings)
        if namespace:
            candidates += index.bindings.get(namespace, [])
        for binding in candidates:
            if not any(_applies_to(s, user, namespace=binding.namespace) for s in binding.subjects):
                continue
            if binding.role_kind == "ClusterRole":
                rules = index.cluster_roles.get(binding.role_name)
                missing = f'clusterrole.{GROUP} "{binding.role_name}" not found'
            elif binding.role_kind == "Role" and binding.namespace:
                rules = index.roles.get((binding.namespace, binding.role_name))
                missing = f'role.{GROUP} "{binding.role_name}" not found'
            else:
                continue
            if rules is None:
                yield _Grant(binding, (), error=missing)
            else:
                yield _Grant(binding, rules)

    async def authorize(self, attrs: RequestAttributes) -> tuple[Decision, str]:
        errors: list[str] = []
        for grant in self._grants(attrs.user, attrs.namespace):
            if grant.error:
                errors.append(grant.error)
            for rule in grant.rules:
                if rule_allows(rule, attrs):
                    binding = grant.binding
                    where = f'"{binding.name}"'
                    if binding.namespace:
                        where = f'"{binding.name}/{binding.namespace}"'
                    subject = next(
                        _describe_subject(s, binding.namespace)
                        for s in binding.subjects
                        if _applies_to(s, attrs.user, namespace=binding.namespace)
                    )
                    return Decision.ALLOW, (
                        f"RBAC: allowed by {binding.kind} {where} of "
                        f'{binding.role_kind} "{binding.role_name}" to {subject}'
                    )
        reason = "RBAC: " + ", ".join(errors) if errors else ""
        if len(errors) > 1:
            reason = "RBAC: [" + ", ".join(errors) + "]"
        return Decision.NO_OPINION, reason

    def rules_for(self, user: UserInfo, namespace: str) -> tuple[list[Rule], list[str]]:
        """Every rule ``user`` holds in ``namespace`` (cluster-wide ones included), and the
        errors met on the way (bindings to missing roles)."""
        rules: list[Rule] = []
        errors: list[str] = []
        for grant in self._grants(user, namespace):
            rules.extend(grant.rules)
            if grant.error:
                errors.append(grant.error)
        return rules, errors

    def role_rules(self, kind: str, name: str, namespace: str) -> tuple[Rule, ...] | None:
        """The rules of the Role ``namespace/name`` or the ClusterRole ``name``; None if absent."""
        index = self._current()
        if kind == "ClusterRole":
            return index.cluster_roles.get(name)
        return index.roles.get((namespace, name))


# -- covering: does one set of rules grant everything another does? ---------------------------


def _breakdown(rule: Rule) -> Iterator[Rule]:
    """``rule`` as one rule per verb, group, resource and name (``BreakdownRule``)."""
    for verb in rule.verbs:
        for group in rule.api_groups:
            for resource in rule.resources:
                if rule.resource_names:
                    for name in rule.resource_names:
                        yield Rule((verb,), (group,), (resource,), (name,))
                else:
                    yield Rule((verb,), (group,), (resource,))
        for url in rule.non_resource_urls:
            yield Rule((verb,), non_resource_urls=(url,))


def _covers_one(owner: Rule, wanted: Rule) -> bool:
    if not _matches(owner.verbs, wanted.verbs[0]):
        return False
    if wanted.non_resource_urls:
        return _url_covers(owner, wanted.non_resource_urls[0])
    if not _matches(owner.api_groups, wanted.api_groups[0]):
        return False
    resource = wanted.resources[0]
    if not any(
        candidate in ("*", resource)
        or (
            candidate.startswith("*/")
            and "/" in resource
            and resource.split("/", 1)[1] == candidate[2:]
        )
        or (candidate.endswith("/*") and resource.startswith(candidate[:-1]))
        for candidate in owner.resources
    ):
        return False
    if not owner.resource_names:
        return True
    return bool(wanted.resource_names) and wanted.resource_names[0] in owner.resource_names


def _url_covers(owner: Rule, url: str) -> bool:
    for held in owner.non_resource_urls:
        if held in ("*", url):
            return True
        if held.endswith("*") and url.startswith(held[:-1]):
            return True
    return False


def missing_rules(owner: Iterable[Rule], wanted: Iterable[Rule]) -> list[Rule]:
    """The broken-down rules of ``wanted`` no rule of ``owner`` covers (``validation.Covers``)."""
    held = list(owner)
    return [
        piece
        for rule in wanted
        for piece in _breakdown(rule)
        if not any(_covers_one(h, piece) for h in held)
    ]


def covers(owner: Iterable[Rule], wanted: Iterable[Rule]) -> bool:
    return not missing_rules(owner, wanted)


def compact(rules: Iterable[Rule]) -> list[Rule]:
    """Broken-down rules merged back per group/resource/name/URL, verbs joined
    (``CompactRules``), for a readable refusal."""
    merged: dict[tuple[tuple[str, ...], ...], list[str]] = {}
    for rule in rules:
        key = (rule.api_groups, rule.resources, rule.resource_names, rule.non_resource_urls)
        verbs = merged.setdefault(key, [])
        verbs.extend(v for v in rule.verbs if v not in verbs)
    return [
        Rule(tuple(verbs), groups, resources, names, urls)
        for (groups, resources, names, urls), verbs in merged.items()
    ]
