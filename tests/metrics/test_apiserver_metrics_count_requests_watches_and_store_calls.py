"""A real apiserver's ``/metrics``: kube-apiserver's names, parsed by prometheus-client, moving
with the requests made — and, on the secure port, readable by ``system:monitoring`` only.

Each counter is read after the test has seen the state it counts on its own watch (the
ConfigMap's ADDED event): a metric is read once, never polled.
"""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from api.errors import NotFound
from api.registry import REGISTRY
from client.rest import ApiClient
from kubelite.testing import ComponentProcess
from kubelite.testing.metrics import metric, samples, scrape
from kubelite.testing.waiting import Watcher

pytestmark = pytest.mark.e2e

CONFIGMAPS = REGISTRY.require("", "ConfigMap")
CORE = {"dry_run": "", "group": "", "version": "v1", "component": "apiserver"}
"""The labels every core-group request of these tests shares."""


def requests(api: ComponentProcess, verb: str, scope: str, code: str, **labels: str) -> float:
    """``apiserver_request_total`` of ConfigMap requests."""
    return metric(
        api.url, "apiserver_request_total",
        **CORE, verb=verb, resource="configmaps", subresource="", scope=scope, code=code,
        **labels,
    )  # fmt: skip


async def test_requests_watch_events_and_store_calls_move_kube_apiservers_metrics(
    apiserver_process: Callable[..., ComponentProcess],
) -> None:
    api = apiserver_process(store="memory://")
    page = scrape(api.url)
    names = {s.name for s in samples(page)}  # parses, or the read fails
    assert {
        "apiserver_current_inflight_requests",
        "apiserver_watch_cache_capacity",
        "apiserver_storage_objects",
        "etcd_request_duration_seconds_count",
    } <= names
    created_before = requests(api, "POST", "resource", "201")
    store_creates_before = metric(
        api.url, "etcd_request_duration_seconds_count", operation="create", type="configmaps"
    )
    sent_before = metric(
        api.url, "apiserver_watch_events_total", group="", version="v1", kind="ConfigMap"
    )
    stored_before = metric(api.url, "apiserver_storage_objects", resource="configmaps")

    async with ApiClient(server=api.url) as client:
        async with Watcher(client, CONFIGMAPS, namespace="default") as configmaps:
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "counted"}}
            await client.create(CONFIGMAPS, body, namespace="default")
            await configmaps.wait_until(
                lambda objs: any(o["metadata"]["name"] == "counted" for o in objs),
                what="the ConfigMap's ADDED event",
            )
            with pytest.raises(NotFound):
                await client.get(CONFIGMAPS, "missing", namespace="default")

            assert requests(api, "POST", "resource", "201") == created_before + 1
            assert requests(api, "GET", "resource", "404") == 1
            assert requests(api, "LIST", "namespace", "200") >= 1  # the Watcher's list
            assert metric(
                api.url, "apiserver_request_duration_seconds_count",
                **CORE, verb="POST", resource="configmaps", subresource="", scope="resource",
            ) == created_before + 1  # fmt: skip
            # the Watcher's watch is open now, and got the ADDED event
            assert metric(
                api.url, "apiserver_longrunning_requests",
                group="", version="v1", component="apiserver", verb="WATCH",
                resource="configmaps", subresource="", scope="namespace",
            ) == 1  # fmt: skip
            assert metric(
                api.url, "apiserver_watch_events_total", group="", version="v1", kind="ConfigMap"
            ) >= sent_before + 1  # fmt: skip
            assert metric(
                api.url, "etcd_request_duration_seconds_count",
                operation="create", type="configmaps",
            ) == store_creates_before + 1  # fmt: skip
            assert (
                metric(api.url, "apiserver_storage_objects", resource="configmaps")
                == stored_before + 1
            )


def _get(url: str, *, context: ssl.SSLContext, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), context=context, timeout=30
        ) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as err:
        with err:
            return err.code, ""


def test_on_the_secure_port_metrics_need_system_monitoring_and_probes_need_nothing(
    apiserver_process: Callable[..., ComponentProcess], tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(
        'alice-token,alice,uid-1,"dev"\nscraper-token,scraper,uid-2,"system:monitoring"\n'
    )
    api = apiserver_process(store="memory://", secure=True, args=[f"--token-auth-file={tokens}"])
    assert api.state_dir is not None
    context = ssl.create_default_context(cafile=api.state_dir / "pki" / "ca.crt")
    metrics = f"https://127.0.0.1:{api.port_of('secure')}/metrics"

    assert _get(metrics, context=context, token="alice-token")[0] == 403
    assert _get(metrics, context=context)[0] == 403  # anonymous
    assert _get(metrics.replace("/metrics", "/livez"), context=context)[0] == 200
    status, page = _get(metrics, context=context, token="scraper-token")
    assert status == 200
    counted = {
        (s.labels["code"], s.value)
        for s in samples(page)
        if s.name == "apiserver_request_total" and s.labels["subresource"] == "/metrics"
    }
    assert counted == {("403", 2.0)}  # the refusals; this scrape is counted once it ends
