"""coordination.k8s.io/v1: Lease — node heartbeats and leader election.

Why: every kubelet renews a Lease in ``kube-node-lease`` every few seconds (cheaper than a full
node-status write) and the node-lifecycle controller reads them; replicated components elect a
leader through one. ``acquireTime`` and ``renewTime`` are ``MicroTime`` strings
(``2026-11-30T02:09:45.123456Z``, see ``api.meta.now_micro_time``).

Limits: a Lease is only a record; it gives no fencing. Whoever reads it decides what an expired
lease means (``renewTime + leaseDurationSeconds`` against its own clock).
"""

from __future__ import annotations

from pydantic import Field

from api.meta import KubeModel, ObjectMeta

__all__ = ["Lease", "LeaseSpec"]


class LeaseSpec(KubeModel):
    holder_identity: str | None = None
    lease_duration_seconds: int | None = None
    acquire_time: str | None = None
    renew_time: str | None = None
    lease_transitions: int | None = None
    strategy: str | None = None
    preferred_holder: str | None = None


class Lease(KubeModel):
    api_version: str = "coordination.k8s.io/v1"
    kind: str = "Lease"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: LeaseSpec = Field(default_factory=LeaseSpec)
