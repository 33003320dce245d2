"""``bench.lease_renewals`` against a real apiserver process: every Lease is created once and
renewed once per round as a kubelet renews it (an update that moves ``spec.renewTime``), and the
nodes-per-core figure follows from the CPU per renewal."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import aiohttp

from bench.api import apiserver_argv, server_process
from bench.lease_renewals import LEASES, measure, nodes_per_core
from bench.status_writes import Rate


async def _events(resp: aiohttp.ClientResponse, n: int) -> Counter[tuple[str, str]]:
    """(type, lease name) of a watch's first ``n`` events."""
    seen: Counter[tuple[str, str]] = Counter()
    async for line in resp.content:
        event = json.loads(line)
        seen[(event["type"], event["object"]["metadata"]["name"])] += 1
        if sum(seen.values()) == n:
            break
    return seen


async def test_each_lease_is_created_once_and_renewed_once_per_round(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pids: list[int] = []
    async with (
        server_process(apiserver_argv(f"sqlite:///{tmp_path}/api.db"), pids=pids) as url,
        aiohttp.ClientSession(url) as session,
        session.get(LEASES, params={"watch": "1"}) as watch,  # open before the first create
    ):
        creates, renewals = await measure(
            url, count=3, rounds=4, in_flight=2, pid=pids[0], profile=None
        )
        seen = await asyncio.wait_for(_events(watch, n=3 + 3 * 4), 60)

    names = ("node-0", "node-1", "node-2")
    assert seen == Counter(
        {**{("ADDED", n): 1 for n in names}, **{("MODIFIED", n): 4 for n in names}}
    )
    # the rates are over the calls counted above: one per create, one per renewal
    assert creates.per_s > 0 and renewals.per_s > 0


def test_nodes_per_core_is_ten_seconds_over_the_cpu_per_renewal() -> None:
    assert nodes_per_core(Rate(per_s=100.0, cpu_ms=2.0)) == 5000.0
