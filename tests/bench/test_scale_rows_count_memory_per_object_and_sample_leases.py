"""The scale rows: ``--scale [NODESxPODS]`` registers and runs the seeded scale scenario alone;
memory per 1,000 objects is a difference between two holds; every lease sample counts every
node (a missing or stale Lease is not fresh) and a node whose Ready left True is counted once;
and a tiny seeded scenario really runs on a real cluster. Counts and labels only, nothing timed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer

from bench.__main__ import DEFAULT_SCALE, main, parse_args
from bench.harness import Context
from bench.scale import NodeWatch, create_seeds, per_thousand, scale_scenario
from bench.suite import build_registry
from client.rest import ApiClient
from services.apiserver.app import make_app
from services.apiserver.context import ServerOptions


def test_scale_option_takes_a_size_and_defaults_to_the_issues_goal() -> None:
    assert parse_args(["--scale"]).scale == DEFAULT_SCALE == (5000, 150_000)
    assert parse_args(["--scale", "5000x50000"]).scale == (5000, 50_000)
    assert parse_args([]).scale is None
    with pytest.raises(SystemExit):
        parse_args(["--scale", "5000"])


def test_the_seeded_scenario_is_registered_only_when_asked_for(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert not any(s.name.startswith("scale-5000x") for s in build_registry())
    asked = build_registry(scale=(5000, 150_000))
    [scenario] = [s for s in asked if s.name == "scale-5000x150000"]
    assert scenario.section == "scale" and not scenario.quick
    assert main(["--list", "--scale", "200x3000"]) == 0
    assert "scale-200x3000" in capsys.readouterr().out
    assert "burst-10000x100" in [s.name for s in build_registry().select(quick=True)]


def test_memory_per_thousand_is_the_difference_over_the_objects_added() -> None:
    mib = 2**20
    after = {"apiserver": 300 * mib, "scheduler": 90 * mib, "gone": 1}
    before = {"apiserver": 100 * mib, "scheduler": 80 * mib}
    assert per_thousand(after, before, count=4000) == {"apiserver": 50.0, "scheduler": 2.5}
    assert per_thousand(after, before, count=0) == {}


def _lease(name: str, renewed: datetime) -> dict[str, object]:
    stamp = renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {"metadata": {"name": name, "namespace": "kube-node-lease", "resourceVersion": "1"},
            "spec": {"renewTime": stamp}}  # fmt: skip


def _node(name: str, ready: str) -> dict[str, object]:
    return {"metadata": {"name": name, "resourceVersion": "1"},
            "status": {"conditions": [{"type": "Ready", "status": ready}]}}  # fmt: skip


async def test_a_lease_sample_counts_every_node_and_not_ready_is_remembered() -> None:
    async with ApiClient(server="http://127.0.0.1:9") as client:  # never contacted
        watch = NodeWatch(client, nodes=3)
        now = datetime.now(UTC)
        watch.leases.replace([_lease("a", now), _lease("b", now - timedelta(seconds=50))], "1")
        assert not watch.every_lease.is_set()  # sampling waits for every node's Lease
        watch.sample()  # node c has none yet: 3 samples, 1 fresh
        watch.leases.replace([_lease(n, now) for n in "abc"], "2")
        assert watch.every_lease.is_set()
        watch.sample()
        watch.node_informer.replace([_node("a", "True"), _node("b", "Unknown")], "1")
        watch.node_informer.replace([_node("a", "True"), _node("b", "True")], "2")
    figures = watch.figures()
    assert figures["lease samples"] == 6 and figures["leases fresh"] == pytest.approx(4 / 6)
    assert 50 <= figures["oldest lease"] < 60
    assert 0 <= figures["lease watch lag"] < 10  # each sample saw a lease renewed "now"
    assert figures["nodes ever NotReady"] == 1 and watch.not_ready == {"b"}


async def test_seeding_stops_for_every_worker_once_memory_runs_low(
    aiohttp_server: Callable[..., Awaitable[TestServer]],
) -> None:
    server = await aiohttp_server(make_app(ServerOptions(store_url="memory://")))
    checks = iter([True])  # enough at pod 0, too little at pod 1,000

    created = await create_seeds(str(server.make_url("")).rstrip("/"), pods=3000, nodes=2,
                                 enough_memory=lambda: next(checks, False))  # fmt: skip
    assert created == 1000  # names 0-999; no worker took one after the check failed


@pytest.mark.e2e  # an apiserver, scheduler, controller-manager and sim kubelets as processes
async def test_a_seeded_scale_scenario_holds_its_pods_and_reports_per_object_memory(
    tmp_path: Path,
) -> None:
    ctx = Context(quick=True, rounds=1, workdir=tmp_path, store="memory")
    figures = {f.name: f.median for f in await scale_scenario(nodes=2, pods=6, build="seed")(ctx)}
    assert figures["build: pods held"] == 6
    assert figures["nodes ever NotReady"] == 0 and figures["nodes Ready"] == 1.0
    assert figures["lease samples"] >= 2
    for process in ("apiserver", "scheduler", "controller-manager", "kubelet-0"):
        assert f"RSS {process} per 1,000 pods" in figures
        assert f"RSS {process} per 1,000 nodes" in figures
    assert "full pod list rv=0" in figures and figures["pods listed"] == 6
