"""Reading one sample of a component's Prometheus ``/metrics`` page, for tests.

Synchronous (``http.client``) so it reads the same from fixtures and tests; a test awaits the
state it cares about on a watch first, then reads the counter — a metric is read, never polled.
"""

from __future__ import annotations

import http.client
from urllib.parse import urlsplit

__all__ = ["metric"]


def metric(url: str, name: str, /, **labels: str) -> float:
    """The value of ``name{labels}`` on ``url``/metrics (0 when the series is absent)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=10)
    try:
        conn.request("GET", "/metrics")
        body = conn.getresponse().read().decode()
    finally:
        conn.close()
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    series = f"{name}{{{want}}}" if want else name
    for line in body.splitlines():
        key, _, value = line.rpartition(" ")
        if key == series:
            return float(value)
    return 0.0
