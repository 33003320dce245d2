"""The scheduler cache (assumed pods, node events) and the ``--config`` file."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from services.scheduler.cache import SchedulerCache
from services.scheduler.config import SchedulerConfig, build_framework, load_config
from services.scheduler.framework import FitError
from services.scheduler.queue import NODE_ADD
from tests.factories import node, pod_info


def test_assumed_pod_counts_until_forgotten() -> None:
    cache = SchedulerCache()
    cache.add_node(node("n1", cpu="2"))
    p = pod_info("p", cpu="1500m")
    cache.assume(p, "n1")
    info = cache.node("n1")
    assert info is not None and info.requested.milli_cpu == 1500
    assert cache.is_assumed("default/p") and cache.is_placed("default/p")
    cache.forget("default/p")
    assert info.requested.milli_cpu == 0
    assert not cache.is_placed("default/p")


def test_binding_confirmation_replaces_the_assumption_without_double_counting() -> None:
    cache = SchedulerCache()
    cache.add_node(node("n1", cpu="4"))
    cache.assume(pod_info("p", cpu="1"), "n1")
    cache.add_pod(pod_info("p", cpu="1", node_name="n1"))  # the watch reports the binding
    info = cache.node("n1")
    assert info is not None and info.requested.milli_cpu == 1000 and len(info.pods) == 1
    assert not cache.is_assumed("default/p")
    cache.forget("default/p")  # a late failure report must not undo a confirmed pod
    assert info.requested.milli_cpu == 1000


def test_pod_bound_elsewhere_than_assumed_moves() -> None:
    cache = SchedulerCache()
    cache.add_node(node("n1"))
    cache.add_node(node("n2"))
    cache.assume(pod_info("p", cpu="1"), "n1")
    cache.add_pod(pod_info("p", cpu="1", node_name="n2"))  # another scheduler won the race
    n1, n2 = cache.node("n1"), cache.node("n2")
    assert n1 is not None and n2 is not None
    assert (n1.requested.milli_cpu, n2.requested.milli_cpu) == (0, 1000)


def test_pods_on_unknown_nodes_are_kept_but_not_offered() -> None:
    cache = SchedulerCache()
    cache.add_pod(pod_info("early", cpu="1", node_name="late-node"))
    assert cache.nodes() == []
    cache.add_node(node("late-node", cpu="1"))
    (info,) = cache.nodes()
    assert info.requested.milli_cpu == 1000


@pytest.mark.parametrize(
    ("change", "plugins"),
    [
        ({"labels": {"zz": "cxk"}}, {"NodeAffinity", "NodeName", "VolumeBinding"}),
        ({"annotations": {"kubelite.io/local-path-root": "/x"}}, {"VolumeBinding"}),
        ({"taints": [{"key": "k", "effect": "NoSchedule"}]}, {"TaintToleration"}),
        ({"unschedulable": True}, {"NodeUnschedulable"}),
        ({"ready": False}, {"NodeReady"}),
        ({"cpu": "8"}, {"NodeResourcesFit"}),
    ],
)
def test_node_update_names_the_plugins_it_may_help(change: dict, plugins: set[str]) -> None:
    cache = SchedulerCache()
    assert cache.add_node(node("n1")) is NODE_ADD
    event = cache.update_node(node("n1", **change))
    assert event is not None and event.plugins == frozenset(plugins)


def test_heartbeat_like_node_update_is_no_event() -> None:
    cache = SchedulerCache()
    cache.add_node(node("n1"))
    version = cache.static_version
    beat = node("n1")
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-01-01T00:00:00Z"
    assert cache.update_node(beat) is None
    assert cache.static_version == version


def test_relabelled_node_invalidates_remembered_static_verdicts() -> None:
    cache = SchedulerCache()
    cache.add_node(node("node1"))
    cache.add_node(node("node2"))
    fw = build_framework(SchedulerConfig())
    picky = pod_info("picky", node_selector={"zz": "cxk"})
    with pytest.raises(FitError):
        fw.schedule(picky, cache.nodes(), nodes_version=cache.static_version)
    cache.update_node(node("node2", labels={"zz": "cxk"}))
    result = fw.schedule(picky, cache.nodes(), nodes_version=cache.static_version)
    assert result.node == "node2"


def test_config_file_disables_and_reweights(tmp_path: Path) -> None:
    path = tmp_path / "scheduler.yaml"
    path.write_text(
        """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 30
podInitialBackoffSeconds: 2
podMaxBackoffSeconds: 20
profiles:
- schedulerName: my-scheduler
  plugins:
    multiPoint:
      disabled: [{name: SelectorSpread}, {name: NodeReady}]
    score:
      enabled: [{name: NodeAffinity, weight: 7}]
"""
    )
    cfg = load_config(path)
    assert cfg.percentage_of_nodes_to_score == 30
    assert (cfg.pod_initial_backoff_seconds, cfg.pod_max_backoff_seconds) == (2, 20)
    profile = cfg.profile
    assert profile.scheduler_name == "my-scheduler"
    assert "NodeReady" not in profile.filters and "NodeAffinity" in profile.filters
    assert dict(profile.scores) == {
        "TaintToleration": 3,
        "NodeAffinity": 7,
        "NodeResourcesLeastAllocated": 1,
    }
    fw = build_framework(cfg)
    assert "NodeReady" not in fw.plugin_names


def test_config_star_disables_every_default(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "profiles:\n- plugins:\n    filter:\n      disabled: [{name: '*'}]\n      enabled: [{name: NodeResourcesFit}]\n"
    )
    assert load_config(path).profile.filters == ("NodeResourcesFit",)


@pytest.mark.parametrize(
    "text",
    [
        "profiles:\n- plugins:\n    filter:\n      enabled: [{name: NoSuchPlugin}]\n",
        "kind: Deployment\n",
        "profiles: [{}, {}]\n",
        "podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 1\n",
        "percentageOfNodesToScore: 101\n",
        "bogusField: 1\n",
    ],
)
def test_bad_config_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises((ValueError, ValidationError)):
        load_config(path)
