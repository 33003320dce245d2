"""flowcontrol.apiserver.k8s.io/v1: FlowSchema and PriorityLevelConfiguration.

Why: API Priority and Fairness sorts every request into a *flow* (``FlowSchema``: who asks for
what) and a *priority level* (``PriorityLevelConfiguration``: how many seats it gets, and
whether requests over them queue or are refused). The apiserver reads these objects
(``services.apiserver.flowcontrol``) and writes its defaults at start
(``services.apiserver.flowcontrol_bootstrap``); this module holds their shapes, the values
Kubernetes accepts for their enums, and their defaults (``pkg/apis/flowcontrol/v1/defaults.go``).

Limits: ``lendablePercent`` and ``borrowingLimitPercent`` are stored and defaulted, but no
level lends or borrows seats (see the apiserver's module).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from api.meta import KubeModel, ObjectMeta

__all__ = [
    "DEFAULT_HAND_SIZE",
    "DEFAULT_MATCHING_PRECEDENCE",
    "DEFAULT_NOMINAL_CONCURRENCY_SHARES",
    "DEFAULT_QUEUES",
    "DEFAULT_QUEUE_LENGTH_LIMIT",
    "DISTINGUISHER_METHODS",
    "GROUP",
    "LIMIT_RESPONSE_TYPES",
    "PRIORITY_LEVEL_TYPES",
    "SUBJECT_KINDS",
    "FlowSchema",
    "PriorityLevelConfiguration",
    "default_flow_schema",
    "default_priority_level",
]

GROUP = "flowcontrol.apiserver.k8s.io"
PRIORITY_LEVEL_TYPES = ("Exempt", "Limited")
LIMIT_RESPONSE_TYPES = ("Queue", "Reject")
DISTINGUISHER_METHODS = ("ByNamespace", "ByUser")
SUBJECT_KINDS = ("Group", "ServiceAccount", "User")

DEFAULT_MATCHING_PRECEDENCE = 1000
DEFAULT_NOMINAL_CONCURRENCY_SHARES = 30
DEFAULT_QUEUES = 64
DEFAULT_HAND_SIZE = 8
DEFAULT_QUEUE_LENGTH_LIMIT = 50

Obj = dict[str, Any]


class PriorityLevelReference(KubeModel):
    name: str = ""


class FlowDistinguisherMethod(KubeModel):
    type: str = ""


class NamedSubject(KubeModel):
    name: str = ""


class ServiceAccountSubject(KubeModel):
    namespace: str = ""
    name: str = ""


class Subject(KubeModel):
    kind: str = ""
    user: NamedSubject | None = None
    group: NamedSubject | None = None
    service_account: ServiceAccountSubject | None = None


class ResourcePolicyRule(KubeModel):
    verbs: list[str] = Field(default_factory=list)
    api_groups: list[str] = Field(default_factory=list)
    resources: list[str] = Field(default_factory=list)
    cluster_scope: bool | None = None
    namespaces: list[str] | None = None


class NonResourcePolicyRule(KubeModel):
    verbs: list[str] = Field(default_factory=list)
    non_resource_urls: list[str] = Field(default_factory=list, alias="nonResourceURLs")


class PolicyRulesWithSubjects(KubeModel):
    subjects: list[Subject] = Field(default_factory=list)
    resource_rules: list[ResourcePolicyRule] | None = None
    non_resource_rules: list[NonResourcePolicyRule] | None = None


class FlowSchemaSpec(KubeModel):
    priority_level_configuration: PriorityLevelReference = Field(
        default_factory=PriorityLevelReference
    )
    matching_precedence: int | None = None
    distinguisher_method: FlowDistinguisherMethod | None = None
    rules: list[PolicyRulesWithSubjects] | None = None


class FlowSchema(KubeModel):
    api_version: str = f"{GROUP}/v1"
    kind: str = "FlowSchema"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: FlowSchemaSpec = Field(default_factory=FlowSchemaSpec)
    status: dict[str, Any] | None = None


class QueuingConfiguration(KubeModel):
    queues: int | None = None
    hand_size: int | None = None
    queue_length_limit: int | None = None


class LimitResponse(KubeModel):
    type: str = ""
    queuing: QueuingConfiguration | None = None


class LimitedPriorityLevelConfiguration(KubeModel):
    nominal_concurrency_shares: int | None = None
    limit_response: LimitResponse = Field(default_factory=LimitResponse)
    lendable_percent: int | None = None
    borrowing_limit_percent: int | None = None


class ExemptPriorityLevelConfiguration(KubeModel):
    nominal_concurrency_shares: int | None = None
    lendable_percent: int | None = None


class PriorityLevelConfigurationSpec(KubeModel):
    type: str = ""
    limited: LimitedPriorityLevelConfiguration | None = None
    exempt: ExemptPriorityLevelConfiguration | None = None


class PriorityLevelConfiguration(KubeModel):
    api_version: str = f"{GROUP}/v1"
    kind: str = "PriorityLevelConfiguration"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PriorityLevelConfigurationSpec = Field(default_factory=PriorityLevelConfigurationSpec)
    status: dict[str, Any] | None = None


def default_flow_schema(obj: Obj) -> None:
    """``SetDefaults_FlowSchemaSpec``: ``matchingPrecedence`` 1000."""
    spec = obj.get("spec")
    if isinstance(spec, dict):
        spec.setdefault("matchingPrecedence", DEFAULT_MATCHING_PRECEDENCE)


def default_priority_level(obj: Obj) -> None:
    """``SetDefaults_{Limited,Exempt}PriorityLevelConfiguration`` and the queuing defaults
    (64 queues, hands of 8, 50 requests a queue)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    exempt = spec.get("exempt")
    if spec.get("type") == "Exempt" and exempt is None:
        exempt = spec["exempt"] = {}
    if isinstance(exempt, dict):
        exempt.setdefault("nominalConcurrencyShares", 0)
        exempt.setdefault("lendablePercent", 0)
    limited = spec.get("limited")
    if not isinstance(limited, dict):
        return
    limited.setdefault("nominalConcurrencyShares", DEFAULT_NOMINAL_CONCURRENCY_SHARES)
    limited.setdefault("lendablePercent", 0)
    queuing = (limited.get("limitResponse") or {}).get("queuing")
    if isinstance(queuing, dict):
        queuing.setdefault("queues", DEFAULT_QUEUES)
        queuing.setdefault("handSize", DEFAULT_HAND_SIZE)
        queuing.setdefault("queueLengthLimit", DEFAULT_QUEUE_LENGTH_LIMIT)
