"""The two ways a Deployment rolls from one template to the next: RollingUpdate and Recreate.

Why a module of its own: a strategy is the policy of a rollout — in which order ReplicaSets
grow and shrink — and reads best as one short story per strategy, as ``rolling.go`` and
``recreate.go`` in ``pkg/controller/deployment`` tell them. The budgets themselves are
``rollout.py``'s pure arithmetic; the writes are ``deployment_scaling.py``'s.

* **RollingUpdate**: grow the new ReplicaSet while all ReplicaSets together stay within
  ``replicas + maxSurge``; shrink old ones (unhealthy pods first) while the available pods stay
  at least ``replicas - maxUnavailable`` (counted conservatively: see
  ``rollout.available_replicas``).
* **Recreate**: scale every old ReplicaSet to 0, wait until no old pod is left running, then
  scale the new one up.

Each step writes at most what one sync may, updates the status and returns the seconds after
which the Deployment should be looked at again (or None). Old ReplicaSets beyond the revision
history limit are pruned once the rollout is complete.

What it does not guarantee: every decision is taken from the informer caches; a decision on a
stale cache fails with Conflict (raised to the caller) and is taken again from a fresher one.
Pods are not consulted for ranking across ReplicaSets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from client.informer import Informer
from services.controller_manager import rollout as ro
from services.controller_manager.controller_ref import controller_ref
from services.controller_manager.deployment_history import RevisionHistory
from services.controller_manager.deployment_scaling import ReplicaSetScaler
from services.controller_manager.deployment_status import DeploymentStatusWriter

__all__ = ["Recreate", "RollingUpdate"]

Obj = dict[str, Any]


def _unavailable(rs: Obj) -> int:
    """Replicas ``rs`` is asked for that are not available."""
    available = int((rs.get("status") or {}).get("availableReplicas") or 0)
    return ro.spec_replicas(rs) - min(available, ro.spec_replicas(rs))


@dataclass(frozen=True, kw_only=True, slots=True)
class _Strategy:
    """What a strategy writes through: ReplicaSets, their sizes, the Deployment's status."""

    history: RevisionHistory
    scaler: ReplicaSetScaler
    status: DeploymentStatusWriter


@dataclass(frozen=True, kw_only=True, slots=True)
class RollingUpdate(_Strategy):
    """``rolloutRolling``: surge the new ReplicaSet, then drain the old ones."""

    async def rollout(self, d: Obj, *, new_rs: Obj | None, old_rss: list[Obj]) -> float | None:
        if new_rs is None:
            new_rs = await self.history.create_new(d, old_rss)
        all_rss: list[Obj | None] = [*old_rss, new_rs]
        scaled, new_rs = await self._scale_new(d, all_rss, new_rs=new_rs)
        all_rss = [*old_rss, new_rs]
        if scaled:
            return await self.status.sync_rollout(d, all_rss, new_rs=new_rs)
        scaled, old_rss = await self._scale_old(d, all_rss, old_rss=old_rss, new_rs=new_rs)
        all_rss = [*old_rss, new_rs]
        if scaled:
            return await self.status.sync_rollout(d, all_rss, new_rs=new_rs)
        if ro.deployment_complete(d, d.get("status") or {}):
            await self.history.cleanup(d, old_rss)
        return await self.status.sync_rollout(d, all_rss, new_rs=new_rs)

    async def _scale_new(
        self, d: Obj, all_rss: list[Obj | None], *, new_rs: Obj
    ) -> tuple[bool, Obj]:
        """``reconcileNewReplicaSet``: as far up as the surge allows (or down to ``replicas``)."""
        replicas = ro.spec_replicas(d)
        current = ro.spec_replicas(new_rs)
        if current == replicas:
            return False, new_rs
        if current > replicas:
            return await self.scaler.scale(d, new_rs, replicas=replicas)
        target = ro.new_rs_new_replicas(d, all_rss, new_rs)
        return await self.scaler.scale(d, new_rs, replicas=target)

    async def _scale_old(
        self, d: Obj, all_rss: list[Obj | None], *, old_rss: list[Obj], new_rs: Obj
    ) -> tuple[bool, list[Obj]]:
        """``reconcileOldReplicaSets``: shrink the old ReplicaSets as far as availability allows."""
        old_count = sum(ro.spec_replicas(rs) for rs in old_rss)
        if old_count == 0:
            return False, old_rss
        all_count = sum(ro.spec_replicas(rs) for rs in all_rss if rs is not None)
        min_available = ro.spec_replicas(d) - ro.max_unavailable(d)
        new_unavailable = _unavailable(new_rs)
        max_scaled_down = all_count - min_available - new_unavailable
        if max_scaled_down <= 0:
            return False, old_rss
        olds = sorted(old_rss, key=ro.creation_order)
        # first the old replicas that are not available anyway: removing them costs nothing
        cleaned = await self._drop(d, olds, budget=max_scaled_down, removable=_unavailable)
        # then available ones, while the available total stays above replicas - maxUnavailable
        available = ro.available_replicas([*olds, new_rs], conservative=True)
        scaled_down = await self._drop(
            d, olds, budget=available - min_available, removable=ro.spec_replicas
        )
        return cleaned + scaled_down > 0, olds

    async def _drop(
        self, d: Obj, olds: list[Obj], *, budget: int, removable: Callable[[Obj], int]
    ) -> int:
        """Shrink ``olds`` in order, each by at most ``removable(rs)``, ``budget`` in all.
        Replaces the entries of ``olds`` it rewrote; returns how many replicas it removed."""
        removed = 0
        for i, rs in enumerate(olds):
            if removed >= budget:
                break
            size = ro.spec_replicas(rs)
            if size == 0:
                continue
            can = removable(rs)
            if can <= 0:
                continue
            step = min(budget - removed, can)
            _, olds[i] = await self.scaler.scale(d, rs, replicas=size - step)
            removed += step
        return removed


@dataclass(frozen=True, kw_only=True, slots=True)
class Recreate(_Strategy):
    """``rolloutRecreate``: all old pods gone first, then the new ReplicaSet at full size."""

    pods: Informer
    """The pod cache: Recreate waits until no old pod is left running."""

    async def rollout(self, d: Obj, *, new_rs: Obj | None, old_rss: list[Obj]) -> float | None:
        scaled = False
        olds = list(old_rss)
        for i, rs in enumerate(olds):
            if ro.spec_replicas(rs) != 0:
                changed, olds[i] = await self.scaler.scale(d, rs, replicas=0)
                scaled |= changed
        if scaled:
            return await self.status.sync_rollout(d, [*olds, new_rs], new_rs=new_rs)
        if self._old_pods_running(new_rs, olds):
            return await self.status.sync_rollout(d, [*olds, new_rs], new_rs=new_rs)
        if new_rs is None:
            new_rs = await self.history.create_new(d, olds)
        _, new_rs = await self.scaler.scale(d, new_rs, replicas=ro.spec_replicas(d))
        if ro.deployment_complete(d, d.get("status") or {}):
            await self.history.cleanup(d, olds)
        return await self.status.sync_rollout(d, [*olds, new_rs], new_rs=new_rs)

    def _old_pods_running(self, new_rs: Obj | None, old_rss: list[Obj]) -> bool:
        if sum(int((rs.get("status") or {}).get("replicas") or 0) for rs in old_rss) > 0:
            return True
        if not old_rss:
            return False
        old_uids = {rs["metadata"].get("uid") for rs in old_rss}
        new_uid = (new_rs or {}).get("metadata", {}).get("uid")
        namespace = old_rss[0]["metadata"].get("namespace") or ""
        for pod in self.pods.by_index("namespace", namespace):
            ref = controller_ref(pod)
            if ref is None or ref.get("uid") not in old_uids or ref.get("uid") == new_uid:
                continue
            if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                return True
        return False
