"""Expectations under load, against real processes: 100 RCs scaled at once never have more
active pods than asked at any moment a watcher observes; and a controller-manager SIGKILLed in
the middle of a scale-up is replaced by a fresh one that converges without a single extra pod."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import PODS, RCS, Obj, Watcher, active, rc_body

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
            *(client.create(RCS, rc_body(n, replicas=0), namespace="default") for n in names)
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


async def test_controller_manager_killed_mid_scale_converges_without_duplicates(
    cluster: Cluster,
) -> None:
    client = cluster.client
    peak = PerOwnerPeak()
    async with Watcher(client, PODS, namespace="default", on_event=peak) as pods:
        peak.watcher = pods
        rc = await client.create(RCS, rc_body("big", replicas=0), namespace="default")
        uid = rc["metadata"]["uid"]
        await client.patch(RCS, "big", {"spec": {"replicas": 80}}, namespace="default")
        await pods.wait_until(lambda o: peak.counts()[uid] >= 10, what="the scale-up under way")
        cluster.cm.kill()  # SIGKILL: no lease release, writes possibly in flight
        partial = peak.counts()[uid]
        successor = cluster.new_cm().start()
        await pods.wait_until(
            lambda o: peak.counts()[uid] == 80 and len(o) == 80,
            what="80 pods after the restart",
            within=120,
        )
        assert peak.peak[uid] == 80, f"peak {peak.peak[uid]} pods for 80 replicas"
        assert partial < 80, "the kill happened mid-scale"
        final = await client.get(RCS, "big", namespace="default")
        await pods.wait_until(lambda o: len(o) == 80, what="still 80")
        assert successor.proc is not None and successor.proc.poll() is None
        assert final["spec"]["replicas"] == 80
