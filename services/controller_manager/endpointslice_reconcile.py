"""Turning a set of desired endpoints into EndpointSlice writes with as little churn as possible.

Why: the endpointslice and endpointslice-mirroring controllers (``pkg/controller/endpointslice``
and its ``reconciler.go``) both end the same way — desired endpoints grouped by (address type,
port list), the slices they already manage, and a cap per slice — and every slice rewritten is
sent to every proxy and DNS server in the cluster. So:

* ``plan_slices(...)`` (pure): for each group, existing slices with exactly that address type
  and port list keep the endpoints still desired, in place (an endpoint is identified by its
  ``targetRef`` uid, else its first address), updated where their content changed; endpoints
  no slice holds go first into slices being rewritten anyway, then into untouched slices with
  room, and only then into new slices of at most ``max_per_slice``. Slices left empty, or with
  a port list no longer wanted, are deleted. With nothing desired at all, one slice without
  endpoints or ports is kept (Kubernetes' placeholder), so a Service always has a slice.
* ``managed_slices(...)``, ``plan_owned_slices(...)`` and ``slice_owner_key(...)``: the steps both
  controllers take around it — pick the slices one controller manages for a Service name, plan
  those the owner object still owns towards the desired groups (new slices named
  ``<owner>-<random>`` and owned by it) while deleting those an earlier object of that name left,
  and map a changed slice back to the key to requeue.
* ``SliceWriter`` applies a plan (create with ``generateName: <owner>-``, update as a
  compare-and-swap on the cached resourceVersion, delete with a uid precondition) and remembers
  what it wrote per owner, so ``observed(owner, cache)`` can tell a sync not to trust a cache
  that has not yet seen those writes — the guard that keeps a lagging informer from creating a
  second slice for the same endpoints (Kubernetes' endpointSliceTracker).

Limits: no topology-aware hints; at most one ``addressType`` per group (kubelite's pods are
single-stack).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from api.discovery import LABEL_MANAGED_BY, LABEL_SERVICE_NAME
from api.errors import NotFound
from api.registry import REGISTRY, ResourceType
from client.rest import ApiClient
from services.controller_manager.controller_ref import new_controller_ref

__all__ = [
    "ENDPOINT_SLICES",
    "Group",
    "GroupKey",
    "SlicePlan",
    "SliceWriter",
    "managed_slices",
    "plan_owned_slices",
    "plan_slices",
    "slice_owner_key",
]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
ENDPOINT_SLICES = REGISTRY.require("discovery.k8s.io", "EndpointSlice")

GroupKey = tuple[str, tuple[tuple[str, int | None, str, str], ...]]
"""(address type, the port list as (name, port, protocol, appProtocol) tuples)."""


@dataclass(slots=True)
class Group:
    address_type: str
    ports: list[Obj]
    endpoints: list[Obj] = field(default_factory=list)

    @property
    def key(self) -> GroupKey:
        return group_key(self.address_type, self.ports)


@dataclass(slots=True)
class SlicePlan:
    create: list[Obj] = field(default_factory=list)
    update: list[Obj] = field(default_factory=list)
    delete: list[Obj] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.create or self.update or self.delete)


def group_key(address_type: str, ports: list[Obj] | None) -> GroupKey:
    return (
        address_type,
        tuple(
            sorted(
                (
                    str(p.get("name") or ""),
                    p.get("port"),
                    str(p.get("protocol") or "TCP"),
                    str(p.get("appProtocol") or ""),
                )
                for p in ports or []
            )
        ),
    )


def endpoint_id(endpoint: Mapping[str, Any]) -> str:
    uid = (endpoint.get("targetRef") or {}).get("uid")
    return f"uid:{uid}" if uid else f"ip:{(endpoint.get('addresses') or [''])[0]}"


def _slice_key(es: Mapping[str, Any]) -> GroupKey:
    return group_key(str(es.get("addressType") or ""), es.get("ports"))


def plan_slices(
    *,
    existing: list[Obj],
    desired: list[Group],
    labels: Mapping[str, str],
    new_slice: Callable[[Group], Obj],
    max_per_slice: int,
) -> SlicePlan:
    """The writes that make ``existing`` (the slices one owner manages) hold ``desired``."""
    if not any(g.endpoints for g in desired):
        desired = [Group(address_type=desired[0].address_type if desired else "IPv4", ports=[])]
    plan = SlicePlan()
    wanted = {g.key: g for g in desired}
    by_key: dict[GroupKey, list[Obj]] = {}
    for es in sorted(existing, key=lambda s: str((s.get("metadata") or {}).get("name"))):
        key = _slice_key(es)
        if key in wanted:
            by_key.setdefault(key, []).append(es)
        else:
            plan.delete.append(es)
    for key, group in wanted.items():
        _plan_group(plan, group, by_key.get(key, []), labels, new_slice, max_per_slice)
    return plan


def _plan_group(
    plan: SlicePlan,
    group: Group,
    slices: list[Obj],
    labels: Mapping[str, str],
    new_slice: Callable[[Group], Obj],
    max_per_slice: int,
) -> None:
    remaining = {endpoint_id(e): e for e in group.endpoints}
    kept: list[tuple[Obj, list[Obj], bool]] = []  # (slice, its new endpoints, changed)
    for es in slices:
        endpoints = []
        for endpoint in es.get("endpoints") or []:
            want = remaining.pop(endpoint_id(endpoint), None)
            if want is not None:
                endpoints.append(want)
        changed = endpoints != (es.get("endpoints") or [])
        changed |= ((es.get("metadata") or {}).get("labels") or {}) != dict(labels)
        kept.append((es, endpoints, changed))
    unplaced = sorted(remaining.values(), key=lambda e: (e.get("addresses") or [""])[0])
    # fill slices being rewritten anyway first, then untouched ones with room
    for prefer_changed in (True, False):
        for i, (es, endpoints, changed) in enumerate(kept):
            if changed != prefer_changed or not unplaced:
                continue
            room = max_per_slice - len(endpoints)
            if room > 0:
                endpoints.extend(unplaced[:room])
                del unplaced[:room]
                kept[i] = (es, endpoints, True)
    placeholder = not group.endpoints
    for es, endpoints, changed in kept:
        if not endpoints and not (placeholder and es is kept[0][0]):
            plan.delete.append(es)
        elif changed:
            updated = copy.deepcopy(es)
            updated["metadata"]["labels"] = dict(labels)
            updated["endpoints"] = endpoints
            plan.update.append(updated)
    while unplaced or (placeholder and not kept and not plan.create):
        chunk, unplaced = unplaced[:max_per_slice], unplaced[max_per_slice:]
        plan.create.append(new_slice(Group(group.address_type, group.ports, chunk)))
        if placeholder:
            break


def _labels_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return (obj.get("metadata") or {}).get("labels") or {}


def managed_slices(slices: Iterable[Obj], *, service_name: str, managed_by: str) -> list[Obj]:
    """The ``slices`` labelled as ``managed_by``'s for the Service named ``service_name``."""
    return [
        es
        for es in slices
        if _labels_of(es).get(LABEL_SERVICE_NAME) == service_name
        and _labels_of(es).get(LABEL_MANAGED_BY) == managed_by
    ]


def slice_owner_key(es: Mapping[str, Any], *, managed_by: str) -> str | None:
    """The ``ns/name`` key a changed slice of ``managed_by``'s concerns, None for others'."""
    labels = _labels_of(es)
    if labels.get(LABEL_MANAGED_BY) != managed_by or not labels.get(LABEL_SERVICE_NAME):
        return None
    return f"{(es.get('metadata') or {}).get('namespace')}/{labels[LABEL_SERVICE_NAME]}"


def plan_owned_slices(
    *,
    owner: Obj,
    owner_rt: ResourceType,
    managed: list[Obj],
    desired: list[Group],
    labels: Mapping[str, str],
    max_per_slice: int,
) -> SlicePlan:
    """``plan_slices`` over the ``managed`` slices ``owner`` owns, plus deleting those owned by
    an earlier object of its name; new slices are ``<owner>-<random>``, owned by ``owner``."""
    meta = owner.get("metadata") or {}
    existing: list[Obj] = []
    foreign: list[Obj] = []  # left by an earlier object of this name
    for es in managed:
        owners = (es.get("metadata") or {}).get("ownerReferences") or []
        (existing if any(o.get("uid") == meta.get("uid") for o in owners) else foreign).append(es)

    def new_slice(group: Group) -> Obj:
        body: Obj = {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "generateName": f"{meta.get('name')}-",
                "namespace": meta.get("namespace"),
                "labels": labels,
                "ownerReferences": [new_controller_ref(owner, owner_rt)],
            },
            "addressType": group.address_type,
            "endpoints": group.endpoints,
        }
        if group.ports:
            body["ports"] = group.ports
        return body

    plan = plan_slices(
        existing=existing,
        desired=desired,
        labels=labels,
        new_slice=new_slice,
        max_per_slice=max_per_slice,
    )
    plan.delete += foreign
    return plan


def _rv(obj: Mapping[str, Any] | None) -> int:
    try:
        return int(((obj or {}).get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


class SliceWriter:
    """Applies plans and remembers, per owner, the writes its cache has yet to show."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client
        self._pending: dict[str, dict[str, int | None]] = {}

    def observed(self, owner: str, cache: Any) -> bool:
        """True when ``cache`` (``get("ns/name")``) reflects every write made for ``owner``."""
        pending = self._pending.get(owner)
        if not pending:
            return True
        for key, rv in list(pending.items()):
            cached = cache.get(key)
            seen = cached is None if rv is None else cached is not None and _rv(cached) >= rv
            if seen:
                del pending[key]
        if not pending:
            del self._pending[owner]
        return not pending

    def forget(self, owner: str) -> None:
        self._pending.pop(owner, None)

    async def apply(self, owner: str, namespace: str, plan: SlicePlan) -> None:
        pending = self._pending.setdefault(owner, {})
        for body in plan.create:
            created = await self.client.create(ENDPOINT_SLICES, body, namespace=namespace)
            pending[f"{namespace}/{created['metadata']['name']}"] = _rv(created)
            log.info("created endpointslice %s/%s", namespace, created["metadata"]["name"])
        for body in plan.update:
            updated = await self.client.update(ENDPOINT_SLICES, body, namespace=namespace)
            pending[f"{namespace}/{updated['metadata']['name']}"] = _rv(updated)
        for es in plan.delete:
            meta = es["metadata"]
            try:
                await self.client.delete(
                    ENDPOINT_SLICES,
                    meta["name"],
                    namespace=namespace,
                    preconditions={"uid": meta["uid"]},
                )
            except NotFound:
                pass
            pending[f"{namespace}/{meta['name']}"] = None
            log.info("deleted endpointslice %s/%s", namespace, meta["name"])
