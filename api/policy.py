"""policy/v1: PodDisruptionBudget, and Eviction — the body of a ``pods/eviction`` POST.

Why: evicting a pod (``kubectl drain``, the node-lifecycle controller) is a create on the pod's
``eviction`` subresource; unlike a delete it is refused (429) when it would take more of an
application's pods down than its PodDisruptionBudget allows. A budget selects pods by label and
says how many must stay up (``minAvailable``) or may be down (``maxUnavailable``), as a number
or a percentage; the disruption controller keeps its ``status`` (how many are healthy, how many
disruptions are allowed now), and each granted eviction is recorded in
``status.disruptedPods`` (pod name -> time) and takes one from ``status.disruptionsAllowed``.

Wire facts kept here: the four counters in the status are always serialised (Go fields without
``omitempty``); ``conditions`` are ``metav1.Condition``s (``reason`` and ``message`` always on
the wire). Which spec fields are valid is ``api.validation``'s; how an eviction honours a budget
is the apiserver's (``services/apiserver/subresources.py``).

Limits: nothing here computes a budget's status (the controller-manager's job).
"""

from __future__ import annotations

from pydantic import Field

from api.apps import IntOrString
from api.meta import Condition, DeleteOptions, KubeModel, LabelSelectorSpec, ObjectMeta

__all__ = [
    "DISRUPTION_BUDGET_CAUSE",
    "UNHEALTHY_POD_EVICTION_POLICIES",
    "Eviction",
    "PodDisruptionBudget",
    "PodDisruptionBudgetSpec",
    "PodDisruptionBudgetStatus",
]

DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"
"""The ``details.causes[].reason`` of an eviction refused for a budget (``policyv1.DisruptionBudgetCause``)."""

UNHEALTHY_POD_EVICTION_POLICIES = ("AlwaysAllow", "IfHealthyBudget")
"""``spec.unhealthyPodEvictionPolicy``: unset behaves as ``IfHealthyBudget``."""


class Eviction(KubeModel):
    api_version: str = "policy/v1"
    kind: str = "Eviction"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    delete_options: DeleteOptions | None = None


class PodDisruptionBudgetSpec(KubeModel):
    min_available: IntOrString | None = None
    selector: LabelSelectorSpec | None = None
    max_unavailable: IntOrString | None = None
    unhealthy_pod_eviction_policy: str | None = None


class PodDisruptionBudgetStatus(KubeModel):
    observed_generation: int | None = None
    disrupted_pods: dict[str, str] | None = None
    """Pod name -> the time its eviction was granted (until the pod is gone or 2 minutes pass)."""
    disruptions_allowed: int = 0
    current_healthy: int = 0
    desired_healthy: int = 0
    expected_pods: int = 0
    conditions: list[Condition] | None = None


class PodDisruptionBudget(KubeModel):
    api_version: str = "policy/v1"
    kind: str = "PodDisruptionBudget"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodDisruptionBudgetSpec = Field(default_factory=PodDisruptionBudgetSpec)
    status: PodDisruptionBudgetStatus = Field(default_factory=PodDisruptionBudgetStatus)
