"""One StatefulSet's reconcile: revisions, ordered pod management, rolling update, status.

Why a module of its own: this is the heart of Kubernetes' ``defaultStatefulSetControl``
(``pkg/controller/statefulset/stateful_set_control.go``), the part that makes a StatefulSet
different from a ReplicaSet. Given the set, the pods it controls and its ControllerRevisions
(claimed by the controller), ``update()`` runs one round:

1. **Revisions.** The set's template as a revision (``controller_history.template_patch``):
   equal to the newest revision → that is the *update* revision; equal to an older one (a
   rollback) → that one is renumbered newest; else a new one is created (its name may take a
   ``collisionCount``). The *current* revision is the one ``status.currentRevision`` names,
   or the update revision for a new set.
2. **Partition the pods.** Ordinals in ``[start, start + replicas)`` are *replicas*, slots
   with no pod are filled with pods to create (at the current revision below the partition,
   the update revision from it on); other ordinals are *condemned*, highest first.
3. **Establish the invariant** — every replica exists, is Running and Ready and available,
   and has its identity and claims; nothing condemned is left. ``OrderedReady``
   (*monotonic*) handles one pod at a time in ordinal order and stops at the first that is
   not there yet: a failed or succeeded pod is deleted (and recreated on a later round once
   gone), a missing one created, a terminating, unready or not yet available one waited for;
   then condemned pods are deleted one at a time, highest ordinal first, each only once the
   previous is gone and the rest are healthy. ``Parallel`` does the same work for all pods
   at once (in slow-start batches of 1, 2, 4, ...) without waiting.
4. **Roll.** With ``RollingUpdate``, once the invariant holds: delete up to
   ``maxUnavailable`` (default 1; a percentage rounds down, never below 1) pods not at the
   update revision, highest ordinal first, never below ``partition``, and only while no more
   than ``maxUnavailable`` are unavailable; each comes back at the update revision in step 3
   of a later round. ``OnDelete`` only replaces pods the user deletes.
5. **Status** — replicas, readyReplicas, availableReplicas, currentReplicas,
   updatedReplicas, the two revisions, collisionCount, observedGeneration — is written even
   when the round failed; a RollingUpdate whose pods are all updated and ready makes the
   update revision current. Then revisions beyond ``revisionHistoryLimit`` that neither the
   status nor any pod names are deleted, oldest first.

Limits: a round decides from informer caches; our own writes not yet seen come back as
AlreadyExists/NotFound and the round is retried. Claim templates changed after creation are
not applied to existing claims (Kubernetes forbids changing them). No ``Available``
conditions are written (Kubernetes writes none either).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from api.errors import StatusError
from client.rest import ApiClient
from services.controller_manager.controller_history import (
    ControllerHistory,
    equal_revision,
    find_equal_revisions,
    max_revision,
    new_revision,
    sort_by_revision,
    template_patch,
)
from services.controller_manager.replication import slow_start_batch
from services.controller_manager.retry_on_conflict import update_with_retry
from services.controller_manager.statefulset_pod_control import ClaimError, StatefulPodControl
from services.controller_manager.statefulset_pods import (
    STATEFULSETS,
    apply_revision,
    end_ordinal,
    identity_matches,
    in_ordinal_range,
    is_created,
    is_terminating,
    is_unavailable,
    new_versioned_pod,
    ordinal_of,
    phase_of,
    revision_of,
    running_and_available,
    running_and_ready,
    start_ordinal,
    storage_matches,
)

__all__ = ["StatefulSetControl", "max_unavailable"]

log = logging.getLogger("services.controller_manager.statefulset")

Obj = dict[str, Any]

ROUND_ERRORS = (ConnectionError, StatusError, ClaimError)
"""What a failed write raises: the round still writes status, then the key is retried."""


def max_unavailable(sts: Obj) -> int:
    """``rollingUpdate.maxUnavailable`` of the replicas (default 1; a percentage rounds down;
    at least 1, as Kubernetes has it)."""
    spec = sts.get("spec") or {}
    value = ((spec.get("updateStrategy") or {}).get("rollingUpdate") or {}).get("maxUnavailable")
    replicas = int(spec.get("replicas", 1))
    if value is None:
        count = 1
    elif isinstance(value, str) and value.strip().endswith("%"):
        count = int(float(value.strip()[:-1]) * replicas // 100)
    else:
        count = int(value)
    return max(count, 1)


def _sts_name(sts: Obj) -> str:
    meta = sts["metadata"]
    return f"{meta.get('namespace')}/{meta['name']}"


@dataclass
class _Round:
    """What one round of one set works on (Kubernetes' locals of ``updateStatefulSet``)."""

    sts: Obj
    update_set: Obj
    current_revision: str
    update_revision: str
    monotonic: bool
    min_ready: int
    replicas: list[Obj]
    condemned: list[Obj]
    first_unhealthy: Obj | None = None
    counts: dict[str, int] = field(default_factory=dict)

    def count(self, *pod_lists: list[Obj]) -> None:
        """Recount the status's replica fields from the pods (default: replicas and
        condemned)."""
        lists = pod_lists or (self.replicas, self.condemned)
        counts = dict.fromkeys(
            (
                "replicas",
                "readyReplicas",
                "availableReplicas",
                "currentReplicas",
                "updatedReplicas",
            ),
            0,
        )
        for pods in lists:
            for pod in pods:
                created = is_created(pod)
                counts["replicas"] += created
                if running_and_ready(pod):
                    counts["readyReplicas"] += 1
                    if running_and_available(pod, self.min_ready):
                        counts["availableReplicas"] += 1
                if created and not is_terminating(pod):
                    revision = revision_of(pod)
                    counts["currentReplicas"] += revision == self.current_revision
                    counts["updatedReplicas"] += revision == self.update_revision
        self.counts = counts


class StatefulSetControl:
    def __init__(
        self, *, client: ApiClient, pods: StatefulPodControl, history: ControllerHistory
    ) -> None:
        self.client = client
        self.pods = pods
        self.history = history

    async def update(self, sts: Obj, pods: list[Obj], revisions: list[Obj]) -> Obj:
        """One round for ``sts`` over the pods and revisions it controls; the status written
        (or found current). Raises what made the round stop, after writing status."""
        revisions = sort_by_revision(revisions)
        current, update, collision_count = await self._revisions(sts, revisions)
        rnd = self._plan(sts, pods, current=current, update=update)
        rnd.count(pods)
        error: BaseException | None = None
        try:
            await self._converge(rnd)
        except ROUND_ERRORS as exc:
            error = exc
        status = self._status(rnd, collision_count)
        try:
            await self._write_status(sts, status)
        finally:
            live = {current["metadata"]["name"], update["metadata"]["name"]}
            live |= {revision_of(p) for p in pods}
            limit = int((sts.get("spec") or {}).get("revisionHistoryLimit", 10))
            await self.history.truncate(revisions, limit=limit, live=live)
        if error is not None:
            raise error
        return status

    # -- revisions ------------------------------------------------------------------------

    async def _revisions(self, sts: Obj, revisions: list[Obj]) -> tuple[Obj, Obj, int]:
        """(current, update, collisionCount); may create or renumber a revision."""
        status = sts.get("status") or {}
        collision_count = int(status.get("collisionCount") or 0)
        number = max_revision(revisions) + 1
        candidate = new_revision(
            sts, STATEFULSETS, data=template_patch(sts), revision=number,
            collision_count=collision_count,
        )  # fmt: skip
        equal = find_equal_revisions(revisions, candidate)
        if equal and equal_revision(revisions[-1], equal[-1]):
            update = revisions[-1]  # the template has not changed
        elif equal:
            # back to an earlier template (a rollback): that revision becomes the newest
            update = await self.history.update_revision(equal[-1], number)
            log.info("StatefulSet %s: template back to revision %s, now revision %d",
                     _sts_name(sts), update["metadata"]["name"], number)  # fmt: skip
        else:
            update, collision_count = await self.history.create(
                sts, candidate, collision_count=collision_count
            )
            log.info("StatefulSet %s: new revision %s (%d)", _sts_name(sts),
                     update["metadata"]["name"], number)  # fmt: skip
        current_name = status.get("currentRevision")
        current = next((r for r in revisions if r["metadata"]["name"] == current_name), update)
        return current, update, collision_count

    # -- planning -------------------------------------------------------------------------

    def _plan(self, sts: Obj, pods: list[Obj], *, current: Obj, update: Obj) -> _Round:
        spec = sts.get("spec") or {}
        current_set, update_set = apply_revision(sts, current), apply_revision(sts, update)
        current_name, update_name = current["metadata"]["name"], update["metadata"]["name"]
        start = start_ordinal(sts)
        slots: dict[int, Obj] = {}
        condemned: list[Obj] = []
        for pod in pods:
            ordinal = ordinal_of(pod)
            if in_ordinal_range(pod, sts):
                slots[ordinal] = pod
            elif ordinal >= 0:
                condemned.append(pod)
        replicas = []
        for ordinal in range(start, end_ordinal(sts) + 1):
            pod = slots.get(ordinal) or new_versioned_pod(
                current_set=current_set, update_set=update_set,
                current_revision=current_name, update_revision=update_name, ordinal=ordinal,
            )  # fmt: skip
            replicas.append(pod)
        condemned.sort(key=ordinal_of, reverse=True)
        min_ready = int(spec.get("minReadySeconds") or 0)
        rnd = _Round(
            sts=sts,
            update_set=update_set,
            current_revision=current_name,
            update_revision=update_name,
            monotonic=spec.get("podManagementPolicy") != "Parallel",
            min_ready=min_ready,
            replicas=replicas,
            condemned=condemned,
        )
        unhealthy = [p for p in [*replicas, *reversed(condemned)] if is_unavailable(p, min_ready)]
        rnd.first_unhealthy = unhealthy[0] if unhealthy else None
        if unhealthy:
            log.debug("StatefulSet %s has %d unavailable pod(s), first %s", _sts_name(sts),
                      len(unhealthy), unhealthy[0]["metadata"]["name"])  # fmt: skip
        return rnd

    # -- converging -----------------------------------------------------------------------

    async def _converge(self, rnd: _Round) -> None:
        if is_terminating(rnd.sts):
            return  # a set being deleted only gets its status updated
        try:
            blocked = await self._establish(rnd)
        finally:
            rnd.count()
        strategy = ((rnd.sts.get("spec") or {}).get("updateStrategy") or {}).get("type")
        if blocked or strategy == "OnDelete":
            return
        await self._roll(rnd)

    async def _run_for_all(
        self, rnd: _Round, pods: list[Obj], step: Callable[[_Round, Obj], Awaitable[bool]]
    ) -> bool:
        """Apply ``step`` to each pod: in order, stopping at the first that says stop
        (monotonic); or all of them in slow-start batches (burst). Whether to stop."""
        if rnd.monotonic:
            for pod in pods:
                if await step(rnd, pod):
                    return True
            return False
        # slow_start_batch calls fn() once per pod, in order: each call takes the next pod
        queue = iter(pods)
        _, error = await slow_start_batch(len(pods), initial=1, fn=lambda: step(rnd, next(queue)))
        if error is not None:
            raise error
        return False

    async def _establish(self, rnd: _Round) -> bool:
        """Steps 3 of the module docstring; whether the round must stop here."""
        return (
            await self._run_for_all(rnd, rnd.replicas, self._process_replica)
            or await self._run_for_all(rnd, rnd.condemned, self._fix_condemned_claims)
            or await self._run_for_all(rnd, rnd.condemned, self._process_condemned)
        )

    async def _process_replica(self, rnd: _Round, pod: Obj) -> bool:
        sts, name = rnd.sts, pod["metadata"]["name"]
        if phase_of(pod) in ("Failed", "Succeeded"):
            if not is_terminating(pod):
                log.info("StatefulSet %s: pod %s is %s; deleting it to recreate it",
                         _sts_name(sts), name, phase_of(pod))  # fmt: skip
                await self.pods.delete_pod(sts, pod)
            return True  # its successor comes once it is gone
        if not is_created(pod):
            if self.pods.claim_is_stale(sts, pod):
                log.info("StatefulSet %s: a claim of %s still belongs to its predecessor; "
                         "waiting for it to be deleted", _sts_name(sts), name)  # fmt: skip
                return True
            await self.pods.create_pod(sts, pod)
            if rnd.monotonic:
                return True
        if phase_of(pod) == "Pending":
            await self.pods.create_missing_claims(sts, pod)
        if rnd.monotonic and (
            is_terminating(pod)
            or not running_and_ready(pod)
            or not running_and_available(pod, rnd.min_ready)
        ):
            return True  # wait: its successors start once it is running, ready, available
        if not is_created(pod):
            return False
        retained = self.pods.claims_match_retention(rnd.update_set, pod)
        if identity_matches(sts, pod) and storage_matches(sts, pod) and retained:
            return False
        await self.pods.update_pod(rnd.update_set, pod)
        return False

    async def _fix_condemned_claims(self, rnd: _Round, pod: Obj) -> bool:
        if not self.pods.claims_match_retention(rnd.update_set, pod):
            await self.pods.update_claims_for_retention(rnd.update_set, pod)
        return False

    async def _process_condemned(self, rnd: _Round, pod: Obj) -> bool:
        if is_terminating(pod):
            return rnd.monotonic  # in order: wait for it to be gone first
        healthy = running_and_ready(pod) and running_and_available(pod, rnd.min_ready)
        if rnd.monotonic and not healthy and pod is not rnd.first_unhealthy:
            return True
        log.info("StatefulSet %s: deleting pod %s for scale down", _sts_name(rnd.sts),
                 pod["metadata"]["name"])  # fmt: skip
        await self.pods.delete_pod(rnd.sts, pod)
        return True

    async def _roll(self, rnd: _Round) -> None:
        """Step 4: replace pods not at the update revision, highest ordinal first."""
        sts = rnd.sts
        rolling = ((sts.get("spec") or {}).get("updateStrategy") or {}).get("rollingUpdate") or {}
        partition = int(rolling.get("partition") or 0)
        budget = max_unavailable(sts)
        unavailable = sum(1 for p in rnd.replicas if is_unavailable(p, rnd.min_ready))
        if unavailable > budget:
            log.debug("StatefulSet %s: %d unavailable pods, more than maxUnavailable %d",
                      _sts_name(sts), unavailable, budget)  # fmt: skip
            return
        to_delete = budget - unavailable
        for pod in reversed(rnd.replicas[partition:]):
            if to_delete <= 0:
                break
            if revision_of(pod) == rnd.update_revision or is_terminating(pod):
                continue
            log.info("StatefulSet %s: deleting pod %s to update it to revision %s",
                     _sts_name(sts), pod["metadata"]["name"], rnd.update_revision)  # fmt: skip
            await self.pods.delete_pod(sts, pod)
            to_delete -= 1
            rnd.counts["currentReplicas"] -= 1

    # -- status ---------------------------------------------------------------------------

    def _status(self, rnd: _Round, collision_count: int) -> Obj:
        counts = dict(rnd.counts)
        current_revision = rnd.current_revision
        strategy = ((rnd.sts.get("spec") or {}).get("updateStrategy") or {}).get("type")
        if (
            strategy == "RollingUpdate"
            and counts["updatedReplicas"] == counts["replicas"]
            and counts["readyReplicas"] == counts["replicas"]
        ):
            # the rolling update is complete: the update revision is now current
            counts["currentReplicas"] = counts["updatedReplicas"]
            current_revision = rnd.update_revision
        status: Obj = {"replicas": counts["replicas"]}
        generation = rnd.sts["metadata"].get("generation")
        if generation:
            status["observedGeneration"] = generation
        for key in ("readyReplicas", "currentReplicas", "updatedReplicas"):
            if counts[key]:
                status[key] = counts[key]  # omitempty, as Kubernetes writes them
        status["currentRevision"] = current_revision
        status["updateRevision"] = rnd.update_revision
        status["collisionCount"] = collision_count
        status["availableReplicas"] = counts["availableReplicas"]
        return status

    async def _write_status(self, sts: Obj, status: Obj) -> None:
        if _normal(sts.get("status") or {}) == _normal(status):
            return
        uid = sts["metadata"].get("uid")

        def set_status(fresh: Obj) -> bool:
            if fresh["metadata"].get("uid") != uid or _normal(fresh.get("status") or {}) == _normal(
                status
            ):
                return False
            fresh["status"] = copy.deepcopy(status)
            return True

        await update_with_retry(
            self.client, STATEFULSETS, namespace=sts["metadata"].get("namespace"),
            name=sts["metadata"]["name"], mutate=set_status, subresource="status",
        )  # fmt: skip


def _normal(status: Obj) -> Obj:
    """A status without its zero and empty fields (how Go's omitempty compares)."""
    return {k: v for k, v in status.items() if v not in (None, 0, "", [], {})}
