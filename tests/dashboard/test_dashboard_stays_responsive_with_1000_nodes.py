"""With 1,000 nodes the dashboard still answers: it draws only the rows in view, and a new pod
still appears and can be opened.

Only the apiserver runs (Node objects need no kubelet). The page is opened first, so the 1,000
creations reach it as 1,000 watch events, which it must absorb in batches (one draw per
animation frame) rather than redrawing the table per event. Then:

* the node count reads 1,000 and the table holds a few dozen row elements, not 1,000
  (virtualised); scrolled to the end it shows the last node;
* a pod created afterwards appears, and clicking it opens its trace (one step, "created").

No timing is asserted: "responds" means each of these interactions completes within
Playwright's generous timeouts on a loaded host.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from kubernetes import client as k8s

from kubelite.testing import ComponentProcess
from tests.dashboard.conftest import Open, playwright_sync
from tests.factories import pod

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

expect = playwright_sync.expect

NODES = 1000
WAIT_MS = 60_000
"""A thousand creations and their watch events, on a host shared by other test workers."""


def _node(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def test_thousand_nodes_are_drawn_virtualised_and_a_new_pod_still_opens(
    kubelite_apiserver: ComponentProcess, dashboard: Open
) -> None:
    config = k8s.Configuration(host=kubelite_apiserver.url)
    config.connection_pool_maxsize = 8
    core = k8s.CoreV1Api(k8s.ApiClient(config))
    page = dashboard(kubelite_apiserver.url)

    names = [f"n{i:04d}" for i in range(NODES)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda name: core.create_node(_node(name)), names))

    expect(page.locator("#nodes-count")).to_have_text(f"{NODES} nodes", timeout=WAIT_MS)
    rows = page.locator("#nodes .vrow:not([hidden])")
    expect(rows.first).to_have_attribute("data-key", names[0])
    assert rows.count() < 100, "the node table draws every row, not the rows in view"

    page.locator("#nodes .vscroll").evaluate("el => { el.scrollTop = el.scrollHeight; }")
    expect(page.locator(f'#nodes .vrow[data-key="{names[-1]}"]')).to_be_visible(timeout=WAIT_MS)

    core.create_namespaced_pod("default", pod("late"))
    row = page.locator('#pods .vrow[data-key="default/late"]')
    expect(row).to_be_visible(timeout=WAIT_MS)
    row.click()
    expect(page.locator('#trace .step[data-step="created"]')).to_have_count(1, timeout=WAIT_MS)
