"""From what the metrics ask for to what the autoscaler sets: stabilisation and rate limits.

Why a module of its own: a HorizontalPodAutoscaler never applies a metric's recommendation
directly. Kubernetes' ``horizontal.go`` first *stabilises* it against the recommendations of the
last few minutes, then *limits the rate* of change, and it remembers both per autoscaler. That
memory and its arithmetic live here (``Normalizer``), with time passed in, so tests move it.

Two paths, as in Kubernetes:

* **no ``spec.behavior``** (``normalize``): the recommendation becomes the highest of those
  made in the last ``downscale_window`` (``--horizontal-pod-autoscaler-downscale-stabilization``,
  5 min) — so scaling down waits that long, scaling up does not; then it is held within
  ``minReplicas``..``maxReplicas`` and to at most ``max(2 × current, 4)``;
* **with ``spec.behavior``** (``normalize_with_behavior``): the recommendation is held between
  the lowest recommendation of the scale-up window and the highest of the scale-down window
  (``stabilizationWindowSeconds``: 0 and 300 by default); then each direction's ``policies``
  bound the change — ``Pods`` (add or remove that many) or ``Percent`` (of the replicas at the
  start of the policy's ``periodSeconds``, counting the scalings made within that period),
  combined by ``selectPolicy`` (``Max`` the most permissive, ``Min`` the least, ``Disabled`` no
  change) — and by ``minReplicas``/``maxReplicas``.

Each path returns the replicas and the reasons Kubernetes writes into the ``AbleToScale`` and
``ScalingLimited`` conditions (``ScaleDownStabilized``, ``ScaleUpLimit``, ``TooManyReplicas``,
``DesiredWithinRange`` ...).

Not guaranteed: the memory is this process's; a restarted (or new leader) controller-manager
starts with none, as Kubernetes' does — the first recommendation it records is the current size.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from api.autoscaling import scale_down_rules, scale_up_rules

__all__ = ["DOWNSCALE_WINDOW", "Decision", "Normalizer", "Proposal"]

DOWNSCALE_WINDOW = timedelta(minutes=5)
"""``--horizontal-pod-autoscaler-downscale-stabilization``: the scale-down window when the
autoscaler has no ``behavior``."""
SCALE_UP_LIMIT_FACTOR = 2
SCALE_UP_LIMIT_MINIMUM = 4
"""Without ``behavior``: at most ``max(2 × current, 4)`` replicas after one scaling."""


@dataclass(frozen=True, slots=True)
class Proposal:
    """What the metrics asked for, and the bounds it must be brought within."""

    current: int
    desired: int
    minimum: int
    maximum: int


@dataclass(frozen=True, slots=True)
class Decision:
    """The replicas to set, and the two conditions' reasons and messages."""

    replicas: int
    stabilized_reason: str
    stabilized_message: str
    limited: bool
    limit_reason: str
    limit_message: str


@dataclass(slots=True)
class _Recommendation:
    replicas: int
    at: datetime


@dataclass(slots=True)
class _ScaleEvent:
    change: int
    at: datetime
    outdated: bool = False


@dataclass(slots=True)
class _Memory:
    recommendations: list[_Recommendation] = field(default_factory=list)
    ups: list[_ScaleEvent] = field(default_factory=list)
    downs: list[_ScaleEvent] = field(default_factory=list)


_READY = ("ReadyForNewScale", "recommended size matches current size")
_WITHIN = ("DesiredWithinRange", "the desired count is within the acceptable range")
_TOO_MANY = ("TooManyReplicas", "the desired replica count is more than the maximum replica count")
_TOO_FEW = ("TooFewReplicas", "the desired replica count is less than the minimum replica count")
_UP_LIMIT = (
    "ScaleUpLimit",
    "the desired replica count is increasing faster than the maximum scale rate",
)
_DOWN_LIMIT = (
    "ScaleDownLimit",
    "the desired replica count is decreasing faster than the maximum scale rate",
)
_UP_STABILIZED = (
    "ScaleUpStabilized",
    "recent recommendations were lower than current one, applying the lowest recent recommendation",
)
_DOWN_STABILIZED = (
    "ScaleDownStabilized",
    "recent recommendations were higher than current one, "
    "applying the highest recent recommendation",
)


def _decision(
    replicas: int, target: int, stabilized: tuple[str, str], limit: tuple[str, str]
) -> Decision:
    return Decision(
        replicas=replicas,
        stabilized_reason=stabilized[0],
        stabilized_message=stabilized[1],
        limited=replicas != target,
        limit_reason=limit[0],
        limit_message=limit[1],
    )


def _change_within(period: int, events: list[_ScaleEvent], now: datetime) -> int:
    cutoff = now - timedelta(seconds=period)
    return sum(e.change for e in events if e.at > cutoff)


class Normalizer:
    """Per-autoscaler recommendations and scalings, and the two normalisation paths."""

    def __init__(self, *, downscale_window: timedelta = DOWNSCALE_WINDOW) -> None:
        self.downscale_window = downscale_window
        self._memory: dict[str, _Memory] = {}

    def forget(self, key: str) -> None:
        """The autoscaler is gone."""
        self._memory.pop(key, None)

    def record_initial(self, key: str, current: int, *, now: datetime) -> None:
        """Kubernetes' ``recordInitialRecommendation``: the first thing remembered is the
        current size, so a scale-down waits a whole window after the autoscaler appears."""
        memory = self._memory.setdefault(key, _Memory())
        if not memory.recommendations:
            memory.recommendations.append(_Recommendation(current, now))

    def _record(
        self, memory: _Memory, replicas: int, now: datetime, *, older_than: datetime
    ) -> None:
        """Remember a recommendation, reusing the slot of one older than every window."""
        for rec in memory.recommendations:
            if rec.at < older_than:
                rec.replicas, rec.at = replicas, now
                return
        memory.recommendations.append(_Recommendation(replicas, now))

    # -- without behavior --------------------------------------------------------------------

    def normalize(self, key: str, proposal: Proposal, *, now: datetime) -> Decision:
        current, desired = proposal.current, proposal.desired
        minimum, maximum = proposal.minimum, proposal.maximum
        memory = self._memory.setdefault(key, _Memory())
        cutoff = now - self.downscale_window
        stabilized = max([desired] + [r.replicas for r in memory.recommendations if r.at > cutoff])
        self._record(memory, desired, now, older_than=cutoff)
        reason = _READY if stabilized == desired else _DOWN_STABILIZED
        up_limit = max(SCALE_UP_LIMIT_FACTOR * current, SCALE_UP_LIMIT_MINIMUM)
        ceiling, limit = (up_limit, _UP_LIMIT) if maximum > up_limit else (maximum, _TOO_MANY)
        if stabilized < minimum:
            return _decision(minimum, stabilized, reason, _TOO_FEW)
        if stabilized > ceiling:
            return _decision(ceiling, stabilized, reason, limit)
        return _decision(stabilized, stabilized, reason, _WITHIN)

    # -- with behavior -----------------------------------------------------------------------

    def normalize_with_behavior(
        self, key: str, proposal: Proposal, *, behavior: Mapping[str, Any], now: datetime
    ) -> Decision:
        current, desired = proposal.current, proposal.desired
        minimum, maximum = proposal.minimum, proposal.maximum
        up = scale_up_rules(behavior.get("scaleUp"))
        down = scale_down_rules(behavior.get("scaleDown"))
        memory = self._memory.setdefault(key, _Memory())
        up_cutoff = now - timedelta(seconds=int(up["stabilizationWindowSeconds"]))
        down_cutoff = now - timedelta(seconds=int(down["stabilizationWindowSeconds"]))
        up_bound = min([desired] + [r.replicas for r in memory.recommendations if r.at > up_cutoff])
        down_bound = max(
            [desired] + [r.replicas for r in memory.recommendations if r.at > down_cutoff]
        )
        stabilized = min(max(current, up_bound), down_bound)
        self._record(memory, desired, now, older_than=min(up_cutoff, down_cutoff))
        if stabilized == desired:
            reason = _READY
        else:
            reason = _UP_STABILIZED if desired >= current else _DOWN_STABILIZED
        if stabilized > current:
            limit = max(self._limit(memory, up, current=current, now=now, up=True), current)
            ceiling, why = (limit, _UP_LIMIT) if maximum > limit else (maximum, _TOO_MANY)
            if stabilized > ceiling:
                return _decision(ceiling, stabilized, reason, why)
        elif stabilized < current:
            limit = min(self._limit(memory, down, current=current, now=now, up=False), current)
            floor, why = (limit, _DOWN_LIMIT) if minimum < limit else (minimum, _TOO_FEW)
            if stabilized < floor:
                return _decision(floor, stabilized, reason, why)
        return _decision(stabilized, stabilized, reason, _WITHIN)

    @staticmethod
    def _limit(
        memory: _Memory, rules: Mapping[str, Any], *, current: int, now: datetime, up: bool
    ) -> int:
        """How far the policies of one direction let the target move from ``current``:
        ``calculateScaleUpLimitWithScalingRules`` (``up``) and
        ``calculateScaleDownLimitWithBehaviors``. ``selectPolicy: Min`` picks the smallest
        change, so the lowest limit going up and the highest going down."""
        select = rules.get("selectPolicy")
        if select == "Disabled":
            return current
        sign = 1 if up else -1
        proposals = []
        for policy in rules.get("policies") or []:
            period = int(policy["periodSeconds"])
            start = (
                current
                - _change_within(period, memory.ups, now)
                + _change_within(period, memory.downs, now)
            )
            if policy["type"] == "Pods":
                proposals.append(start + sign * int(policy["value"]))
            elif up:  # Percent, rounded up so that a small target still grows
                proposals.append(math.ceil(start * (1 + int(policy["value"]) / 100)))
            else:
                proposals.append(int(start * (1 - int(policy["value"]) / 100)))
        if not proposals:
            return current
        smallest_change, largest_change = (min, max) if up else (max, min)
        return smallest_change(proposals) if select == "Min" else largest_change(proposals)

    def record_scaling(
        self,
        key: str,
        behavior: Mapping[str, Any] | None,
        *,
        before: int,
        after: int,
        now: datetime,
    ) -> None:
        """Kubernetes' ``storeScaleEvent``: remembered for the policies' periods (only with a
        ``behavior``, which is the only path that reads them)."""
        if behavior is None or before == after:
            return
        memory = self._memory.setdefault(key, _Memory())
        up = after > before
        rules = (
            scale_up_rules(behavior.get("scaleUp"))
            if up
            else scale_down_rules(behavior.get("scaleDown"))
        )
        longest = max((int(p["periodSeconds"]) for p in rules.get("policies") or []), default=0)
        events = memory.ups if up else memory.downs
        cutoff = now - timedelta(seconds=longest)
        for event in events:
            if event.at < cutoff:
                event.outdated = True
        event = _ScaleEvent(abs(after - before), now)
        for i, old in enumerate(events):
            if old.outdated:
                events[i] = event
                return
        events.append(event)
