"""One sim kubelet process hosting 500 nodes keeps every node's Lease fresh.

What is asserted is what the kubelet guarantees whatever the machine's load: every node renews
its Lease, none is older than the lease duration (a node controller would call it dead), and the
log has no ERROR, traceback or Conflict. A renewal that timed out and was retried logs a WARNING
on a loaded machine; that is the back-off working, so warnings as such are not failures.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from api.meta import parse_time
from api.registry import REGISTRY
from client.rest import ApiClient
from tests.conftest import StartApiServer
from tests.kubelet.conftest import StartKubelet

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NODES = 500
LEASE_SECONDS = 40


async def test_500_simulated_nodes_renew_every_lease(
    apiserver_process: StartApiServer, start_kubelet: StartKubelet
) -> None:
    api = apiserver_process(store="memory://")
    kubelet = start_kubelet(api.url, "sim", runtime="sim", args=["--nodes", str(NODES)])
    leases = REGISTRY.get("coordination.k8s.io", "v1", "leases")
    assert leases is not None
    first: dict[str, str] = {}
    renewed: dict[str, str] = {}
    async with ApiClient(server=api.url) as client, asyncio.timeout(120):
        listed = await client.list(leases, namespace="kube-node-lease")
        for lease in listed["items"]:
            first[lease["metadata"]["name"]] = lease["spec"]["renewTime"]
        # every node creates its lease, then renews it: wait for a second renewTime from each
        async with client.watch(
            leases,
            namespace="kube-node-lease",
            resource_version=listed["metadata"]["resourceVersion"],
        ) as stream:
            async for event in stream:
                if event.type not in ("ADDED", "MODIFIED"):
                    continue
                name = event.object["metadata"]["name"]
                renew = event.object["spec"]["renewTime"]
                if name not in first:
                    first[name] = renew
                elif renew != first[name]:
                    renewed[name] = renew
                if len(renewed) == NODES:
                    break
        final = await client.list(leases, namespace="kube-node-lease")
    now = datetime.now(UTC)
    ages = {
        lease["metadata"]["name"]: (now - parse_time(lease["spec"]["renewTime"])).total_seconds()
        for lease in final["items"]
    }
    assert sorted(renewed) == sorted(f"sim-{i}" for i in range(NODES))
    assert len(ages) == NODES
    stale = {name: age for name, age in ages.items() if age >= LEASE_SECONDS}
    assert not stale, f"leases older than {LEASE_SECONDS}s: {stale}"
    log = kubelet.log_path.read_text(errors="replace")
    # the kubelet is the only writer of its Leases and Nodes here: a Conflict is a bug
    bad = [
        line
        for line in log.splitlines()
        if " ERROR " in line or "Traceback" in line or "Conflict" in line
    ]
    assert not bad, "\n".join(bad[:20])
