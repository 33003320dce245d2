"""Which requests the audit log records, and how much of each: an audit ``Policy``, evaluated.

Why a module of its own: the rules are Kubernetes' (``k8s.io/apiserver/pkg/audit/policy``) and
operators copy policies between clusters, so the matching must be exactly theirs, and it is
easier to check when it stands alone. A rule matches when every field it sets matches:

* ``users`` (the user's name), ``userGroups`` (any of the user's groups), ``verbs``;
* ``resources`` / ``namespaces`` — resource requests only; ``namespaces: [""]`` is the
  cluster-scoped ones; each group entry matches ``resource``, ``resource/subresource``, ``*``,
  ``*/subresource`` or ``resource/*``, limited to ``resourceNames`` when given;
* ``nonResourceURLs`` — non-resource requests only; a trailing ``*`` matches a prefix;
* a rule with none of these matches every request.

The first matching rule gives the level and the stages to leave out (its own ``omitStages``
joined with the policy's); a request no rule matches is not logged (level None).

One rule of kubelite's own sits above any policy: requests for Secrets, and for what carries a
bearer token (``serviceaccounts/token``, ``tokenreviews``), are never logged above Metadata,
whatever the policy says, so the audit log never holds a secret value or a token.

Limits: the policy is read once at start (a changed file needs a restart, as in Kubernetes).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import ValidationError

from api.audit import LEVELS, GroupResources, Level, Policy, PolicyRule, Stage
from services.apiserver.identity import RequestAttributes

__all__ = ["AuditPolicyError", "PolicyChecker", "Verdict", "load_policy"]

_NEVER_ABOVE_METADATA = {("", "secrets", ""), ("", "serviceaccounts", "token")}
_NEVER_ABOVE_METADATA_ANY_SUBRESOURCE = {("authentication.k8s.io", "tokenreviews")}


class AuditPolicyError(ValueError):
    """The policy file cannot be used; the message says why (one line)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    level: Level
    omit_stages: frozenset[Stage]
    omit_managed_fields: bool

    def at_least(self, level: Level) -> bool:
        return LEVELS.index(self.level) >= LEVELS.index(level)


NOT_LOGGED = Verdict(level="None", omit_stages=frozenset(), omit_managed_fields=False)


def load_policy(path: Path) -> Policy:
    """An audit.k8s.io/v1 Policy from a YAML or JSON file; ``AuditPolicyError`` if unusable."""
    try:
        return Policy.model_validate(yaml.safe_load(path.read_text()))
    except OSError as err:
        raise AuditPolicyError(f"cannot read {path}: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        raise AuditPolicyError(f"{path} is not valid YAML: {err}") from None
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise AuditPolicyError(f"{path}: {where}: {first['msg']}") from None


def _capped(attrs: RequestAttributes) -> bool:
    return (attrs.api_group, attrs.resource, attrs.subresource) in _NEVER_ABOVE_METADATA or (
        attrs.api_group,
        attrs.resource,
    ) in _NEVER_ABOVE_METADATA_ANY_SUBRESOURCE


def _path_matches(path: str, spec: str) -> bool:
    return spec in ("*", path) or (spec.endswith("*") and path.startswith(spec.rstrip("*")))


def _group_matches(entry: GroupResources, attrs: RequestAttributes) -> bool:
    if entry.group != attrs.api_group:
        return False
    if not entry.resources:
        return True
    if entry.resource_names and attrs.name not in entry.resource_names:
        return False
    sub = attrs.subresource
    combined = f"{attrs.resource}/{sub}" if sub else attrs.resource
    return any(
        res in ("*", combined)
        or (sub and res == f"*/{sub}")
        or (res.endswith("/*") and res[:-2] == attrs.resource)
        for res in entry.resources
    )


def _rule_matches(rule: PolicyRule, attrs: RequestAttributes) -> bool:
    user = attrs.user
    if rule.users and user.name not in rule.users:
        return False
    if rule.user_groups and not any(g in rule.user_groups for g in user.groups):
        return False
    if rule.verbs and attrs.verb not in rule.verbs:
        return False
    if rule.namespaces or rule.resources:
        if not attrs.resource_request:
            return False
        if rule.namespaces and attrs.namespace not in rule.namespaces:
            return False
        return not rule.resources or any(_group_matches(g, attrs) for g in rule.resources)
    if rule.non_resource_urls:
        return not attrs.resource_request and any(
            _path_matches(attrs.path, spec) for spec in rule.non_resource_urls
        )
    return True


class PolicyChecker:
    """``verdict(attrs)``: the level, omitted stages and managed-fields choice for one request."""

    def __init__(self, policy: Policy) -> None:
        self._policy = policy
        self._verdicts = [
            Verdict(
                level=rule.level,
                omit_stages=frozenset(rule.omit_stages) | frozenset(policy.omit_stages),
                omit_managed_fields=(
                    policy.omit_managed_fields
                    if rule.omit_managed_fields is None
                    else rule.omit_managed_fields
                ),
            )
            for rule in policy.rules
        ]

    def verdict(self, attrs: RequestAttributes) -> Verdict:
        for rule, verdict in zip(self._policy.rules, self._verdicts, strict=True):
            if _rule_matches(rule, attrs):
                if _capped(attrs) and verdict.at_least("Request"):
                    return Verdict("Metadata", verdict.omit_stages, verdict.omit_managed_fields)
                return verdict
        return NOT_LOGGED
