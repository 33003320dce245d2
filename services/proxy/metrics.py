"""The proxy's ``/metrics``: kube-proxy's metric names (``pkg/proxy/metrics``).

* ``kubeproxy_sync_proxy_rules_duration_seconds``: one sync of a Service's routes into the
  forwarding table (1 ms doubling 15 times). kube-proxy syncs every rule at once; kubelite
  syncs the one Service an event touched, so each observation is one Service's;
* ``kubeproxy_sync_proxy_rules_last_timestamp_seconds``: when the last sync ended (Unix time);
* ``kubeproxy_sync_proxy_rules_service_changes_total`` and
  ``kubeproxy_sync_proxy_rules_endpoint_changes_total``: Service and EndpointSlice events seen.

Served on the health port (``--healthz-port``, 10256) where kube-proxy has a metrics port of
its own (``--metrics-bind-address``, 10249). Not here: network programming latency, iptables
or IPVS counters (there are no kernel rules).
"""

from __future__ import annotations

import time

from component.metrics import Metrics, exponential_buckets

__all__ = ["ProxyMetrics"]


class ProxyMetrics:
    def __init__(self) -> None:
        self.metrics = Metrics()
        m = self.metrics
        self.sync_duration = m.histogram(
            "kubeproxy_sync_proxy_rules_duration_seconds",
            "SyncProxyRules latency in seconds",
            buckets=exponential_buckets(0.001, 2, 15),
        )
        self.last_sync = m.gauge(
            "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
            "The last time proxy rules were successfully synced",
        )
        self.service_changes = m.counter(
            "kubeproxy_sync_proxy_rules_service_changes_total",
            "Cumulative proxy rules Service changes",
        )
        self.endpoint_changes = m.counter(
            "kubeproxy_sync_proxy_rules_endpoint_changes_total",
            "Cumulative proxy rules Endpoint changes",
        )

    def synced(self, started: float) -> None:
        """A sync that began at ``started`` (``time.perf_counter()``) has ended."""
        self.sync_duration.observe(time.perf_counter() - started)
        self.last_sync.set(time.time())

    def render(self) -> str:
        return self.metrics.render()
