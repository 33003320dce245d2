"""Reading a component's Prometheus ``/metrics`` page, for tests.

Synchronous (``http.client``) so it reads the same from fixtures and tests; a test awaits the
state it cares about on a watch first, then reads the counter — a metric is read, never polled.
The page is parsed with prometheus-client's own parser (``text_string_to_metric_families``),
so a page that does not parse fails the read.
"""

from __future__ import annotations

import http.client
import ssl
from urllib.parse import urlsplit

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

__all__ = ["metric", "samples", "scrape"]


def scrape(url: str, /, *, path: str = "/metrics", context: ssl.SSLContext | None = None) -> str:
    """The body of ``url``'s ``path`` (``https`` with ``context``); raises on a non-200."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port
    conn = (
        http.client.HTTPSConnection(host, port, timeout=10, context=context)
        if parts.scheme == "https"
        else http.client.HTTPConnection(host, port, timeout=10)
    )
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read().decode()
    finally:
        conn.close()
    if response.status != 200:
        raise AssertionError(f"GET {url}{path}: {response.status} {body[:200]}")
    return body


def samples(page: str) -> list[Sample]:
    """Every sample on a ``/metrics`` page (it must parse)."""
    return [s for family in text_string_to_metric_families(page) for s in family.samples]


def metric(url: str, name: str, /, **labels: str) -> float:
    """The value of ``name{labels}`` on ``url``/metrics (0 when the series is absent).

    ``labels`` must name the series exactly (all its labels)."""
    for sample in samples(scrape(url)):
        if sample.name == name and sample.labels == labels:
            return sample.value
    return 0.0
