"""``kubelite front`` / ``python -m services.front``: flags -> options -> the runtime.

Parses the front's flags into ``FrontOptions`` and hands ``service.FrontService`` to the
component runtime (``component.run``): ``--backends host:port[,...]`` (the apiservers),
``--bind-address``/``--port`` (where clients connect; 0 picks a free port, named by the
``kubelite: front front listening on tcp://...`` line), ``--health-scheme`` (how the
backends' ``/readyz`` is asked: ``https`` for secure ports, ``http`` for plain ones) and the
shared health and log flags.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import component
from component.flags import (
    BindAddress,
    add_health_flags,
    add_log_flags,
    duration,
    health_address,
    log_flags,
    port,
)
from services.front.service import HEALTH_PORT, Backend, FrontOptions, FrontService

__all__ = ["build_parser", "main", "parse_args"]


def _backends(text: str) -> tuple[Backend, ...]:
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        host, sep, number = part.rpartition(":")
        if not sep or not host:
            raise argparse.ArgumentTypeError(f"{part!r} is not host:port")
        out.append(Backend(host=host.strip("[]"), port=port(number)))
    if not out:
        raise argparse.ArgumentTypeError("expected at least one backend")
    return tuple(out)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubelite front",
        description="An L4 front for several apiservers (as kubeadm's HA guide puts HAProxy "
        "before them): relays each TCP connection to a healthy backend, checked by /readyz.",
    )
    p.add_argument(
        "--backends",
        type=_backends,
        required=True,
        metavar="HOST:PORT[,HOST:PORT...]",
        help="the apiservers to relay to",
    )
    p.add_argument(
        "--bind-address", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    p.add_argument(
        "--port", type=port, default=6443, help="port to listen on; 0 picks one (default 6443)"
    )
    p.add_argument(
        "--health-scheme",
        choices=("https", "http"),
        default="https",
        help="how the backends' /readyz is asked (default https; the certificate is not "
        "verified: the check asks whether a backend answers, not who it is)",
    )
    p.add_argument(
        "--check-interval",
        type=duration,
        default=1.0,
        metavar="DURATION",
        help="time between health checks of each backend (default 1s)",
    )
    add_health_flags(p, default_port=HEALTH_PORT)
    add_log_flags(p)
    return p


def parse_args(argv: Sequence[str]) -> tuple[FrontOptions, argparse.Namespace]:
    parser = build_parser()
    args = parser.parse_args(list(argv))
    if args.check_interval <= 0:
        parser.error("--check-interval must be positive")
    options = FrontOptions(
        backends=args.backends,
        listen=BindAddress(host=args.bind_address, port=args.port),
        health=health_address(args),
        health_scheme=args.health_scheme,
        check_interval=args.check_interval,
    )
    return options, args


def main(argv: Sequence[str] | None = None) -> int:
    options, args = parse_args(sys.argv[1:] if argv is None else argv)
    component.setup_logging(log_flags(args).level)
    return component.run(lambda: FrontService(options), component="front")
