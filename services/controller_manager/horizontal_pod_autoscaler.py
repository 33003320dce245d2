"""The horizontal-pod-autoscaling controller: keeps a workload's replicas where its metrics say.

Why: an autoscaling/v2 HorizontalPodAutoscaler names a scalable target (a Deployment,
ReplicaSet, StatefulSet or ReplicationController) and the CPU or memory per pod to hold it
at. Kubernetes' ``podautoscaler`` controller, followed here, every ``sync_period`` (15 s, on the
injectable ``Clock``) for each autoscaler:

1. reads the target's ``/scale`` (``AbleToScale`` False, ``FailedGetScale``, when it cannot);
2. a target at zero replicas is left alone (``ScalingActive`` False, ``ScalingDisabled``); one
   outside ``minReplicas``..``maxReplicas`` is brought inside;
3. otherwise each metric asks for a replica count (``replica_calculator``) from the pods its
   ``status.selector`` selects and their ``metrics.k8s.io`` PodMetrics — read through the
   apiserver, as Kubernetes' controller reads metrics-server — and the largest wins
   (``ScalingActive`` True, ``ValidMetricFound``; a metric that cannot be read is a
   ``FailedGetResourceMetric`` event, and if none can, or a failed one could veto a scale-down,
   nothing is changed: ``FailedComputeMetricsReplicas``);
4. that recommendation is stabilised and rate-limited (``hpa_behavior``: ``AbleToScale`` and
   ``ScalingLimited`` say how);
5. a new size is written to ``/scale`` (a ``SuccessfulRescale`` event, "New size: 4; reason:
   cpu resource utilization (percentage of request) above target"), and the status —
   ``currentReplicas``, ``desiredReplicas``, ``currentMetrics``, ``lastScaleTime``, the
   conditions — is written when it changed.

As in Kubernetes an autoscaler is first looked at one sync period after it appears (every
change to it is folded into the next periodic sync), so its own status writes never make it
spin.

Limits: ``Resource`` and ``ContainerResource`` metrics only (``Utilization`` and
``AverageValue`` targets); ``Pods``, ``Object`` and ``External`` metrics are reported as
invalid (kubelite has no custom-metrics API). Targets are the built-in scalable kinds.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any

from api.errors import StatusError
from api.meta import format_time, parse_time
from api.quantity import format_quantity, parse_quantity
from api.registry import REGISTRY, ResourceType
from api.selectors import parse_label_selector
from client.cache import NAMESPACE_INDEX, object_key
from client.controller import Controller
from client.events import EventRecorder
from client.rest import ApiClient
from client.workqueue import WorkQueue
from component.flags import parse_duration
from services.controller_manager.clock import Clock, SystemClock
from services.controller_manager.hpa_behavior import (
    DOWNSCALE_WINDOW,
    Decision,
    Normalizer,
    Proposal,
)
from services.controller_manager.informers import SharedInformers
from services.controller_manager.replica_calculator import (
    TOLERANCE,
    MetricsError,
    PodMetric,
    Replicas,
    resource_replicas,
)

__all__ = ["SYNC_PERIOD", "HorizontalPodAutoscalerController"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

SYNC_PERIOD = 15.0
"""``--horizontal-pod-autoscaler-sync-period``: seconds between two looks at one autoscaler."""
HPAS = REGISTRY.require("autoscaling", "HorizontalPodAutoscaler")
PODS = REGISTRY.require("", "Pod")
METRICS_PATH = "/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods"


class _Unscalable(Exception):
    """The metrics give no replica count: ``reason`` and ``message`` for ``ScalingActive``."""

    def __init__(self, reason: str, message: str, *, event: str, said: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.event = event
        self.said = message if said is None else said
        """The event's message."""


@dataclass(frozen=True, slots=True)
class _Answer:
    replicas: int
    metric: str
    """What asked for it, as Kubernetes names it in events and conditions."""
    statuses: list[Obj]


def _target_type(ref: Mapping[str, Any]) -> ResourceType | None:
    rt = REGISTRY.by_api_version(str(ref.get("apiVersion") or ""), str(ref.get("kind") or ""))
    if rt is None or not any(s.name == "scale" for s in rt.subresources):
        return None
    return rt


def _set_condition(
    status: Obj, kind: str, value: bool, reason: str, message: str, now: str
) -> None:
    """Kubernetes' ``setCondition``: the transition time moves only when the status does."""
    conditions: list[Obj] = status.setdefault("conditions", [])
    wanted = "True" if value else "False"
    existing = next((c for c in conditions if c.get("type") == kind), None)
    if existing is None:
        existing = {"type": kind}
        conditions.append(existing)
    if existing.get("status") != wanted:
        existing["lastTransitionTime"] = now
    existing.update(status=wanted, reason=reason, message=message)


class HorizontalPodAutoscalerController:
    """``await run()`` until cancelled."""

    name = "horizontalpodautoscaling"

    def __init__(
        self,
        *,
        client: ApiClient,
        informers: SharedInformers,
        recorder: EventRecorder,
        clock: Clock | None = None,
        sync_period: float = SYNC_PERIOD,
        tolerance: float = TOLERANCE,
        downscale_window: timedelta = DOWNSCALE_WINDOW,
        workers: int = 5,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.clock = clock or SystemClock()
        self.sync_period = sync_period
        self.tolerance = tolerance
        self.workers = workers
        self.normalizer = Normalizer(downscale_window=downscale_window)
        self.hpas = informers.get(HPAS)
        self.pods = informers.get(PODS)
        self.queue: WorkQueue[str] = WorkQueue(name="horizontalpodautoscaler")
        self._scheduled: set[str] = set()
        self.hpas.add_handler(
            on_add=lambda hpa: self._schedule(object_key(hpa)),
            on_update=lambda _old, new: self._schedule(object_key(new)),
        )

    async def run(self) -> None:
        await Controller(
            name=self.name,
            queue=self.queue,
            reconcile=self.sync,
            workers=self.workers,
            wait_for=[self.hpas, self.pods],
        ).run()

    def _schedule(self, key: str) -> None:
        """Look at ``key`` one sync period from now, unless a look is already due."""
        if key in self._scheduled:
            return
        self._scheduled.add(key)

        def due() -> None:
            self._scheduled.discard(key)
            self.queue.add(key)

        self.clock.call_later(self.sync_period, due)

    async def sync(self, key: str) -> None:
        hpa = self.hpas.get(key)
        if hpa is None:
            self.normalizer.forget(key)
            return
        try:
            await self._reconcile(copy.deepcopy(hpa), key)
        except (StatusError, ConnectionError, TimeoutError) as exc:
            log.warning("autoscaler %s: %s; will look again in %.0fs", key, exc, self.sync_period)
        finally:
            self._schedule(key)

    # -- one look --------------------------------------------------------------------------

    async def _reconcile(self, hpa: Obj, key: str) -> None:
        now = self.clock.now()
        before = copy.deepcopy(hpa.get("status") or {})
        status: Obj = copy.deepcopy(before)
        found = await self._read_scale(hpa, status, now)
        if found is not None:
            target, scale = found
            current = int((scale.get("spec") or {}).get("replicas") or 0)
            self.normalizer.record_initial(key, current, now=now)
            status.update(
                currentReplicas=current, observedGeneration=hpa["metadata"].get("generation")
            )
            wanted = await self._recommend(hpa, key, scale, status, now)
            if wanted is not None:
                desired, reason = wanted
                status["desiredReplicas"] = desired
                if desired != current and await self._rescale(
                    hpa, target, scale, status, desired=desired, reason=reason
                ):
                    self.normalizer.record_scaling(
                        key, hpa["spec"].get("behavior"), before=current, after=desired, now=now
                    )
                    status["lastScaleTime"] = format_time(now)
        await self._write_status(hpa, before, status)

    async def _read_scale(
        self, hpa: Obj, status: Obj, now: datetime
    ) -> tuple[ResourceType, Obj] | None:
        """The target's kind and ``/scale``; None (and ``FailedGetScale``) when unreadable."""
        ref = hpa["spec"].get("scaleTargetRef") or {}
        target = _target_type(ref)
        try:
            if target is None:
                raise StatusError(
                    f'no matches for kind "{ref.get("kind")}" in group version '
                    f'"{ref.get("apiVersion")}" with a scale subresource'
                )
            scale = await self.client.get(
                target, str(ref.get("name")), namespace=hpa["metadata"]["namespace"],
                subresource="scale",
            )  # fmt: skip
        except StatusError as exc:
            _set_condition(
                status, "AbleToScale", False, "FailedGetScale",
                f"the HPA controller was unable to get the target's current scale: {exc}",
                format_time(now),
            )  # fmt: skip
            self.recorder.event(hpa, "Warning", "FailedGetScale", str(exc))
            return None
        _set_condition(
            status, "AbleToScale", True, "SucceededGetScale",
            "the HPA controller was able to get the target's current scale", format_time(now),
        )  # fmt: skip
        return target, scale

    async def _recommend(
        self, hpa: Obj, key: str, scale: Obj, status: Obj, now: datetime
    ) -> tuple[int, str] | None:
        """The replicas to set and why; None when the autoscaler must leave the target alone
        (scaling disabled, or no metric gives a count — its conditions say which)."""
        spec, stamp = hpa["spec"], format_time(now)
        current = int(status["currentReplicas"])
        minimum, maximum = int(spec.get("minReplicas") or 1), int(spec["maxReplicas"])
        if current == 0 and minimum != 0:
            _set_condition(
                status, "ScalingActive", False, "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero", stamp,
            )  # fmt: skip
            status["desiredReplicas"] = 0
            return None
        if current > maximum:
            return maximum, "Current number of replicas above Spec.MaxReplicas"
        if current < minimum:
            return minimum, "Current number of replicas below Spec.MinReplicas"
        try:
            proposal = await self._replicas_for_metrics(hpa, scale, current, now)
        except _Unscalable as failed:
            _set_condition(status, "ScalingActive", False, failed.reason, failed.message, stamp)
            self.recorder.event(hpa, "Warning", failed.event, failed.said)
            status["desiredReplicas"] = current
            return None
        status["currentMetrics"] = proposal.statuses or None
        _set_condition(
            status, "ScalingActive", True, "ValidMetricFound",
            f"the HPA was able to successfully calculate a replica count from {proposal.metric}",
            stamp,
        )  # fmt: skip
        decision = self._normalize(key, spec, current, proposal.replicas, now)
        _set_condition(
            status, "AbleToScale", True,
            decision.stabilized_reason, decision.stabilized_message, stamp,
        )  # fmt: skip
        _set_condition(
            status, "ScalingLimited", decision.limited,
            decision.limit_reason, decision.limit_message, stamp,
        )  # fmt: skip
        if decision.replicas > current:
            return decision.replicas, f"{proposal.metric} above target"
        return decision.replicas, "All metrics below target"

    def _normalize(
        self, key: str, spec: Obj, current: int, desired: int, now: datetime
    ) -> Decision:
        proposal = Proposal(
            current=current,
            desired=desired,
            minimum=int(spec.get("minReplicas") or 1),
            maximum=int(spec["maxReplicas"]),
        )
        behavior = spec.get("behavior")
        if behavior is None:
            return self.normalizer.normalize(key, proposal, now=now)
        return self.normalizer.normalize_with_behavior(key, proposal, behavior=behavior, now=now)

    async def _rescale(
        self, hpa: Obj, target: ResourceType, scale: Obj, status: Obj, *, desired: int, reason: str
    ) -> bool:
        """Write ``desired`` to the target's ``/scale``; whether it was taken (a refusal is a
        ``FailedRescale`` event and ``AbleToScale`` False, ``FailedUpdateScale``)."""
        stamp = format_time(self.clock.now())
        current = int((scale.get("spec") or {}).get("replicas") or 0)
        scale = copy.deepcopy(scale)
        scale.setdefault("spec", {})["replicas"] = desired
        try:
            await self.client.update(target, scale, subresource="scale")
        except StatusError as exc:
            _set_condition(
                status, "AbleToScale", False, "FailedUpdateScale",
                f"the HPA controller was unable to update the target scale: {exc}", stamp,
            )  # fmt: skip
            self.recorder.event(
                hpa, "Warning", "FailedRescale",
                f"New size: {desired}; reason: {reason}; error: {exc}",
            )  # fmt: skip
            return False
        _set_condition(
            status, "AbleToScale", True, "SucceededRescale",
            f"the HPA controller was able to update the target scale to {desired}", stamp,
        )  # fmt: skip
        self.recorder.event(
            hpa, "Normal", "SuccessfulRescale", f"New size: {desired}; reason: {reason}"
        )
        log.info(
            "autoscaler %s: %s %s scaled from %d to %d (%s)",
            object_key(hpa), target.kind, scale["metadata"]["name"], current, desired, reason,
        )  # fmt: skip
        return True

    async def _write_status(self, hpa: Obj, before: Obj, status: Obj) -> None:
        status = {k: v for k, v in status.items() if v is not None}
        if status == {k: v for k, v in before.items() if v is not None}:
            return
        hpa["status"] = status
        await self.client.update_status(HPAS, hpa)

    # -- metrics -----------------------------------------------------------------------------

    async def _replicas_for_metrics(
        self, hpa: Obj, scale: Obj, current: int, now: datetime
    ) -> _Answer:
        selector_text = str((scale.get("status") or {}).get("selector") or "")
        if not selector_text:
            raise _Unscalable(
                "InvalidSelector",
                "the HPA target's scale is missing a selector",
                event="SelectorRequired",
            )
        namespace = hpa["metadata"]["namespace"]
        selector = parse_label_selector(selector_text)
        pods = [
            p
            for p in self.pods.by_index(NAMESPACE_INDEX, namespace)
            if selector.matches((p.get("metadata") or {}).get("labels") or {})
        ]
        usage: list[Obj] | None = None
        best: _Answer | None = None
        statuses: list[Obj] = []
        failures: list[_Unscalable] = []
        specs = hpa["spec"].get("metrics") or []
        for metric in specs:
            kind = metric.get("type")
            if kind not in ("Resource", "ContainerResource"):
                problem = f"kubelite serves no {kind} metrics"
                failures.append(
                    _Unscalable(
                        "InvalidMetricSourceType",
                        f"the HPA was unable to compute the replica count: {problem}",
                        event=f"FailedGet{kind}Metric",
                        said=problem,
                    )
                )
                self.recorder.event(hpa, "Warning", f"FailedGet{kind}Metric", problem)
                continue
            if usage is None:
                usage = await self._pod_metrics(namespace, selector_text)
            try:
                proposal = self._resource_proposal(metric, pods, usage, current, now)
            except MetricsError as exc:
                failures.append(
                    _Unscalable(
                        "FailedGetResourceMetric",
                        f"the HPA was unable to compute the replica count: {exc}",
                        event="FailedGetResourceMetric",
                        said=str(exc),
                    )
                )
                self.recorder.event(hpa, "Warning", "FailedGetResourceMetric", str(exc))
                continue
            statuses += proposal.statuses
            if best is None or proposal.replicas > best.replicas:
                best = proposal
        if best is None or (failures and best.replicas < current):
            first = failures[0]
            raise _Unscalable(
                first.reason,
                first.message,
                event="FailedComputeMetricsReplicas",
                said=f"invalid metrics ({len(failures)} invalid out of {len(specs)}), "
                f"first error is: {first.said}",
            ) from None
        return _Answer(best.replicas, best.metric, statuses)

    async def _pod_metrics(self, namespace: str, selector: str) -> list[Obj]:
        try:
            answer = await self.client.request(
                "GET", METRICS_PATH.format(namespace=namespace), params={"labelSelector": selector}
            )
        except StatusError as exc:
            raise _Unscalable(
                "FailedGetResourceMetric",
                "the HPA was unable to compute the replica count: unable to get metrics: "
                f"unable to fetch metrics from resource metrics API: {exc}",
                event="FailedGetResourceMetric",
            ) from None
        return list((answer or {}).get("items") or [])

    def _resource_proposal(
        self, metric: Obj, pods: list[Obj], usage: list[Obj], current: int, now: datetime
    ) -> _Answer:
        container_metric = metric["type"] == "ContainerResource"
        key = "containerResource" if container_metric else "resource"
        source = metric.get(key) or {}
        name = str(source.get("name"))
        container = str(source.get("container")) if container_metric else None
        target = source.get("target") or {}
        values = _usage_of(usage, name, container)
        if not values:
            raise MetricsError(
                f"failed to get {name} utilization: unable to get metrics for resource {name}: "
                "no metrics returned from resource metrics API"
            )
        utilization = (
            target.get("averageUtilization") if target.get("type") == "Utilization" else None
        )
        average = (
            int(parse_quantity(target["averageValue"]) * 1000)
            if target.get("type") == "AverageValue" and target.get("averageValue") is not None
            else None
        )
        if utilization is None and average is None:
            raise MetricsError(f"invalid target for {name}: {target.get('type')!r}")
        found: Replicas = resource_replicas(
            current,
            pods=pods,
            metrics=values,
            resource=name,
            utilization=utilization,
            average_value=average,
            container=container,
            now=now,
            tolerance=self.tolerance,
        )
        measured: Obj = {"averageValue": format_quantity(Fraction(found.average_value, 1000))}
        if found.utilization is not None:
            measured["averageUtilization"] = found.utilization
        described: Obj = {"name": name, "current": measured}
        if container is not None:
            described["container"] = container
        what = f"{name} resource" + (f" of container {container!r}" if container else "")
        if utilization is not None:
            what = (
                f"{name} container resource utilization (percentage of request)"
                if container
                else f"{name} resource utilization (percentage of request)"
            )
        return _Answer(found.replicas, what, [{"type": metric["type"], key: described}])


def _usage_of(items: list[Obj], resource: str, container: str | None) -> dict[str, PodMetric]:
    """Each pod's usage of ``resource`` (of ``container`` only, if named), milli-units."""
    out: dict[str, PodMetric] = {}
    for item in items:
        containers = [
            c
            for c in item.get("containers") or []
            if container is None or c.get("name") == container
        ]
        if not containers or any(resource not in (c.get("usage") or {}) for c in containers):
            continue  # Kubernetes' metrics client leaves such a pod out: it is "missing"
        total = sum(int(parse_quantity(c["usage"][resource]) * 1000) for c in containers)
        out[str(item["metadata"]["name"])] = PodMetric(
            value=total,
            timestamp=parse_time(str(item.get("timestamp"))),
            window=timedelta(seconds=parse_duration(str(item.get("window") or "0s"))),
        )
    return out
