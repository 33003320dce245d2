"""VolumeBinding: a pod goes only where its PersistentVolumeClaims can be met, and binds them.

As kube-scheduler's VolumeBinding plugin (``framework/plugins/volumebinding``), at four points:

* **PreFilter** sorts the pod's claims. A claim that does not exist (``persistentvolumeclaim
  "data" not found``), is being deleted, or lost its volume fails the pod on every node; so does
  an unbound claim whose class binds ``Immediate`` ("pod has unbound immediate
  PersistentVolumeClaims": the PV controller binds it without us). All unresolvable: only a
  change to the claim, a volume or a class helps, and those events retry the pod
  (``volumes.py``). A pod without claims is skipped.
* **Filter**, per node: a bound claim's volume must exist and its ``spec.nodeAffinity.required``
  match the node ("node(s) had volume node affinity conflict"). An unbound WaitForFirstConsumer
  claim needs a free volume the PV controller would bind it to on this node (the same rules,
  ``api.volume_matching.best_match``: class, size, access modes, volume mode, selector, node
  affinity), else a class that can provision here — any
  provisioner but ``kubernetes.io/no-provisioner``; kubelite's ``kubelite.io/local-path`` only
  on a node that says where its local-path root is (``kubelite.io/local-path-root``) — else
  "node(s) didn't find available persistent volumes to bind". A claim already holding a
  ``volume.kubernetes.io/selected-node`` (or assumed to, see Reserve) fits only that node.
* **Reserve** holds the chosen node's unbound claims to that node in ``VolumeCache`` at once,
  so a second pod sharing a claim is not sent elsewhere before the watch reports the first one's
  writes. ``unreserve`` lets go.
* **PreBind**, in the binding cycle, makes the writes: a volume matched statically is pre-bound
  to its claim (``spec.claimRef``, a compare-and-swap PUT); a claim left to provisioning gets
  ``volume.kubernetes.io/selected-node: <node>`` (a merge PATCH). Then it waits — on the claim,
  volume and class watches, never polling — until every claim is Bound to a volume whose
  affinity admits the node, and only then is the pod bound. The claim vanishing, the provisioner
  taking the selected node away again (it cannot provision there), a volume that landed
  elsewhere, or ``BIND_TIMEOUT`` fail the binding cycle: the pod is retried from scratch.

Binding the claim is the PV controller's job; this plugin only says where.

Limits: no volume-capacity scoring, no CSI storage capacity or attach limits (NodeVolumeLimits),
no ReadWriteOncePod exclusivity (VolumeRestrictions), no generic ephemeral volumes. An
assumption made for one pod is dropped by that pod's failure even if another pod's later cycle
relied on it (the annotation, once written, is the lasting record).
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from api.errors import StatusError
from api.registry import REGISTRY, ResourceType
from api.storage import (
    LOCAL_PATH_PROVISIONER,
    LOCAL_PATH_ROOT_ANNOTATION,
    SELECTED_NODE_ANNOTATION,
)
from api.volume_matching import best_match, is_bound_to, volume_admits
from services.scheduler.framework import SKIP, CycleState, Handle, Status
from services.scheduler.nodeinfo import NodeInfo, PodInfo
from services.scheduler.volumes import claim_key

__all__ = [
    "BIND_CONFLICT",
    "BIND_TIMEOUT",
    "LOCAL_PATH_ROOT_ANNOTATION",
    "NAME",
    "NODE_CONFLICT",
    "PV_NOT_EXIST",
    "UNBOUND_IMMEDIATE",
    "VolumeBinding",
]

log = logging.getLogger("kubelite.scheduler.volumes")

NAME = "VolumeBinding"
STATE_KEY = NAME

# kube-scheduler's reasons, word for word
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"

"""On a Node: the directory kubelite's local-path provisioner creates its volumes under."""
NO_PROVISIONER = "kubernetes.io/no-provisioner"
"""The provisioner of a class whose volumes are all made by hand (local volumes)."""
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
BOUND_BY_CONTROLLER_ANNOTATION = "pv.kubernetes.io/bound-by-controller"

BIND_TIMEOUT = 600.0
"""Seconds PreBind waits for the claims to be bound: kube-scheduler's bindTimeoutSeconds."""

_pvcs = REGISTRY.by_kind("", "PersistentVolumeClaim")
_pvs = REGISTRY.by_kind("", "PersistentVolume")
assert _pvcs is not None and _pvs is not None
PVCS: ResourceType = _pvcs
PVS: ResourceType = _pvs

Obj = Mapping[str, Any]


class BindingFailed(Exception):
    """The claims will not be bound for this node: retry the pod from its scheduling cycle."""


# ---- reading claims and volumes -------------------------------------------------------------


def _spec(obj: Obj) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _allowed_topologies_admit(storage_class: Obj, labels: Mapping[str, str]) -> bool:
    terms = storage_class.get("allowedTopologies") or ()
    if not terms:
        return True
    return any(
        all(
            labels.get(e.get("key") or "") in (e.get("values") or ())
            for e in term.get("matchLabelExpressions") or ()
        )
        for term in terms
    )


def _is_bound(claim: Obj) -> bool:
    return (
        bool(_spec(claim).get("volumeName")) and (claim.get("status") or {}).get("phase") == "Bound"
    )


# ---- cycle state ----------------------------------------------------------------------------


@dataclass(slots=True)
class _NodePlan:
    """What binding the pod's unbound claims on one node takes."""

    labels: Mapping[str, str]
    prebind: list[tuple[Obj, Obj]] = field(default_factory=list)
    """(claim, volume): an Available volume matched to the claim, to be pre-bound."""
    provision: list[Obj] = field(default_factory=list)
    """Claims the class's provisioner makes a volume for, once told the node."""

    @property
    def claims(self) -> list[Obj]:
        return [c for c, _ in self.prebind] + self.provision


@dataclass(slots=True)
class _PodClaims:
    bound: list[Obj] = field(default_factory=list)
    delayed: list[Obj] = field(default_factory=list)
    """Unbound claims whose class waits for the first consumer."""
    plans: dict[str, _NodePlan] = field(default_factory=dict)
    """Node name -> its plan, for every node Filter let through."""


class VolumeBinding:
    name = NAME
    bind_timeout = BIND_TIMEOUT

    def __init__(self, handle: Handle) -> None:
        self.volumes = handle.volumes
        self.client = handle.client
        self._written: dict[str, int] = {}
        """Claim key -> resourceVersion of our selected-node write, until it is confirmed."""

    # ---- PreFilter -----------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
        claims = _PodClaims()
        state.write(STATE_KEY, claims)
        if not pod.claims:
            return SKIP
        immediate = False
        for name in pod.claims:
            claim = self.volumes.claim(pod.namespace, name)
            if claim is None:
                return Status.unresolvable(f'persistentvolumeclaim "{name}" not found')
            volume_name = _spec(claim).get("volumeName") or ""
            if (claim.get("status") or {}).get("phase") == "Lost":
                return Status.unresolvable(
                    f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume '
                    f'"{volume_name}"'
                )
            if _meta(claim).get("deletionTimestamp"):
                return Status.unresolvable(f'persistentvolumeclaim "{name}" is being deleted')
            if volume_name:
                claims.bound.append(claim)
                continue
            class_name = _spec(claim).get("storageClassName") or ""
            storage_class = self.volumes.storage_class(class_name) if class_name else None
            if class_name and storage_class is None:
                return Status.unresolvable(f'storageclass.storage.k8s.io "{class_name}" not found')
            if (storage_class or {}).get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER:
                claims.delayed.append(claim)
            else:
                immediate = True
        if immediate:
            return Status.unresolvable(UNBOUND_IMMEDIATE)
        return None

    # ---- Filter --------------------------------------------------------------------------

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        claims: _PodClaims = state.read(STATE_KEY)
        reasons: list[str] = []
        for claim in claims.bound:
            pv = self.volumes.volume(_spec(claim).get("volumeName") or "")
            if pv is None:
                reasons.append(PV_NOT_EXIST)
            elif not volume_admits(pv, node.name, node.labels):
                reasons.append(NODE_CONFLICT)
        if claims.delayed:
            plan = self._plan(claims.delayed, node)
            if plan is None:
                reasons.append(BIND_CONFLICT)
            else:
                claims.plans[node.name] = plan
        return Status.unresolvable(*sorted(set(reasons))) if reasons else None

    def _plan(self, delayed: Sequence[Obj], node: NodeInfo) -> _NodePlan | None:
        """How ``node`` can take the unbound claims, or None if it cannot."""
        plan = _NodePlan(labels=node.labels)
        taken: set[str] = set()
        for claim in delayed:
            selected = self.volumes.selected_node(claim)
            if selected:
                if selected != node.name:
                    return None
                plan.provision.append(claim)
                continue
            pv = self._matching_volume(claim, node, taken)
            if pv is None:
                plan.provision.append(claim)
            else:
                taken.add(_meta(pv).get("name") or "")
                plan.prebind.append((claim, pv))
        if not all(self._can_provision(claim, node) for claim in plan.provision):
            return None
        return plan

    def _matching_volume(self, claim: Obj, node: NodeInfo, taken: set[str]) -> Obj | None:
        """The volume the PV controller's own rules (``api.volume_matching.best_match``) pick
        for the claim on ``node``, among those no other claim of this pod took."""
        candidates = [
            pv
            for pv in self.volumes.volumes_of_class(_spec(claim).get("storageClassName") or "")
            if (_meta(pv).get("name") or "") not in taken
        ]
        where = {"metadata": {"name": node.name, "labels": node.labels}}
        return best_match(claim, candidates, delay_binding=True, node=where)

    def _can_provision(self, claim: Obj, node: NodeInfo) -> bool:
        storage_class = self.volumes.storage_class(_spec(claim).get("storageClassName") or "")
        if storage_class is None:
            return False
        provisioner = storage_class.get("provisioner") or ""
        if provisioner in ("", NO_PROVISIONER):
            return False
        if provisioner == LOCAL_PATH_PROVISIONER:
            annotations = (node.node and _meta(node.node).get("annotations")) or {}
            if not annotations.get(LOCAL_PATH_ROOT_ANNOTATION):
                return False
        return _allowed_topologies_admit(storage_class, node.labels)

    # ---- Reserve -------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status | None:
        plan = self._plan_for(state, node)
        if plan is not None:
            for claim in plan.claims:
                self.volumes.assume_selected_node(claim_key(claim), node)
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        plan = self._plan_for(state, node)
        if plan is not None:
            for claim in plan.claims:
                self.volumes.forget_selected_node(claim_key(claim), node)

    @staticmethod
    def _plan_for(state: CycleState, node: str) -> _NodePlan | None:
        try:
            claims: _PodClaims = state.read(STATE_KEY)
        except KeyError:  # PreFilter never ran: the cycle failed before it
            return None
        plan = claims.plans.get(node)
        return plan if plan is not None and plan.claims else None

    # ---- PreBind -------------------------------------------------------------------------

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status | None:
        plan = self._plan_for(state, node)
        if plan is None:
            return None
        if self.client is None:
            return Status.error("binding volumes: this scheduler has no API client")
        try:
            for claim, pv in plan.prebind:
                await self._prebind(claim, pv)
            for claim in plan.provision:
                await self._select_node(claim, node)
            async with asyncio.timeout(self.bind_timeout):
                await self.volumes.wait_until(lambda: self._all_bound(plan, node))
        except TimeoutError:
            return Status.error(f"binding volumes: claims not bound within {self.bind_timeout:g}s")
        except (StatusError, BindingFailed) as exc:
            message = exc.message if isinstance(exc, StatusError) else str(exc)
            return Status.error(f"binding volumes: {message}")
        finally:
            for claim in plan.claims:
                self._written.pop(claim_key(claim), None)
        log.info(
            "pod %s: claim(s) %s bound for node %s",
            pod.key, ", ".join(_meta(c).get("name") or "" for c in plan.claims), node,
        )  # fmt: skip
        return None

    async def _prebind(self, claim: Obj, pv: Obj) -> None:
        """Point the volume at the claim (``claimRef``), unless it already is; CAS on its RV."""
        assert self.client is not None
        current = self.volumes.volume(_meta(pv).get("name") or "") or pv
        if is_bound_to(current, claim):
            return
        body = copy.deepcopy(dict(current))
        meta = _meta(claim)
        body["spec"]["claimRef"] = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "namespace": meta.get("namespace"),
            "name": meta.get("name"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        }
        annotations = body["metadata"].setdefault("annotations", {})
        annotations[BOUND_BY_CONTROLLER_ANNOTATION] = "yes"
        log.info("pre-binding volume %s to claim %s", body["metadata"]["name"], claim_key(claim))
        await self.client.update(PVS, body)

    async def _select_node(self, claim: Obj, node: str) -> None:
        """Annotate the claim with ``node`` for the provisioner (a merge PATCH; idempotent)."""
        assert self.client is not None
        meta = _meta(claim)
        key = claim_key(claim)
        current = self.volumes.claim(meta.get("namespace") or "default", meta.get("name") or "")
        annotations = _meta(current or claim).get("annotations") or {}
        if annotations.get(SELECTED_NODE_ANNOTATION) == node:
            return
        log.info("claim %s: selected node %s", key, node)
        patch = {"metadata": {"annotations": {SELECTED_NODE_ANNOTATION: node}}}
        answer = await self.client.patch(
            PVCS, meta.get("name") or "", patch, namespace=meta.get("namespace") or "default"
        )
        self._written[key] = int(_meta(answer).get("resourceVersion") or 0)

    def _all_bound(self, plan: _NodePlan, node: str) -> bool:
        """True once every claim is bound to a volume admitting ``node``; BindingFailed if it
        never will be (kube-scheduler's ``checkBindings``).

        A claim to provision that lacks the annotation has had it *taken away* (the provisioner
        cannot serve the node) only if the cache has caught up with our own write: resource
        versions are the store's revision numbers, compared as kube-scheduler's assume cache
        compares them."""
        provision = {claim_key(c) for c in plan.provision}
        for claim in plan.claims:
            meta = _meta(claim)
            key = claim_key(claim)
            current = self.volumes.claim(meta.get("namespace") or "default", meta.get("name") or "")
            if current is None:
                raise BindingFailed(f'persistentvolumeclaim "{key}" was deleted')
            if not _is_bound(current):
                annotations = _meta(current).get("annotations") or {}
                seen = int(_meta(current).get("resourceVersion") or 0)
                if (
                    key in provision
                    and seen >= self._written.get(key, 0)
                    and annotations.get(SELECTED_NODE_ANNOTATION) != node
                ):
                    raise BindingFailed(f"selected node annotation reset for claim {key}")
                return False
            volume_name = _spec(current).get("volumeName") or ""
            pv = self.volumes.volume(volume_name)
            if pv is None:
                return False  # the volume's watch has not caught up with the claim's
            if not volume_admits(pv, node, plan.labels):
                raise BindingFailed(
                    f'persistentvolume "{volume_name}" node affinity does not match node "{node}"'
                )
        return True
