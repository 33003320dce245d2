"""The disruption controller: keeps every PodDisruptionBudget's ``status`` true to its pods.

Why: ``kubectl drain`` (and anything else that evicts) asks the apiserver's ``pods/eviction``,
which grants an eviction only while the budget's ``status.disruptionsAllowed`` is above zero
and the status has observed the budget's generation. Someone has to keep that status current
as pods come, go, turn ready or unready and controllers scale: kube-controller-manager's
``disruption`` controller (``pkg/controller/disruption``). This is it:

* **Keys.** A work queue of budget keys (``namespace/name``). A budget's add, update or delete
  enqueues it; a pod's add, update or delete enqueues every budget in its namespace whose
  selector matches its labels (old or new: a relabelled pod leaves one budget for another);
  a ReplicationController, ReplicaSet, Deployment or StatefulSet that appears, goes or changes
  ``spec.replicas`` enqueues the budgets of its namespace (their expected count may hang on it;
  Kubernetes waits for the pods to change instead).
* **Sync** (level-triggered, from the caches; ``disruption_budget`` holds the arithmetic):
  select the pods (a ``null`` selector selects none, ``{}`` all), compute expected and desired
  healthy pods, keep the ``disruptedPods`` entries still pending, count the healthy pods, and
  write the status through ``poddisruptionbudgets/{name}/status`` when it differs. The write
  carries the cached ``resourceVersion``: a concurrent eviction (which spends a disruption in
  that same status) makes it a 409, and the key is retried with backoff from a fresher cache —
  never a blind overwrite of a granted eviction. A pending ``disruptedPods`` entry makes the
  sync ask to be run again when the earliest one expires.
* **Fail safe.** When the expected count cannot be computed (a controller that is not found,
  a kind without ``scale``, an invalid selector) the status is written with
  ``disruptionsAllowed: 0`` and ``DisruptionAllowed`` False / ``SyncFailed`` with the error, so
  no eviction is granted on a guess.

Events (source ``controllermanager``, as Kubernetes'): on the budget ``NoPods`` "No matching
pods found", ``UnmanagedPods``, ``CalculateExpectedPodCountFailed`` "Failed to calculate the
number of expected pods: ..."; on a pod ``NotDeleted`` (an eviction's entry expired and the pod
is still there) and ``MultiplePodDisruptionBudgets``.

Limits: the stale ``DisruptionTarget`` pod condition cleanup Kubernetes also does here is not
done; a failed status write (other than a conflict) is retried with backoff rather than
followed by a fail-safe write; the ``UnmanagedPods`` message prints the selector in kubectl's
``key=value`` form where Kubernetes prints a Go struct.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from api.errors import BadRequest
from api.registry import REGISTRY
from api.selectors import LabelSelector, label_selector_from_dict
from client.cache import NAMESPACE_INDEX, object_key
from client.controller import Controller
from client.events import EventRecorder
from client.rest import ApiClient
from client.workqueue import WorkQueue
from services.controller_manager.controller_ref import labels_of
from services.controller_manager.disruption_budget import (
    DEPLOYMENTS,
    RCS,
    RSS,
    STATEFULSETS,
    ControllerScales,
    ExpectedPodsError,
    count_healthy,
    disrupted_pods,
    expected_pods,
    fail_safe_status,
    new_status,
)
from services.controller_manager.informers import SharedInformers

__all__ = ["PDBS", "DisruptionController"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Clock = Callable[[], datetime]

PODS = REGISTRY.require("", "Pod")
PDBS = REGISTRY.require("policy", "PodDisruptionBudget")

UNMANAGED_PODS = (
    "Pods selected by this PodDisruptionBudget (selector: {}) were found to be unmanaged. As a "
    "result, the status of the PDB cannot be calculated correctly, which may result in undefined "
    'behavior. To account for these pods please set ".spec.minAvailable" field of the PDB to an '
    "integer value."
)


def _wall_clock() -> datetime:
    return datetime.now(UTC)


def _selector(budget: Obj) -> LabelSelector:
    """The budget's selector; ``BadRequest`` when it is invalid."""
    return label_selector_from_dict((budget.get("spec") or {}).get("selector"))


def _namespace(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


class DisruptionController:
    """``await run()`` until cancelled; ``sync(key)`` converges one budget's status."""

    def __init__(
        self,
        *,
        client: ApiClient,
        informers: SharedInformers,
        recorder: EventRecorder,
        clock: Clock = _wall_clock,
        workers: int = 1,
    ) -> None:
        self.name = "disruption"
        self.client = client
        self.recorder = recorder
        self.clock = clock
        self.workers = workers
        self.pods = informers.get(PODS)
        self.budgets = informers.get(PDBS)
        owners = {rt.kind: informers.get(rt) for rt in (RCS, RSS, DEPLOYMENTS, STATEFULSETS)}
        self.scales = ControllerScales(
            rcs=owners[RCS.kind],
            replicasets=owners[RSS.kind],
            deployments=owners[DEPLOYMENTS.kind],
            statefulsets=owners[STATEFULSETS.kind],
        )
        self.caches = [self.pods, self.budgets, *owners.values()]
        self.queue: WorkQueue[str] = WorkQueue(name="disruption")
        self.budgets.add_handler(on_change=self._enqueue)
        self.pods.add_handler(
            on_add=self._pod_changed,
            on_update=self._pod_updated,
            on_delete=self._pod_changed,
        )
        for informer in owners.values():
            informer.add_handler(
                on_add=self._owner_changed,
                on_update=self._owner_updated,
                on_delete=self._owner_changed,
            )

    async def run(self) -> None:
        await Controller(
            name=self.name,
            queue=self.queue,
            reconcile=self.sync,
            workers=self.workers,
            wait_for=self.caches,
        ).run()

    # -- event handlers: events -> budget keys --------------------------------------------

    def _enqueue(self, budget: Obj) -> None:
        self.queue.add(object_key(budget))

    def _budgets_of(self, pod: Obj) -> list[Obj]:
        """The budgets in the pod's namespace whose (valid) selector matches its labels."""
        labels = labels_of(pod)
        found = []
        for budget in self.budgets.by_index(NAMESPACE_INDEX, _namespace(pod)):
            try:
                if _selector(budget).matches(labels):
                    found.append(budget)
            except BadRequest:
                continue  # an invalid selector matches no pod; its own sync says why
        return found

    def _pod_changed(self, pod: Obj) -> None:
        budgets = self._budgets_of(pod)
        for budget in budgets:
            self._enqueue(budget)
        if len(budgets) > 1 and not (pod.get("metadata") or {}).get("deletionTimestamp"):
            names = sorted(str(b["metadata"]["name"]) for b in budgets)
            self.recorder.event(
                pod,
                "Warning",
                "MultiplePodDisruptionBudgets",
                f'Pod "{_namespace(pod)}"/"{pod["metadata"]["name"]}" matches multiple '
                f'PodDisruptionBudgets.  Chose "{names[0]}" arbitrarily.',
            )

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        if labels_of(old) != labels_of(new):
            for budget in self._budgets_of(old):
                self._enqueue(budget)
        self._pod_changed(new)

    def _owner_changed(self, owner: Obj) -> None:
        for budget in self.budgets.by_index(NAMESPACE_INDEX, _namespace(owner)):
            self._enqueue(budget)

    def _owner_updated(self, old: Obj, new: Obj) -> None:
        if (old.get("spec") or {}).get("replicas") != (new.get("spec") or {}).get("replicas"):
            self._owner_changed(new)

    # -- sync -----------------------------------------------------------------------------

    async def sync(self, key: str) -> float | None:
        """Converge the status of budget ``key``; seconds until a disruption entry expires."""
        budget = self.budgets.get(key)
        if budget is None:
            return None  # deleted: nothing to keep
        try:
            pods = self._selected_pods(budget)
        except BadRequest as exc:
            self.recorder.event(budget, "Warning", "NoPods", f"Failed to get pods: {exc}")
            await self._fail_safe(budget, str(exc))
            return None
        if not pods:
            self.recorder.event(budget, "Normal", "NoPods", "No matching pods found")
        try:
            expected = expected_pods(budget, pods, scales=self.scales)
        except ExpectedPodsError as exc:
            self.recorder.event(
                budget,
                "Warning",
                "CalculateExpectedPodCountFailed",
                f"Failed to calculate the number of expected pods: {exc}",
            )
            await self._fail_safe(budget, str(exc))
            return None
        if expected.unmanaged:
            log.debug("budget %s selects unmanaged pods %s", key, ", ".join(expected.unmanaged))
            self.recorder.event(
                budget, "Warning", "UnmanagedPods", UNMANAGED_PODS.format(_selector(budget))
            )
        now = self.clock()
        disrupted = disrupted_pods(budget, pods, now=now)
        for pod in disrupted.overdue:
            log.info(
                "pod %s/%s was expected to be deleted but it wasn't; updating budget %s",
                _namespace(pod), pod["metadata"]["name"], key,
            )  # fmt: skip
            self.recorder.event(
                pod,
                "Warning",
                "NotDeleted",
                f"Pod was expected by PDB {key} to be deleted but it wasn't",
            )
        status = new_status(
            budget,
            expected=expected,
            current_healthy=count_healthy(pods, disrupted.pods, now=now),
            disrupted=disrupted.pods,
            now=now,
        )
        if status is not None:
            await self._write_status(budget, status)
        if disrupted.recheck_at is None:
            return None
        return max(0.0, (disrupted.recheck_at - now).total_seconds())

    def _selected_pods(self, budget: Obj) -> list[Obj]:
        selector = _selector(budget)
        return [
            pod
            for pod in self.pods.by_index(NAMESPACE_INDEX, _namespace(budget))
            if selector.matches(labels_of(pod))
        ]

    async def _fail_safe(self, budget: Obj, message: str) -> None:
        status = fail_safe_status(budget, message=message, now=self.clock())
        if status == budget.get("status"):
            return  # already written: an unchanged write would only wake this budget again
        log.warning("budget %s: %s; allowing no disruptions", object_key(budget), message)
        await self._write_status(budget, status)

    async def _write_status(self, budget: Obj, status: Obj) -> None:
        """PUT the status with the cached resourceVersion; a Conflict propagates (retry)."""
        body = copy.deepcopy(budget)
        body["status"] = status
        await self.client.update(PDBS, body, subresource="status")
        log.debug(
            "budget %s: %d of %d healthy (%d desired), %d disruption(s) allowed",
            object_key(budget), status.get("currentHealthy"), status.get("expectedPods"),
            status.get("desiredHealthy"), status.get("disruptionsAllowed"),
        )  # fmt: skip
