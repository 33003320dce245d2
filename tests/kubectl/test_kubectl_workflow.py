"""The rest of the seed's kubectl walkthrough: watch, describe, scale, and the PATH dispatcher."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests import factories
from tests.kubectl.harness import Kubectl

pytestmark = pytest.mark.kubectl


def test_get_pods_watch_prints_each_change(kubectl: Kubectl) -> None:
    kubectl.apply(factories.namespace("watching"))
    watch = kubectl.start("get", "pods", "-w", "-n", "watching")
    try:
        kubectl.apply(factories.sleeper("watched", image="busybox:1.36"), "-n", "watching")
        line = watch.next_line()
        if line.startswith("NAME"):
            assert line.split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
            line = watch.next_line()
        assert line.split()[:4] == ["watched", "0/1", "Pending", "0"]

        kubectl("label", "pod", "watched", "seen=yes", "-n", "watching")
        changed = watch.next_line()
        assert changed.split()[:3] == ["watched", "0/1", "Pending"]
        assert not changed.startswith("NAME")  # headers only once
    finally:
        watch.stop()


def test_describe_pod_lists_its_events(kubectl: Kubectl) -> None:
    kubectl.apply(factories.namespace("describing"))
    kubectl.apply(
        factories.sleeper("described", image="busybox:1.36", nodeName="node1"),
        "-n",
        "describing",
    )
    uid = kubectl(
        "get", "pod", "described", "-n", "describing", "-o", "jsonpath={.metadata.uid}"
    ).stdout
    event = factories.event("described.1", pod="described", namespace="describing")
    event["involvedObject"]["uid"] = uid
    kubectl("create", "-f", "-", stdin=factories.yaml_of(event))

    out = kubectl("describe", "pod", "described", "-n", "describing").stdout
    assert re.search(r"^Name:\s+described$", out, re.M)
    assert re.search(r"^Node:\s+node1", out, re.M)
    assert re.search(r"^Status:\s+Pending$", out, re.M)
    assert "Image:      busybox:1.36" in out
    events = out.split("Events:", 1)[1]
    assert re.search(r"Normal\s+Started\s+\S+\s+kubelet\s+Started container main", events)


def test_scale_replication_controller(kubectl: Kubectl) -> None:
    kubectl.apply(factories.namespace("scaling"))
    kubectl.apply(
        factories.rc("scaled", replicas=1, image="nginx:1.27", container_name="web"),
        "-n",
        "scaling",
    )
    done = kubectl("scale", "rc", "scaled", "--replicas=3", "-n", "scaling")
    assert done.stdout.strip() == "replicationcontroller/scaled scaled"
    row = kubectl("get", "rc", "scaled", "-n", "scaling").stdout.splitlines()[1].split()
    assert row[:2] == ["scaled", "3"]


def test_path_dispatcher_picks_a_websocket_capable_kubectl(kubectl: Kubectl) -> None:
    """The ``kubectl`` on the PATH asks /version and runs the kubectl matching its minor."""
    done = subprocess.run(
        ["kubectl", f"--server={kubectl.server}", f"--cache-dir={kubectl.cache_dir}", "version"],
        capture_output=True,
        text=True,
        env=kubectl.env(),
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Server Version: v1.32.0-kubelite" in done.stdout
    client = re.search(r"Client Version: v1\.(\d+)", done.stdout)
    assert client is not None and int(client.group(1)) >= 30
