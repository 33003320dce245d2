"""admissionregistration.k8s.io/v1: the webhooks and policies a write must pass.

Why: operators extend admission without rebuilding the apiserver. A
``MutatingWebhookConfiguration`` names HTTPS endpoints that may change an object before it is
stored (answering a JSONPatch), a ``ValidatingWebhookConfiguration`` endpoints that may refuse
it; a ``ValidatingAdmissionPolicy`` refuses with CEL expressions evaluated in the apiserver
itself, applied where a ``ValidatingAdmissionPolicyBinding`` says. The apiserver calls them
(``services.apiserver.webhooks``, ``services.apiserver.validating_policy``); this module holds
their shapes, their defaults (``pkg/apis/admissionregistration/v1/defaults.go``) and the
values Kubernetes accepts for their enums.

Limits: ``matchConditions`` and a policy's ``variables`` and ``auditAnnotations`` are stored;
only what the admission modules document is evaluated.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from api.meta import KubeModel, ObjectMeta

__all__ = [
    "FAILURE_POLICIES",
    "MATCH_POLICIES",
    "OPERATIONS",
    "REINVOCATION_POLICIES",
    "SCOPES",
    "SIDE_EFFECTS",
    "VALIDATION_ACTIONS",
    "MutatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "ValidatingWebhookConfiguration",
    "default_policy",
    "default_policy_binding",
    "default_webhook_configuration",
]

Obj = dict[str, Any]

OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
SCOPES = ("*", "Cluster", "Namespaced")
FAILURE_POLICIES = ("Fail", "Ignore")
MATCH_POLICIES = ("Equivalent", "Exact")
SIDE_EFFECTS = ("None", "NoneOnDryRun")
"""v1 accepts only these two (``Unknown`` and ``Some`` were v1beta1's)."""
REINVOCATION_POLICIES = ("IfNeeded", "Never")
VALIDATION_ACTIONS = ("Audit", "Deny", "Warn")
DEFAULT_TIMEOUT_SECONDS = 10
DEFAULT_SERVICE_PORT = 443


class ServiceReference(KubeModel):
    namespace: str = ""
    name: str = ""
    path: str | None = None
    port: int | None = None


class WebhookClientConfig(KubeModel):
    url: str | None = None
    service: ServiceReference | None = None
    ca_bundle: str | None = None


class RuleWithOperations(KubeModel):
    operations: list[str] | None = None
    api_groups: list[str] | None = None
    api_versions: list[str] | None = None
    resources: list[str] | None = None
    scope: str | None = None


class Webhook(KubeModel):
    """One webhook of either configuration (the mutating one adds ``reinvocationPolicy``)."""

    name: str = ""
    client_config: WebhookClientConfig = Field(default_factory=WebhookClientConfig)
    rules: list[RuleWithOperations] | None = None
    failure_policy: str | None = None
    match_policy: str | None = None
    namespace_selector: dict[str, Any] | None = None
    object_selector: dict[str, Any] | None = None
    side_effects: str | None = None
    timeout_seconds: int | None = None
    admission_review_versions: list[str] | None = None
    match_conditions: list[dict[str, Any]] | None = None
    reinvocation_policy: str | None = None


class MutatingWebhookConfiguration(KubeModel):
    api_version: str = "admissionregistration.k8s.io/v1"
    kind: str = "MutatingWebhookConfiguration"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    webhooks: list[Webhook] | None = None


class ValidatingWebhookConfiguration(KubeModel):
    api_version: str = "admissionregistration.k8s.io/v1"
    kind: str = "ValidatingWebhookConfiguration"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    webhooks: list[Webhook] | None = None


class Validation(KubeModel):
    expression: str = ""
    message: str | None = None
    message_expression: str | None = None
    reason: str | None = None


class ValidatingAdmissionPolicySpec(KubeModel):
    param_kind: dict[str, Any] | None = None
    match_constraints: dict[str, Any] | None = None
    validations: list[Validation] | None = None
    failure_policy: str | None = None
    audit_annotations: list[dict[str, Any]] | None = None
    match_conditions: list[dict[str, Any]] | None = None
    variables: list[dict[str, Any]] | None = None


class ValidatingAdmissionPolicy(KubeModel):
    api_version: str = "admissionregistration.k8s.io/v1"
    kind: str = "ValidatingAdmissionPolicy"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ValidatingAdmissionPolicySpec = Field(default_factory=ValidatingAdmissionPolicySpec)
    status: dict[str, Any] | None = None


class ValidatingAdmissionPolicyBindingSpec(KubeModel):
    policy_name: str = ""
    param_ref: dict[str, Any] | None = None
    match_resources: dict[str, Any] | None = None
    validation_actions: list[str] | None = None


class ValidatingAdmissionPolicyBinding(KubeModel):
    api_version: str = "admissionregistration.k8s.io/v1"
    kind: str = "ValidatingAdmissionPolicyBinding"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ValidatingAdmissionPolicyBindingSpec = Field(
        default_factory=ValidatingAdmissionPolicyBindingSpec
    )


def _dicts(value: Any) -> list[Obj]:
    return [x for x in value if isinstance(x, dict)] if isinstance(value, list) else []


def _default_rules(rules: Any) -> None:
    for rule in _dicts(rules):
        rule.setdefault("scope", "*")


def _default_match_resources(match: Any, *, match_policy: bool) -> None:
    """``SetDefaults_MatchResources``: empty selectors and ``matchPolicy: Equivalent``."""
    if not isinstance(match, dict):
        return
    if match_policy:
        match.setdefault("matchPolicy", "Equivalent")
    match.setdefault("namespaceSelector", {})
    match.setdefault("objectSelector", {})
    for field in ("resourceRules", "excludeResourceRules"):
        _default_rules(match.get(field))


def default_webhook_configuration(obj: Obj) -> None:
    """``SetDefaults_{Validating,Mutating}Webhook``, in place; the mutating kind also gets
    ``reinvocationPolicy: Never``."""
    mutating = obj.get("kind") == "MutatingWebhookConfiguration"
    for hook in _dicts(obj.get("webhooks")):
        hook.setdefault("failurePolicy", "Fail")
        hook.setdefault("matchPolicy", "Equivalent")
        hook.setdefault("namespaceSelector", {})
        hook.setdefault("objectSelector", {})
        hook.setdefault("timeoutSeconds", DEFAULT_TIMEOUT_SECONDS)
        if mutating:
            hook.setdefault("reinvocationPolicy", "Never")
        _default_rules(hook.get("rules"))
        service = (hook.get("clientConfig") or {}).get("service")
        if isinstance(service, dict):
            service.setdefault("port", DEFAULT_SERVICE_PORT)


def default_policy(obj: Obj) -> None:
    """``SetDefaults_ValidatingAdmissionPolicySpec``: ``failurePolicy: Fail``, match defaults."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("failurePolicy", "Fail")
    _default_match_resources(spec.get("matchConstraints"), match_policy=True)


def default_policy_binding(obj: Obj) -> None:
    """``SetDefaults_ValidatingAdmissionPolicyBindingSpec``: the match resources' selectors."""
    spec = obj.get("spec")
    if isinstance(spec, dict):
        _default_match_resources(spec.get("matchResources"), match_policy=True)
