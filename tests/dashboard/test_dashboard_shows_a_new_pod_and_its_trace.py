"""The dashboard at ``/ui`` shows a pod the moment the API has it, and draws its trace.

A whole control plane runs (apiserver, scheduler, controller-manager, a sim kubelet hosting two
nodes); the page, in headless Chromium, lists then watches nodes, pods and events. The test
creates a pod with the official client and waits for its row.

On "within a second" (issue 22): the time from the create's answer to the row being visible is
measured and reported (``record_property`` and the test's output), and asserted only against a
generous bound. The page draws at most one animation frame after the watch event arrives, so on
an idle machine it is well under a second; on CI eight test workers share two cores and the
browser's renderer can be descheduled for seconds, so a one-second assertion would flake
without telling us anything about the dashboard. The ten-second bound still fails when the
page re-lists or polls instead of watching.

Then the pod is selected: the trace swimlane appears with a lane per component that touched
the pod — the apiserver that stored it, the scheduler that bound it, the kubelet that ran it.
A screenshot is saved (``KUBELITE_DASHBOARD_SCREENSHOT=path`` saves it there too: that is how
``docs/dashboard.png`` is made).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from kubernetes import client as k8s

from kubelite.testing import ControlPlane
from tests.dashboard.conftest import Open, playwright_sync
from tests.factories import container, deployment, pod

pytestmark = pytest.mark.e2e

expect = playwright_sync.expect

SHOW_BOUND_MS = 10_000
"""How long the row may take to appear (see the module docstring): ten times the issue's
second, for a loaded two-core CI host."""

SETTLE_MS = 60_000
"""Scheduling and starting a sim pod on a loaded host (the trace waits for the kubelet)."""


def _core(url: str) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(k8s.ApiClient(k8s.Configuration(host=url)))


def _apps(url: str) -> k8s.AppsV1Api:
    return k8s.AppsV1Api(k8s.ApiClient(k8s.Configuration(host=url)))


def test_new_pod_appears_and_its_trace_has_a_lane_per_component(
    kubelite_control_plane: ControlPlane,
    dashboard: Open,
    tmp_path: Path,
    record_property: pytest.RecordProperty,
) -> None:
    url = kubelite_control_plane.url
    page = dashboard(url)
    expect(page.locator("#nodes-count")).to_have_text("2 nodes", timeout=SETTLE_MS)

    _core(url).create_namespaced_pod("default", pod("web", container("main", "nginx:1.27")))
    created = time.monotonic()
    row = page.locator('#pods .vrow[data-key="default/web"]')
    expect(row).to_be_visible(timeout=SHOW_BOUND_MS)
    shown = time.monotonic() - created
    record_property("seconds_from_create_to_row", round(shown, 3))
    print(f"\nthe new pod's row appeared {shown:.3f}s after the create was answered")

    expect(row).to_contain_text("Running", timeout=SETTLE_MS)
    row.click()
    expect(page.locator("#detail-title")).to_have_text("default/web")
    for component in ("apiserver", "scheduler", "kubelet"):
        lane = page.locator(f"#trace svg.swimlane .lane[data-component='{component}']")
        expect(lane).to_have_count(1, timeout=SETTLE_MS)
    expect(page.locator('#trace .step[data-step="container started"]')).to_have_count(
        1, timeout=SETTLE_MS
    )
    expect(page.locator("#logs")).not_to_be_empty()

    # A Deployment's pod adds the controller-manager's lane (its ReplicaSet made the pod).
    _apps(url).create_namespaced_deployment(
        "default", deployment("shop", replicas=1, image="nginx:1.27")
    )
    shop = page.locator('#pods .vrow[data-key^="default/shop-"]')
    expect(shop).to_contain_text("Running", timeout=SETTLE_MS)
    shop.click()
    expect(
        page.locator("#trace svg.swimlane .lane[data-component='controller-manager']")
    ).to_have_count(1, timeout=SETTLE_MS)
    expect(page.locator('#trace .step[data-step="container started"]')).to_have_count(
        1, timeout=SETTLE_MS
    )

    shot = page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
    if target := os.environ.get("KUBELITE_DASHBOARD_SCREENSHOT"):
        Path(target).write_bytes(shot)
