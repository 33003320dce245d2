"""The lines a component prints when it is listening and when it is ready: a contract.

Why: launchers (``kubelite up``, ``kubelite.testing``, the benchmarks) start components with
port 0 and must learn the ports the OS picked, and when the component is up, without polling.
So, on stderr, flushed, one line each::

    kubelite: <component> <endpoint> listening on <scheme>://<host>:<port>
    kubelite: <component> ready

* ``component``: ``apiserver``, ``scheduler``, ``controller-manager``, ``kubelet``, ``proxy``,
  ``dns`` or ``front``;
* ``endpoint``: ``api`` (the apiserver's plain-HTTP port), ``secure`` (its HTTPS port),
  ``health`` (the health/metrics
  server), ``server`` (the kubelet's logs/exec server, 10250), ``dns`` (the DNS server's
  UDP and TCP port), ``front`` (the front's TCP port before the apiservers);
* ``scheme``: ``http`` for HTTP servers, ``https`` for TLS ones, ``dns`` for the DNS server,
  ``tcp`` for a plain TCP relay (the front);
* a ``listening`` line is printed once the socket is bound, for each endpoint;
* ``ready`` once every endpoint listens and the component has started its work (its tasks run;
  it has not necessarily synced with the apiserver yet — ``/readyz`` says that).

``host`` is the address bound (``0.0.0.0`` when bound to every interface; an IPv6 address in
brackets). ``parse_line`` is the one reader; change both sides together, and tell every
launcher.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

__all__ = [
    "COMPONENTS",
    "ENDPOINTS",
    "Listening",
    "Ready",
    "announce_listening",
    "announce_ready",
    "listening_line",
    "parse_line",
    "ready_line",
]

COMPONENTS = ("apiserver", "scheduler", "controller-manager", "kubelet", "proxy", "dns", "front")
ENDPOINTS = ("api", "secure", "health", "server", "dns", "front")

_COMPONENT = "|".join(re.escape(c) for c in COMPONENTS)
_LISTENING = re.compile(
    rf"kubelite: (?P<component>{_COMPONENT}) (?P<endpoint>{'|'.join(ENDPOINTS)}) listening on "
    r"(?P<scheme>https|http|dns|tcp)://(?:\[(?P<ipv6>[^\]]+)\]|(?P<host>[^\s:/\[\]]+)):(?P<port>\d+)$"
)
_READY = re.compile(rf"kubelite: (?P<component>{_COMPONENT}) ready$")


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


@dataclass(frozen=True, slots=True)
class Listening:
    component: str
    endpoint: str
    host: str
    port: int
    scheme: str = "http"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{_url_host(self.host)}:{self.port}"


@dataclass(frozen=True, slots=True)
class Ready:
    component: str


def listening_line(
    *, component: str, endpoint: str, host: str, port: int, scheme: str = "http"
) -> str:
    if component not in COMPONENTS or endpoint not in ENDPOINTS:
        raise ValueError(f"no ready line for component {component!r}, endpoint {endpoint!r}")
    return f"kubelite: {component} {endpoint} listening on {scheme}://{_url_host(host)}:{port}"


def ready_line(component: str) -> str:
    if component not in COMPONENTS:
        raise ValueError(f"no ready line for component {component!r}")
    return f"kubelite: {component} ready"


def announce_listening(
    *, component: str, endpoint: str, host: str, port: int, scheme: str = "http"
) -> None:
    line = listening_line(
        component=component, endpoint=endpoint, host=host, port=port, scheme=scheme
    )
    print(line, file=sys.stderr, flush=True)


def announce_ready(component: str) -> None:
    print(ready_line(component), file=sys.stderr, flush=True)


def parse_line(line: str | bytes) -> Listening | Ready | None:
    """The contract line in ``line`` (anywhere in it, so a prefixed log line works), or None."""
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    text = text.rstrip("\r\n")
    if (match := _LISTENING.search(text)) is not None:
        return Listening(
            component=match["component"],
            endpoint=match["endpoint"],
            host=match["ipv6"] or match["host"],
            port=int(match["port"]),
            scheme=match["scheme"],
        )
    if (match := _READY.search(text)) is not None:
        return Ready(component=match["component"])
    return None
