"""``POST pods/{name}/eviction``: a graceful delete that honours PodDisruptionBudgets.

Why: ``kubectl drain`` and the node-lifecycle controller evict rather than delete so that an
application never loses more pods at once than its budget allows. As Kubernetes' eviction REST
(``pkg/registry/core/pod/storage/eviction.go``) does, in this order:

1. A pod that is already terminal (``Succeeded``/``Failed``), still ``Pending`` or already being
   deleted has disrupted nothing more by going: it is deleted without looking at budgets.
2. The budgets in the pod's namespace whose selector matches the pod's labels are found (a
   budget without a selector matches nothing; ``{}`` matches every pod, as in policy/v1). More
   than one is a 500 Status Kubernetes words as "This pod has more than one
   PodDisruptionBudget, which the eviction subresource does not support."; none is a delete.
3. A pod that is not Ready may go regardless when the budget's
   ``unhealthyPodEvictionPolicy`` is ``AlwaysAllow``, or, under the default ``IfHealthyBudget``,
   when the budget is currently met (``currentHealthy >= desiredHealthy > 0``).
4. Otherwise the budget must have been observed by the disruption controller
   (``status.observedGeneration >= metadata.generation``, else 429 "still being processed") and
   allow a disruption (``status.disruptionsAllowed > 0``, else 429 "Cannot evict pod as it
   would violate the pod's disruption budget." with a ``DisruptionBudget`` cause). The grant is
   one compare-and-swap on the budget's status: ``disruptionsAllowed`` minus one, the pod named
   in ``disruptedPods`` with the time (so the controller does not count it as healthy while it
   goes), and the ``DisruptionAllowed`` condition set ``False`` when none are left; a concurrent
   eviction that wins the race makes this one re-read the budget and check again.
5. Then the pod gets the condition ``DisruptionTarget`` True (reason ``EvictionByEvictionAPI``,
   "Eviction API: evicting"), as Kubernetes adds it since 1.26, and is deleted with the
   Eviction's ``deleteOptions`` (a ``resourceVersion`` precondition is moved to the version
   that condition wrote, as Kubernetes does).

Limits: a dry-run eviction checks the budget and writes nothing; the budget's
``disruptedPods`` is cleaned by the disruption controller, not here.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from aiohttp import web

from api.errors import BadRequest, Forbidden, StatusError, TooManyRequests
from api.meta import DeleteOptions, now_time
from api.policy import DISRUPTION_BUDGET_CAUSE
from api.registry import REGISTRY
from api.selectors import label_selector_from_dict
from services.apiserver.codec import json_response, read_object
from services.apiserver.context import ApiContext
from services.apiserver.deletion import delete_object, parse_delete_options
from services.apiserver.handlers import is_dry_run
from services.apiserver.node_restriction import CREATE, Write, admit_named

if TYPE_CHECKING:  # rest.py dispatches here, so the import runs one way only
    from services.apiserver.rest import Target

__all__ = ["evict"]

Obj = dict[str, Any]

PDBS = REGISTRY.require("policy", "PodDisruptionBudget")

VIOLATES_BUDGET = "Cannot evict pod as it would violate the pod's disruption budget."
MORE_THAN_ONE_BUDGET = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
    "support."
)
PROCESSING_RETRY_AFTER = 10
"""Seconds Kubernetes suggests waiting for a budget the disruption controller has not seen."""
DISRUPTION_TARGET = "DisruptionTarget"
EVICTION_CONDITION = {"reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"}
"""The pod condition an eviction adds before deleting (``DisruptionTarget``'s reason/message)."""
MAX_DISRUPTED_PODS = 2000
"""``MaxDisruptedPodSize``: evictions the controller has not confirmed, beyond which all wait."""


def _success() -> web.Response:
    return json_response(
        {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201},
        status=201,
    )


async def evict(request: web.Request, ctx: ApiContext, target: Target) -> web.Response:
    """Evict ``target``'s pod as the module docstring describes; 201 Success when it goes."""
    body = await read_object(request)
    if body.get("kind") not in (None, "Eviction"):
        raise BadRequest(
            f"the object provided is unrecognized (must be of type Eviction): {body.get('kind')}"
        )
    meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    if meta.get("name") not in (None, target.name):
        raise BadRequest(
            f"name in URL does not match name in Eviction object: {target.name} != {meta.get('name')}"
        )
    raw_options = body.get("deleteOptions")
    options = parse_delete_options(raw_options if isinstance(raw_options, dict) else {})
    dry_run = is_dry_run(request) or bool(options.dry_run)
    namespace, name = target.namespace, str(target.name)
    write = Write(target.rt, CREATE, namespace, name, subresource="eviction")
    await admit_named(request, ctx, write)
    pod = await ctx.storage(target.rt).get(namespace, name)
    if not _can_ignore_budgets(pod):
        budgets = await _budgets_of(ctx, pod)
        if len(budgets) > 1:
            return json_response(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "message": MORE_THAN_ONE_BUDGET,
                    "code": 500,
                },
                status=500,
            )
        if budgets and not _unhealthy_may_go(pod, budgets[0]):
            await _take_one_disruption(ctx, budgets[0], pod_name=name, dry_run=dry_run)
    if not dry_run:
        options = await _mark_disruption_target(ctx, target, options)
        await delete_object(ctx, target.rt, namespace, name, options)
    return _success()


async def _mark_disruption_target(
    ctx: ApiContext, target: Target, options: DeleteOptions
) -> DeleteOptions:
    """Put ``DisruptionTarget`` on the pod before it is deleted (``addConditionAndDeletePod``);
    the delete options with a ``resourceVersion`` precondition moved to the written version."""
    storage = ctx.storage(target.rt)
    pre = options.preconditions

    async def mutate(current: Obj) -> Obj | None:
        meta = current["metadata"]
        if pre is not None and pre.uid and pre.uid != meta.get("uid"):
            raise storage.conflict(
                str(target.name),
                f"Precondition failed: UID in precondition: {pre.uid}, UID in object meta: "
                f"{meta.get('uid')}",
            )
        if (
            pre is not None
            and pre.resource_version
            and pre.resource_version != meta.get("resourceVersion")
        ):
            raise storage.conflict(
                str(target.name),
                "Precondition failed: ResourceVersion in precondition: "
                f"{pre.resource_version}, ResourceVersion in object meta: "
                f"{meta.get('resourceVersion')}",
            )
        new = copy.deepcopy(current)
        status = new.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
        existing = next((c for c in conditions if c.get("type") == DISRUPTION_TARGET), None)
        wanted = {"type": DISRUPTION_TARGET, "status": "True"} | EVICTION_CONDITION
        if existing is None:
            conditions.append({**wanted, "lastTransitionTime": now_time()})
        else:
            if existing.get("status") != "True":
                existing["lastTransitionTime"] = now_time()
            existing.update(wanted)
        status["conditions"] = conditions
        return new

    written = await storage.guaranteed_update(target.namespace, str(target.name), mutate)
    if pre is None or not pre.resource_version:
        return options
    moved = pre.model_copy(update={"resource_version": written.obj["metadata"]["resourceVersion"]})
    return options.model_copy(update={"preconditions": moved})


def _can_ignore_budgets(pod: Obj) -> bool:
    """Terminal, pending or terminating pods disrupt nothing more by going (``canIgnorePDB``)."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or bool(
        pod["metadata"].get("deletionTimestamp")
    )


def _is_ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


async def _budgets_of(ctx: ApiContext, pod: Obj) -> list[Obj]:
    """The budgets in the pod's namespace whose selector matches the pod's labels."""
    meta = pod["metadata"]
    page = await ctx.storage(PDBS).list(meta.get("namespace"))
    labels = meta.get("labels") or {}
    matching = []
    for budget in page.items:
        selector = (budget.get("spec") or {}).get("selector")
        if selector is None:
            continue  # a budget without a selector selects nothing
        try:
            if label_selector_from_dict(selector).matches(labels):
                matching.append(budget)
        except BadRequest:
            continue  # an invalid selector matches no pod
    return matching


def _unhealthy_may_go(pod: Obj, budget: Obj) -> bool:
    """A pod that is not Ready may be evicted without spending the budget when its policy says
    ``AlwaysAllow``, or (``IfHealthyBudget``, the default) the budget is currently met."""
    if _is_ready(pod):
        return False
    spec, status = budget.get("spec") or {}, budget.get("status") or {}
    if spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
        return True
    desired = int(status.get("desiredHealthy") or 0)
    return desired > 0 and int(status.get("currentHealthy") or 0) >= desired


async def _take_one_disruption(
    ctx: ApiContext, budget: Obj, *, pod_name: str, dry_run: bool
) -> None:
    """Spend one allowed disruption of ``budget`` on ``pod_name`` (one CAS; re-checked on a race)."""
    meta = budget["metadata"]
    name = str(meta["name"])

    async def mutate(current: Obj) -> Obj | None:
        _check_allows_a_disruption(current)
        new = copy.deepcopy(current)
        status = new.setdefault("status", {})
        status["disruptionsAllowed"] = int(status.get("disruptionsAllowed") or 0) - 1
        if status["disruptionsAllowed"] == 0:
            _set_disruption_allowed_false(status)
        disrupted = status.get("disruptedPods")
        if not isinstance(disrupted, dict):
            disrupted = status["disruptedPods"] = {}
        disrupted[pod_name] = now_time()
        return None if dry_run else new

    await ctx.storage(PDBS).guaranteed_update(meta.get("namespace"), name, mutate)


def _check_allows_a_disruption(budget: Obj) -> None:
    """``checkAndDecrement``'s refusals, with Kubernetes' messages."""
    name = str(budget["metadata"]["name"])
    status = budget.get("status") or {}
    generation = int(budget["metadata"].get("generation") or 0)
    if int(status.get("observedGeneration") or 0) < generation:
        raise _refused(
            f"The disruption budget {name} is still being processed by the server.",
            retry_after=PROCESSING_RETRY_AFTER,
        )
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise _forbidden(name, "pdb disruptions allowed is negative")
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS:
        raise _forbidden(
            name, "DisruptedPods map too big - too many evictions not confirmed by PDB controller"
        )
    if allowed == 0:
        desired, current = status.get("desiredHealthy") or 0, status.get("currentHealthy") or 0
        raise _refused(
            f"The disruption budget {name} needs {desired} healthy pods and has {current} currently"
        )


def _refused(detail: str, *, retry_after: int = 0) -> StatusError:
    return TooManyRequests(
        VIOLATES_BUDGET,
        causes=[{"reason": DISRUPTION_BUDGET_CAUSE, "message": detail}],
        retry_after_seconds=retry_after or None,
    )


def _forbidden(name: str, detail: str) -> StatusError:
    return Forbidden(
        f'poddisruptionbudgets.policy "{name}" is forbidden: {detail}',
        kind="poddisruptionbudgets",
        name=name,
        group="policy",
    )


def _set_disruption_allowed_false(status: Obj) -> None:
    """``UpdateDisruptionAllowedCondition`` for none left: ``DisruptionAllowed`` False,
    ``InsufficientPods``; the transition time moves only when the status changes."""
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    existing = next((c for c in conditions if c.get("type") == "DisruptionAllowed"), None)
    wanted = {
        "type": "DisruptionAllowed",
        "status": "False",
        "reason": "InsufficientPods",
        "message": "",
        "observedGeneration": int(status.get("observedGeneration") or 0),
    }
    if existing is None:
        conditions.append({**wanted, "lastTransitionTime": now_time()})
    else:
        if existing.get("status") != "False":
            existing["lastTransitionTime"] = now_time()
        existing.update(wanted)
    status["conditions"] = conditions
