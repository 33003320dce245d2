"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's ``tools/leaderelection``.

Why: a component may run several replicas for availability, but only one may act (two
schedulers binding the same pod, two replication controllers creating pods, would fight). The
replicas compete for one Lease object; whoever holds it leads.

How it works (client-go's algorithm and defaults):

* Every ``retry_period`` (2 s, jittered x1.2 while waiting) a candidate reads the Lease. If it is
  held by someone else and that holder was *seen to renew* less than ``lease_duration`` (15 s)
  ago, it waits. Otherwise it writes itself in as holder (``acquireTime``, ``renewTime``,
  ``leaseTransitions`` + 1) with a compare-and-swap on the Lease's resourceVersion, so of two
  candidates at most one succeeds. A missing Lease is created (again, one create wins).
* The leader renews every ``retry_period``. If it cannot renew for ``renew_deadline`` (10 s) it
  stops leading: the ``on_started_leading`` task is cancelled, ``on_stopped_leading`` runs, and
  ``run()`` returns (client-go's processes exit at this point; the caller decides).
* On a clean shutdown (``run()`` cancelled, ``release_on_cancel``), the leader releases the Lease
  (empty holder, 1 s duration) so a follower takes over within about one retry period instead of
  a full lease duration.

**Limits — read these.** Expiry is judged by each candidate's *local monotonic clock* from the
moment it observed the Lease change, never by comparing ``renewTime`` with its wall clock, so
clock skew between machines does not matter, but the scheme assumes clocks *run* at about the
same rate. There is **no fencing**: a leader that is paused (GC, swap, a blocked loop) longer
than ``lease_duration - renew_deadline`` may still act for a moment after another replica has
taken over. Work done by a leader must therefore be safe to repeat or to race (in kubelite every
write is a compare-and-swap, which is what makes this acceptable). ``renew_deadline`` must be
shorter than ``lease_duration`` so the old leader gives up before anyone can take over.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, NoReturn

from api.errors import AlreadyExists, Conflict, NotFound, StatusError
from api.meta import now_micro_time
from api.registry import REGISTRY, ResourceType
from client.rest import ApiClient
from component.errors import Fatal

__all__ = ["LeaderElectionConfig", "LeaderElector", "LeadershipLost"]

log = logging.getLogger(__name__)

JITTER_FACTOR = 1.2
"""client-go's JitterFactor for the acquire loop: waits are retry_period * [1, 2.2)."""


def _leases() -> ResourceType:
    rt = REGISTRY.by_kind("coordination.k8s.io", "Lease")
    if rt is None:  # pragma: no cover - the registry always serves leases
        raise RuntimeError("the registry has no coordination.k8s.io Lease")
    return rt


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    lease_name: str
    identity: str
    namespace: str = "kube-system"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("leader election needs a non-empty identity")
        if not 0 < self.retry_period * JITTER_FACTOR < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "leader election needs retry_period*1.2 < renew_deadline < lease_duration, got "
                f"{self.retry_period}, {self.renew_deadline}, {self.lease_duration}"
            )


class LeadershipLost(Fatal):
    """The lease could not be renewed: this process must stop acting, and exits 1 so that its
    supervisor restarts it as a candidate (client-go's components exit at this point too)."""


class LeaderElector:
    def __init__(
        self,
        client: ApiClient,
        config: LeaderElectionConfig,
        *,
        on_started_leading: Callable[[], Coroutine[Any, Any, None]],
        on_stopped_leading: Callable[[], None] | None = None,
        on_new_leader: Callable[[str], None] | None = None,
    ) -> None:
        self.client = client
        self.config = config
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self._rt = _leases()
        self._observed: dict[str, Any] | None = None
        self._observed_time = 0.0
        self._reported_leader: str | None = None
        self.last_renewed: float | None = None
        """Loop time of our last successful acquire or renew (None before the first)."""

    @property
    def leader(self) -> str:
        """The holder we last observed ("" if none)."""
        return str((self._observed or {}).get("holderIdentity") or "")

    @property
    def is_leader(self) -> bool:
        return self.leader == self.config.identity

    # -- lifecycle ------------------------------------------------------------------------

    async def run(self) -> None:
        """Campaign until elected, lead until the lease is lost or we are cancelled."""
        cfg = self.config
        await self._acquire()
        log.info("%s: became leader of lease %s/%s", cfg.identity, cfg.namespace, cfg.lease_name)
        leading = asyncio.create_task(
            self.on_started_leading(), name=f"leading {cfg.namespace}/{cfg.lease_name}"
        )
        try:
            await self._renew_until_lost(leading)
        finally:
            leading.cancel()
            await asyncio.gather(leading, return_exceptions=True)
            if cfg.release_on_cancel and self.is_leader:
                await asyncio.shield(self._release())
            log.info("%s: stopped leading lease %s/%s", cfg.identity, cfg.namespace, cfg.lease_name)
            if self.on_stopped_leading is not None:
                self.on_stopped_leading()

    async def campaign(self, *, what: str) -> NoReturn:
        """``run()`` for a component's main task: log what waits for the lease, lead until the
        lease is lost, then raise ``LeadershipLost`` (cancellation ends it as usual)."""
        cfg = self.config
        log.info(
            "campaigning for lease %s/%s as %s; %s once elected",
            cfg.namespace, cfg.lease_name, cfg.identity, what,
        )  # fmt: skip
        await self.run()
        raise LeadershipLost(
            f"lost the lease {cfg.namespace}/{cfg.lease_name}; exiting so a supervisor "
            "restarts this process"
        )

    async def _acquire(self) -> None:
        cfg = self.config
        while True:
            if await self._try_acquire_or_renew():
                return
            await asyncio.sleep(cfg.retry_period * (1.0 + JITTER_FACTOR * random.random()))

    async def _renew_until_lost(self, leading: asyncio.Task[None]) -> None:
        cfg = self.config
        loop = asyncio.get_running_loop()
        while True:
            done, _ = await asyncio.wait({leading}, timeout=cfg.retry_period)
            if done:
                log.warning("%s: the leading task ended; giving up the lease", cfg.identity)
                return
            deadline = loop.time() + cfg.renew_deadline
            while True:
                remaining = deadline - loop.time()
                try:
                    ok = await asyncio.wait_for(self._try_acquire_or_renew(), timeout=remaining)
                except TimeoutError:
                    ok = False
                if ok:
                    break
                if loop.time() + cfg.retry_period >= deadline:
                    log.error(
                        "%s: failed to renew lease %s/%s within %.1fs; stopping leading",
                        cfg.identity, cfg.namespace, cfg.lease_name, cfg.renew_deadline,
                    )  # fmt: skip
                    return
                await asyncio.sleep(cfg.retry_period)

    # -- one attempt ----------------------------------------------------------------------

    async def _try_acquire_or_renew(self) -> bool:
        cfg = self.config
        loop = asyncio.get_running_loop()
        now = now_micro_time()
        try:
            lease = await self.client.get(self._rt, cfg.lease_name, namespace=cfg.namespace)
        except NotFound:
            spec = self._spec(acquire_time=now, renew_time=now, transitions=0)
            body = {
                "apiVersion": self._rt.api_version,
                "kind": self._rt.kind,
                "metadata": {"name": cfg.lease_name, "namespace": cfg.namespace},
                "spec": spec,
            }
            try:
                created = await self.client.create(self._rt, body)
            except (AlreadyExists, Conflict):
                return False
            except (ConnectionError, StatusError) as exc:
                log.warning("%s: creating lease failed: %r; will retry", cfg.identity, exc)
                return False
            self._observe(created, loop.time())
            self.last_renewed = loop.time()
            return True
        except (ConnectionError, StatusError) as exc:
            log.warning(
                "%s: reading lease %s/%s failed: %r; will retry in %.1fs",
                cfg.identity, cfg.namespace, cfg.lease_name, exc, cfg.retry_period,
            )  # fmt: skip
            return False

        spec = dict(lease.get("spec") or {})
        if spec != self._observed:
            self._observe(lease, loop.time())
        holder = str(spec.get("holderIdentity") or "")
        duration = float(spec.get("leaseDurationSeconds") or cfg.lease_duration)
        if holder and holder != cfg.identity and self._observed_time + duration > loop.time():
            return False
        if holder == cfg.identity:
            new_spec = self._spec(
                acquire_time=spec.get("acquireTime") or now,
                renew_time=now,
                transitions=int(spec.get("leaseTransitions") or 0),
            )
        else:
            new_spec = self._spec(
                acquire_time=now,
                renew_time=now,
                transitions=int(spec.get("leaseTransitions") or 0) + 1,
            )
        updated = dict(lease)
        updated["spec"] = new_spec
        try:
            written = await self.client.update(self._rt, updated)
        except Conflict:
            return False  # someone else wrote first: the CAS did its job
        except (ConnectionError, StatusError) as exc:
            log.warning("%s: updating lease failed: %r; will retry", cfg.identity, exc)
            return False
        self._observe(written, loop.time())
        self.last_renewed = loop.time()
        return True

    def _spec(self, *, acquire_time: str, renew_time: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.config.identity,
            "leaseDurationSeconds": max(1, round(self.config.lease_duration)),
            "acquireTime": acquire_time,
            "renewTime": renew_time,
            "leaseTransitions": transitions,
        }

    def _observe(self, lease: dict[str, Any], at: float) -> None:
        self._observed = dict(lease.get("spec") or {})
        self._observed_time = at
        leader = self.leader
        if leader != self._reported_leader:
            self._reported_leader = leader
            if leader and leader != self.config.identity:
                log.info(
                    "%s: lease %s held by %s", self.config.identity, self.config.lease_name, leader
                )
            if self.on_new_leader is not None and leader:
                try:
                    self.on_new_leader(leader)
                except Exception:
                    log.exception("on_new_leader callback failed")

    async def _release(self) -> None:
        """Hand the lease back (empty holder, 1 s duration) so a follower need not wait it out."""
        cfg = self.config
        try:
            lease = await self.client.get(self._rt, cfg.lease_name, namespace=cfg.namespace)
            spec = dict(lease.get("spec") or {})
            if spec.get("holderIdentity") != cfg.identity:
                return
            now = now_micro_time()
            lease = dict(lease)
            lease["spec"] = {
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": int(spec.get("leaseTransitions") or 0),
            }
            written = await self.client.update(self._rt, lease)
            self._observed = dict(written.get("spec") or {})
            log.info("%s: released lease %s/%s", cfg.identity, cfg.namespace, cfg.lease_name)
        except (ConnectionError, StatusError) as exc:
            log.warning("%s: releasing lease failed: %r; it will expire instead", cfg.identity, exc)
