"""A kubelet's main client (pod-status writers, pod workers' reads) holds at most
``API_CONNECTIONS`` requests, so connections, at once — a sim kubelet hosting thousands of
nodes too, whose writers would otherwise open one connection per request in flight (what
``ClientConfig.max_connections`` does is shown in
tests/client/test_client_keeps_max_connections_for_requests_and_none_for_watches.py). The
heartbeat client keeps its own budget: the nodes' heartbeat gate; the event client its own
``EVENT_CONNECTIONS``, and Kubernetes' event rate limit (50/s, burst 100) per node hosted.
"""

from __future__ import annotations

from dataclasses import replace

from services.kubelet.main import parse_args
from services.kubelet.service import (
    API_CONNECTIONS,
    EVENT_CONNECTIONS,
    HEARTBEATS_IN_FLIGHT,
    KubeletService,
)


async def test_a_sim_kubelet_of_5000_nodes_caps_its_main_client() -> None:
    options, _ = parse_args(
        ["--runtime", "sim", "--nodes", "5000", "--server", "http://127.0.0.1:1"]
    )
    assert options.client.max_connections is None, "the flags set no cap: the service does"
    service = KubeletService(options)
    assert service.client.config.max_connections == API_CONNECTIONS == HEARTBEATS_IN_FLIGHT
    assert service.heartbeat_client.config.max_connections is None, "bounded by its gate"
    events = service.event_client.config
    assert (events.max_connections, events.qps, events.burst) == (
        EVENT_CONNECTIONS,
        250_000,
        500_000,
    )
    assert service.client.config.server == "http://127.0.0.1:1"


async def test_a_cap_given_in_the_options_is_kept() -> None:
    options, _ = parse_args(["--runtime", "sim", "--nodes", "2"])
    options = replace(options, client=options.client.with_options(max_connections=8))
    assert KubeletService(options).client.config.max_connections == 8


async def test_one_nodes_events_are_limited_as_kubernetes_kubelets() -> None:
    options, _ = parse_args(["--runtime", "sim", "--server", "http://127.0.0.1:1"])
    events = KubeletService(options).event_client.config
    assert (events.qps, events.burst) == (50, 100)
