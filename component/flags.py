"""The flags every component shares, and their one grammar.

Why: a person who learned one component's flags knows them all. Each helper here adds one group
of flags to an ``argparse`` parser, with the same names, metavars and help text in every
component, and turns the parsed namespace into a frozen, typed value.

The grammar:

* **Durations** (``parse_duration``): Go's ``time.ParseDuration`` syntax — a sequence of decimal
  numbers each with a unit ``h``, ``m``, ``s``, ``ms``, ``us`` (``µs``) or ``ns``: ``15s``,
  ``500ms``, ``1m30s``, ``1h``, ``2.5s``. A bare number is seconds (``40``, ``0.5``). Negative
  durations are refused.
* **Ports** (``port``): 0-65535, where **0 means "any free port"** — the port the OS picked is
  printed on the component's ready line (``component.ready``) and logged. Ports of servers that
  may be turned off (``port_or_off``) also take **-1, "off"**.
* **Logging** (``add_log_flags``): ``--log-level DEBUG|INFO|WARNING|ERROR`` (any case; default
  INFO) and Kubernetes' verbosity ``-v N`` / ``-v=N`` / ``--v=N``. Verbosity maps onto levels as
  klog's does in spirit: ``-v`` 0 to 3 is INFO (klog's V(0)-V(3): steady-state information),
  4 and above is DEBUG (klog's V(4)+: debug detail). When both are given the more verbose wins,
  so ``--log-level WARNING -v 4`` logs DEBUG.
* **Apiserver URLs** (``add_server_flag``): ``--server URL`` (alias ``--master``), one or more
  URLs, comma-separated and/or repeated: ``--server http://a:8080,http://b:8080 --server
  http://c:8080``. Clients use the first for now.
* **Health server** (``add_health_flags``): ``--healthz-bind-address`` and ``--healthz-port``.
* **Leader election** (``add_leader_election_flags``): ``--leader-elect[=true|false]``,
  ``--no-leader-elect`` and the ``--leader-elect-*`` Lease timings (durations).

Not here: flags only one component has (they live in that component's ``main.py``), and the
kubeconfig flags that travel with ``--server`` (``client.kubeconfig.add_client_arguments``).
"""

from __future__ import annotations

import argparse
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LOG_LEVELS",
    "PORT_OFF",
    "VERBOSITY_DEBUG",
    "BindAddress",
    "LeaderElectionFlags",
    "LogFlags",
    "add_health_flags",
    "add_leader_election_flags",
    "add_log_flags",
    "add_server_flag",
    "boolean",
    "duration",
    "format_duration",
    "health_address",
    "leader_election_flags",
    "log_flags",
    "parse_duration",
    "port",
    "port_or_off",
    "verbosity_level",
]

# -- durations ---------------------------------------------------------------------------------

_UNIT_SECONDS = {
    "h": 3600.0,
    "m": 60.0,
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,  # U+00B5 micro sign, as Go accepts
    "μs": 1e-6,  # U+03BC Greek mu, as Go accepts
    "ns": 1e-9,
}
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_BARE = re.compile(_NUMBER)
# "ms" before "m" and "s": the alternation is tried left to right
_PART = re.compile(rf"({_NUMBER})(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Seconds in ``text``: a Go duration (``1m30s``, ``500ms``) or a bare number of seconds.

    Raises ``ValueError`` naming the accepted forms.
    """
    s = text.strip()
    if _BARE.fullmatch(s):
        return float(s)
    total, pos = 0.0, 0
    while pos < len(s):
        match = _PART.match(s, pos)
        if match is None:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if not s or pos != len(s):
        raise ValueError(
            f"invalid duration {text!r}: use e.g. 500ms, 15s, 1m30s or 1h "
            "(a bare number is seconds)"
        )
    return total


def duration(text: str) -> float:
    """``argparse`` type for a duration flag (see ``parse_duration``)."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def format_duration(seconds: float) -> str:
    """The shortest Go-style spelling of ``seconds`` that parses back to it: ``1m30s``,
    ``500ms``, ``0s``; sub-millisecond values as plain seconds (``0.0001s``)."""
    if seconds < 0:
        raise ValueError(f"negative duration {seconds}")
    millis = round(seconds * 1000)
    if abs(millis / 1000 - seconds) > 1e-9:
        return f"{seconds:g}s"
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs, millis = divmod(rest, 1000)
    parts = [f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (secs, "s"), (millis, "ms"))
             if n]  # fmt: skip
    return "".join(parts) or "0s"


# -- ports and addresses -----------------------------------------------------------------------

PORT_OFF = -1
"""The value of a ``port_or_off`` flag that turns its server off."""


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid {what} {text!r}: not an integer") from None


def port(text: str) -> int:
    """``argparse`` type: a TCP port, 0-65535; 0 means any free port."""
    value = _int(text, "port")
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port {value} is out of range 0-65535 (0: any free port)")
    return value


def port_or_off(text: str) -> int:
    """``argparse`` type: a TCP port, 0-65535 (0: any free port), or -1: the server is off."""
    value = _int(text, "port")
    if not PORT_OFF <= value <= 65535:
        raise argparse.ArgumentTypeError(
            f"port {value} is out of range: 0-65535 (0: any free port) or -1 (off)"
        )
    return value


@dataclass(frozen=True, slots=True)
class BindAddress:
    """Where a server listens: ``host`` and ``port`` (0: any free port; -1: not at all)."""

    host: str
    port: int

    @property
    def enabled(self) -> bool:
        return self.port != PORT_OFF


# -- booleans ----------------------------------------------------------------------------------


def boolean(text: str) -> bool:
    """``argparse`` type: ``true``/``false`` (also ``1``/``0``, ``yes``/``no``), any case."""
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


# -- logging -----------------------------------------------------------------------------------

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
VERBOSITY_DEBUG = 4
"""``-v`` at or above this logs DEBUG; below it, INFO (klog's V(4) is debug detail)."""


def verbosity_level(verbosity: int) -> int:
    """The ``logging`` level ``-v verbosity`` asks for (see the module docstring)."""
    return logging.DEBUG if verbosity >= VERBOSITY_DEBUG else logging.INFO


def _log_level(text: str) -> str:
    level = text.strip().upper()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(
            f"invalid log level {text!r}: choose from {', '.join(LOG_LEVELS)}"
        )
    return level


def _verbosity(text: str) -> int:
    value = _int(text, "verbosity")
    if value < 0:
        raise argparse.ArgumentTypeError(f"verbosity {value} is negative")
    return value


@dataclass(frozen=True, slots=True)
class LogFlags:
    log_level: str = "INFO"
    verbosity: int | None = None

    @property
    def level(self) -> int:
        """The effective ``logging`` level: the more verbose of ``--log-level`` and ``-v``."""
        named = logging.getLevelNamesMapping()[self.log_level]
        if self.verbosity is None:
            return named
        return min(named, verbosity_level(self.verbosity))


def add_log_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("logging")
    group.add_argument(
        "--log-level",
        type=_log_level,
        default="INFO",
        metavar="LEVEL",
        help=f"log level: {', '.join(LOG_LEVELS)}, any case (default: INFO)",
    )
    group.add_argument(
        "-v",
        "--v",
        dest="verbosity",
        type=_verbosity,
        default=None,
        metavar="N",
        help=f"Kubernetes-style verbosity: 0-{VERBOSITY_DEBUG - 1} logs INFO, "
        f"{VERBOSITY_DEBUG} and above DEBUG; the more verbose of -v and --log-level wins",
    )


def log_flags(args: argparse.Namespace) -> LogFlags:
    return LogFlags(log_level=args.log_level, verbosity=args.verbosity)


# -- the apiserver's URLs ----------------------------------------------------------------------


class _ServerUrls(argparse.Action):
    """``--server`` URL[,URL...], repeatable: the URLs in order, as a list."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        urls = list(getattr(namespace, self.dest, None) or [])
        given = [part.strip() for part in str(values).split(",")]
        if not any(given):
            raise argparse.ArgumentError(self, "expected at least one URL")
        for url in filter(None, given):
            if not url.startswith(("http://", "https://")):
                raise argparse.ArgumentError(self, f"{url!r} is not an http:// or https:// URL")
            urls.append(url)
        setattr(namespace, self.dest, urls)


def add_server_flag(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--server`` / ``--master``: the apiserver URL(s); parsed into ``args.server``, a list
    (``None`` when not given)."""
    parser.add_argument(
        "--server",
        "--master",
        dest="server",
        action=_ServerUrls,
        default=None,
        metavar="URL[,URL...]",
        help="apiserver URL(s), comma-separated and/or repeated; the next is used when one "
        "cannot be reached (overrides the kubeconfig's server; default: "
        "http://127.0.0.1:8080 when no kubeconfig is given)",
    )


# -- the health server -------------------------------------------------------------------------


def add_health_flags(
    parser: argparse.ArgumentParser, *, default_port: int, default_address: str = "127.0.0.1"
) -> None:
    group = parser.add_argument_group("health server")
    group.add_argument(
        "--healthz-bind-address",
        default=default_address,
        metavar="ADDRESS",
        help="address of the health server: /healthz, and /livez, /readyz, /metrics where "
        "the component serves them (default: %(default)s)",
    )
    group.add_argument(
        "--healthz-port",
        type=port_or_off,
        default=default_port,
        metavar="PORT",
        help="port of the health server; 0 picks any free port (printed on the component's "
        "ready line), -1 turns the server off (default: %(default)s)",
    )


def health_address(args: argparse.Namespace) -> BindAddress:
    return BindAddress(host=args.healthz_bind_address, port=args.healthz_port)


# -- leader election ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LeaderElectionFlags:
    enabled: bool
    resource_name: str
    resource_namespace: str
    lease_duration: float
    renew_deadline: float
    retry_period: float


def add_leader_election_flags(parser: argparse.ArgumentParser, *, resource_name: str) -> None:
    """Kubernetes' ``--leader-elect*`` flags, with client-go's default timings."""
    group = parser.add_argument_group("leader election")
    group.add_argument(
        "--leader-elect",
        type=boolean,
        nargs="?",
        const=True,
        default=True,
        metavar="true|false",
        help="campaign for the Lease and act only while holding it (default: true)",
    )
    group.add_argument(
        "--no-leader-elect",
        dest="leader_elect",
        action="store_false",
        help="same as --leader-elect=false",
    )
    group.add_argument(
        "--leader-elect-lease-duration",
        type=duration,
        default=15.0,
        metavar="DURATION",
        help="how long a Lease not renewed keeps others from taking it (default: 15s)",
    )
    group.add_argument(
        "--leader-elect-renew-deadline",
        type=duration,
        default=10.0,
        metavar="DURATION",
        help="how long the leader keeps trying to renew before it stops leading (default: 10s)",
    )
    group.add_argument(
        "--leader-elect-retry-period",
        type=duration,
        default=2.0,
        metavar="DURATION",
        help="time between attempts to acquire or renew the Lease (default: 2s)",
    )
    group.add_argument(
        "--leader-elect-resource-name",
        default=resource_name,
        metavar="NAME",
        help="name of the Lease (default: %(default)s)",
    )
    group.add_argument(
        "--leader-elect-resource-namespace",
        default="kube-system",
        metavar="NAMESPACE",
        help="namespace of the Lease (default: %(default)s)",
    )


def leader_election_flags(args: argparse.Namespace) -> LeaderElectionFlags:
    return LeaderElectionFlags(
        enabled=args.leader_elect,
        resource_name=args.leader_elect_resource_name,
        resource_namespace=args.leader_elect_resource_namespace,
        lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period,
    )
