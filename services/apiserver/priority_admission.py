"""Kubernetes' Priority admission plugin: a new pod's priority comes from its PriorityClass.

Why: a PriorityClass (``api.schema_kinds.priorityclass``) means something only once pods carry
its value; Kubernetes resolves it when a pod is created, not the scheduler. As
``plugin/pkg/admission/priority`` does:

* a new pod naming ``spec.priorityClassName`` gets that class's ``value`` as ``spec.priority``
  and its ``preemptionPolicy``; a class that does not exist refuses the pod (403 ``no
  PriorityClass with name X was found``);
* a new pod naming no class gets the global default class — its name, value and policy (the
  lowest value when a race left several marked) — or, without one, priority 0;
* a pod that says a ``priority`` or ``preemptionPolicy`` other than the computed one is refused
  (403, Kubernetes' words);
* a PriorityClass created ``globalDefault``, or updated to be, while another one is refused
  (403 ``PriorityClass X is already marked as default. Only one default can exist``);
* an update of a pod that leaves out ``priority`` or ``preemptionPolicy`` keeps the ones it
  was given (pod validation refuses any other change to them).

Classes are read from the priorityclasses watch cache (the store until it is ready).

Limits: a pod without a class and without a default gets no ``preemptionPolicy`` (Kubernetes
writes ``PreemptLowerPriority``); two concurrent writes of default classes may both pass, as in
Kubernetes (the lowest value then wins).
"""

from __future__ import annotations

from typing import Any

from api.errors import Forbidden
from api.registry import ResourceType
from services.apiserver.context import ApiContext
from services.apiserver.forbidden import forbidden_resource

__all__ = ["admit_priority", "admit_priority_update"]

Obj = dict[str, Any]

GROUP = "scheduling.k8s.io"


async def admit_priority(ctx: ApiContext, rt: ResourceType, obj: Obj, *, name: str) -> None:
    """The Priority plugin on the create of ``obj`` (a pod is changed in place)."""
    if (rt.group, rt.kind) == ("", "Pod"):
        await _admit_pod(ctx, obj, name=name)
    elif (rt.group, rt.kind) == (GROUP, "PriorityClass") and obj.get("globalDefault") is True:
        await _one_default(ctx, rt, name, updating=False)


async def admit_priority_update(ctx: ApiContext, rt: ResourceType, new: Obj, *, old: Obj) -> None:
    """The Priority plugin on an update of ``old`` to ``new`` (a pod is changed in place)."""
    if (rt.group, rt.kind) == ("", "Pod"):
        spec, old_spec = new.get("spec"), old.get("spec")
        if isinstance(spec, dict) and isinstance(old_spec, dict):
            for key in ("priority", "preemptionPolicy"):
                if spec.get(key) is None and old_spec.get(key) is not None:
                    spec[key] = old_spec[key]
    elif (rt.group, rt.kind) == (GROUP, "PriorityClass") and new.get("globalDefault") is True:
        await _one_default(ctx, rt, str(new["metadata"]["name"]), updating=True)


async def _one_default(ctx: ApiContext, rt: ResourceType, name: str, *, updating: bool) -> None:
    """Refuse a class becoming the default while another is (an update of the default itself
    passes)."""
    default = _global_default(await _classes(ctx))
    if default is None or (updating and default["metadata"]["name"] == name):
        return
    raise _forbidden(
        rt,
        name,
        f"PriorityClass {default['metadata']['name']} is already marked as default."
        " Only one default can exist",
    )


async def _admit_pod(ctx: ApiContext, pod: Obj, *, name: str) -> None:
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return  # validation refuses it
    pods = ctx.resource("", "pods")
    wanted = spec.get("priorityClassName")
    classes = await _classes(ctx)
    if wanted:
        found = next((c for c in classes if c["metadata"]["name"] == wanted), None)
        if found is None:
            raise _forbidden(pods, name, f"no PriorityClass with name {wanted} was found")
    else:
        found = _global_default(classes)
        if found is not None:
            spec["priorityClassName"] = found["metadata"]["name"]
    priority = found.get("value", 0) if found is not None else 0
    if spec.get("priority") is not None and spec["priority"] != priority:
        raise _forbidden(
            pods,
            name,
            f"the integer value of priority ({spec['priority']}) must not be provided in pod"
            f" spec; priority admission controller computed {priority} from the given"
            " PriorityClass name",
        )
    spec["priority"] = priority
    policy = found.get("preemptionPolicy") if found is not None else None
    if policy is None:
        return
    if spec.get("preemptionPolicy") is not None and spec["preemptionPolicy"] != policy:
        raise _forbidden(
            pods,
            name,
            f"the string value of PreemptionPolicy ({spec['preemptionPolicy']}) must not be"
            f" provided in pod spec; priority admission controller computed {policy} from the"
            " given PriorityClass name",
        )
    spec["preemptionPolicy"] = policy


async def _classes(ctx: ApiContext) -> list[Obj]:
    rt = ctx.resource(GROUP, "priorityclasses")
    cache = ctx.cache(rt)
    if cache is not None and cache.ready.is_set():
        return ctx.cached_objects(rt) or []
    return (await ctx.storage(rt).list(None)).items


def _global_default(classes: list[Obj]) -> Obj | None:
    """The class marked ``globalDefault`` with the lowest value (getDefaultPriorityClass)."""
    defaults = [c for c in classes if c.get("globalDefault") is True]
    return min(defaults, key=lambda c: c.get("value", 0), default=None)


def _forbidden(rt: ResourceType, name: str, why: str) -> Forbidden:
    return forbidden_resource(rt.plural, rt.group, name, why)
