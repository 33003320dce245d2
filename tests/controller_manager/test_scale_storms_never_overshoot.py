"""Expectations under load, against real processes: 100 RCs scaled at once never have more
active pods than asked at any moment a watcher observes; and a controller-manager SIGKILLed in
the middle of a scale-up is replaced by a fresh one that converges without a single extra pod.

"In the middle" is made certain rather than hoped for: the first controller-manager reaches the
apiserver through a proxy that, after the first 10 pods, refuses its pod creates (as a quota
would), so it is SIGKILLed with 70 pods still to create however fast the machine is."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from kubelite.testing.waiting import Watcher
from tests import factories
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.fault_proxy import FaultProxy
from tests.controller_manager.harness import EVENTS, PODS, RCS, Obj, active

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]


class PerOwnerPeak:
    """Counts active pods per controller uid at every observed event; remembers the peak."""

    def __init__(self) -> None:
        self.peak: Counter[str] = Counter()
        self.watcher: Watcher | None = None

    def counts(self) -> Counter[str]:
        assert self.watcher is not None
        counts: Counter[str] = Counter()
        for p in self.watcher.objects():
            if not active(p):
                continue
            for ref in p["metadata"].get("ownerReferences") or []:
                if ref.get("controller"):
                    counts[ref["uid"]] += 1
        return counts

    def __call__(self, _type: str, _obj: Obj) -> None:
        for uid, n in self.counts().items():
            if n > self.peak[uid]:
                self.peak[uid] = n

    def reset(self) -> None:
        self.peak = Counter(self.counts())


async def _scale_all(cluster: Cluster, names: list[str], replicas: int) -> None:
    await asyncio.gather(
        *(
            cluster.client.patch(RCS, n, {"spec": {"replicas": replicas}}, namespace="default")
            for n in names
        )
    )


async def test_hundred_rcs_scaled_concurrently_never_exceed_replicas(cluster: Cluster) -> None:
    client = cluster.client
    names = [f"rc{i:03d}" for i in range(100)]
    peak = PerOwnerPeak()
    async with Watcher(client, PODS, namespace="default", on_event=peak) as pods:
        peak.watcher = pods
        rcs = await asyncio.gather(
            *(client.create(RCS, factories.rc(n, replicas=0), namespace="default") for n in names)
        )
        uids = {rc["metadata"]["uid"] for rc in rcs}

        def exactly(n: int):
            def check(_o: list[Obj]) -> bool:
                counts = peak.counts()
                return all(counts[u] == n for u in uids) and len(_o) == n * len(uids)

            return check

        await _scale_all(cluster, names, 5)
        await pods.wait_until(exactly(5), what="5 pods for each of 100 RCs", within=180)
        over = {u: n for u, n in peak.peak.items() if n > 5}
        assert not over, f"RCs went above 5 active pods: {sorted(over.values())[:10]}"

        await _scale_all(cluster, names, 2)
        await pods.wait_until(exactly(2), what="2 pods each", within=180)
        peak.reset()
        await _scale_all(cluster, names, 4)
        await pods.wait_until(exactly(4), what="4 pods each", within=180)
        over = {u: n for u, n in peak.peak.items() if n > 4}
        assert not over, f"RCs went above 4 active pods: {sorted(over.values())[:10]}"


QUOTA = {
    "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
    "message": 'pods "big-" is forbidden: exceeded quota: compute, requested: pods=1, '
    "used: pods=10, limited: pods=10",
}  # fmt: skip


async def test_controller_manager_killed_mid_scale_converges_without_duplicates(
    cluster: Cluster,
) -> None:
    client = cluster.client
    cluster.cm.stop()  # SIGTERM releases the lease: the one behind the proxy leads at once
    peak = PerOwnerPeak()
    async with (
        FaultProxy(cluster.api.url) as proxy,
        Watcher(client, PODS, namespace="default", on_event=peak) as pods,
        Watcher(client, EVENTS, namespace="default") as events,
    ):
        peak.watcher = pods
        first = cluster.new_cm(server=proxy.url).start()
        rc = await client.create(RCS, factories.rc("big", replicas=10), namespace="default")
        uid = rc["metadata"]["uid"]
        await pods.wait_until(lambda o: peak.counts()[uid] == 10, what="the first 10 pods")
        proxy.refuse("POST", r"/api/v1/namespaces/default/pods", QUOTA)
        await client.patch(RCS, "big", {"spec": {"replicas": 80}}, namespace="default")
        await events.wait_until(
            lambda o: any(e["reason"] == "FailedCreate" for e in o),
            what="the scale-up to 80 under way (and refused)",
        )
        first.kill()  # SIGKILL: no lease release, expectations for 70 creates left behind
        assert peak.counts()[uid] == 10, "every create after the first 10 was refused"
        # straight to the apiserver; it waits out the killed leader's lease, then takes over
        successor = cluster.new_cm().start()
        await pods.wait_until(
            lambda o: peak.counts()[uid] == 80 and len(o) == 80,
            what="80 pods after the restart",
            within=120,
        )
        assert peak.peak[uid] == 80, f"peak {peak.peak[uid]} pods for 80 replicas"
        final = await client.get(RCS, "big", namespace="default")
        await pods.wait_until(lambda o: len(o) == 80, what="still 80")
        assert successor.proc is not None and successor.proc.poll() is None
        assert final["spec"]["replicas"] == 80
