"""Two controller-manager processes: only the Lease holder acts; SIGTERM releases the lease and
exits 0, and the standby takes over at once; /healthz answers on the loopback port."""

from __future__ import annotations

import aiohttp
import pytest

from kubelite.testing.waiting import Watcher
from tests import factories
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import LEASES, PODS, RCS, Obj, active, owned_by

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


async def _healthz(url: str) -> tuple[int, str]:
    """``GET /healthz`` of a started component (it printed its ready line: the server is up)."""
    async with aiohttp.ClientSession() as session, session.get(f"{url}/healthz") as resp:
        return resp.status, await resp.text()


def holder(leases: list[Obj]) -> str:
    for lease in leases:
        if lease["metadata"]["name"] == "kube-controller-manager":
            return str(lease["spec"].get("holderIdentity") or "")
    return ""


async def test_standby_takes_over_when_the_leader_stops(cluster: Cluster) -> None:
    client = cluster.client
    first = cluster.cm
    assert await _healthz(first.url) == (200, "ok")
    async with (
        Watcher(client, LEASES, namespace="kube-system") as leases,
        Watcher(client, PODS, namespace="default") as pods,
    ):
        await leases.wait_until(lambda o: holder(o) != "", what="a leader")
        leader = holder(leases.objects())
        standby = await cluster.new_cm().astart()
        assert await _healthz(standby.url) == (200, "ok")

        assert await first.astop() == 0, "SIGTERM is a clean exit"
        await leases.wait_until(
            lambda o: holder(o) not in ("", leader), what="the standby holding the lease", within=30
        )
        rc = await client.create(RCS, factories.rc("after", replicas=2), namespace="default")
        await pods.wait_until(
            lambda o: sum(1 for p in o if owned_by(p, rc) and active(p)) == 2,
            what="the new leader at work",
        )
