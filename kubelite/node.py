"""``kubelite node``: one node's agents — its kubelet and its proxy — under one supervisor.

Why: a Kubernetes node runs the kubelet and kube-proxy side by side, both in the node's network
namespace. Under ``kubelite up`` every kubelet shares the host's loopback, so one
``kubelite proxy`` serves them all; a node of its own (a compose container) needs its own proxy
in its own namespace, and a second container joined to the node's namespace makes Podman refuse
the node's re-creation after a crash. So the node container runs this: the kubelet and the
proxy as two child processes (``python -m services.kubelet`` / ``services.proxy``, command
lines from ``kubelite.commands``), supervised as ``kubelite up`` supervises its children
(``kubelite.supervision``): each line they print prefixed with ``kubelet`` or ``proxy``, a child
that dies restarted after a growing back-off, SIGTERM/SIGINT passed on to both, and this
process exits once both have stopped.

Flags: every kubelet flag, as ``kubelite kubelet`` takes it, plus the proxy's own — its health
server (``--proxy-healthz-bind-address``, ``--proxy-healthz-port``: 127.0.0.1:10256, kube-proxy's
port), ``--proxy-nodeport-addresses`` and ``--proxy-kubeconfig`` (its own identity; default: the
kubelet's connection flags). Everything else the proxy needs comes from the kubelet's flags: the
same apiserver (``--server``, ``--kubeconfig``, ``--context``, ``--token``,
``--certificate-authority``, ``--insecure-skip-tls-verify``), ``--hostname-override`` = the
node's name, the same log flags. The kubelet's own parser checks its flags before anything
starts, so a typo fails at once with exit code 2.

What it does not guarantee: it is a supervisor, not an init: when it is a container's PID 1, the
processes re-parented to it (a pod's shim whose kubelet was restarted) are not reaped by it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import uvloop

from component.flags import port_or_off
from kubelite import commands
from kubelite.supervision import COLOURS, Child, Supervision
from services.kubelet import main as kubelet_main

__all__ = ["NodeOptions", "NodeSupervisor", "build_parser", "main", "parse_options"]

PROXY_HEALTH_PORT = 10256
"""kube-proxy's healthz port."""
STOP_ORDER = (("kubelet", "proxy"),)
"""The two agents do not depend on each other: both are stopped at once."""
STOP_GRACE = {"kubelet": 20.0}
"""A kubelet told ``--stop-pods-on-exit`` stops its pods (10 s each at most) before it exits."""


@dataclass(frozen=True, slots=True)
class NodeOptions:
    node_name: str
    kubelet: commands.Command
    proxy: commands.Command
    colour: bool


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubelite node",
        description="One node's agents: the kubelet and the proxy as supervised child "
        "processes. Takes every flag of `kubelite kubelet` (see its --help) plus the proxy "
        "flags below; the proxy uses the kubelet's apiserver connection and log flags and "
        "serves the kubelet's --node-name.",
        allow_abbrev=False,  # a prefix of a kubelet flag must reach the kubelet's parser
    )
    p.add_argument(
        "--proxy-healthz-bind-address",
        default="127.0.0.1",
        metavar="ADDRESS",
        help="address of the proxy's /healthz (default: %(default)s)",
    )
    p.add_argument(
        "--proxy-healthz-port",
        type=port_or_off,
        default=PROXY_HEALTH_PORT,
        metavar="PORT",
        help="port of the proxy's /healthz; 0 picks any free port (printed on its ready "
        "line), -1 serves none (default: %(default)s)",
    )
    p.add_argument(
        "--proxy-nodeport-addresses",
        default=None,
        metavar="IP[,IP...]",
        help="addresses the proxy opens node ports on (default: the proxy's, 127.0.0.1)",
    )
    p.add_argument(
        "--proxy-kubeconfig",
        default=None,
        metavar="PATH",
        help="the proxy's own kubeconfig (default: the kubelet's connection flags)",
    )
    p.add_argument(
        "--no-color", action="store_true", help="never colour the log prefixes (default: on a TTY)"
    )
    return p


def _connection(kubelet: argparse.Namespace, *, kubeconfig: str | None) -> list[str]:
    """The kubelet's apiserver connection flags, for the proxy (``--kubeconfig`` replaced by
    ``kubeconfig`` when given)."""
    values = {
        "kubeconfig": kubeconfig or kubelet.kubeconfig,
        "context": kubelet.context,
        "token": kubelet.token,
        "certificate-authority": kubelet.certificate_authority,
    }
    flags = [f"--{name}={value}" for name, value in values.items() if value is not None]
    if kubelet.insecure_skip_tls_verify:
        flags.append("--insecure-skip-tls-verify")
    return flags


def parse_options(argv: Sequence[str]) -> NodeOptions:
    own, kubelet_argv = build_parser().parse_known_args(list(argv))
    kubelet = kubelet_main.build_parser().parse_args(kubelet_argv)  # exits 2 on a bad flag
    proxy = commands.proxy(
        server=kubelet.server,
        hostname_override=kubelet.node_name,
        nodeport_addresses=own.proxy_nodeport_addresses,
        healthz_bind_address=own.proxy_healthz_bind_address,
        healthz_port=own.proxy_healthz_port,
        log_level=kubelet.log_level,
        verbosity=kubelet.verbosity,
        extra=_connection(kubelet, kubeconfig=own.proxy_kubeconfig),
    )
    return NodeOptions(
        node_name=kubelet.node_name,
        kubelet=commands.Command("kubelet", tuple(kubelet_argv)),
        proxy=proxy,
        colour=not own.no_color and sys.stdout.isatty(),
    )


class NodeSupervisor(Supervision):
    """Runs the node's kubelet and proxy until asked to stop."""

    def __init__(self, opts: NodeOptions) -> None:
        children = [
            Child(name="kubelet", kind="kubelet", argv=opts.kubelet.python(), colour=COLOURS[0]),
            Child(name="proxy", kind="proxy", argv=opts.proxy.python(), colour=COLOURS[1]),
        ]
        super().__init__(
            children, own_name="node", whole="the node", colour=opts.colour, stop_grace=STOP_GRACE
        )
        self.opts = opts

    async def run(self) -> int:
        self.handle_signals()
        self.say(f"starting the kubelet and the proxy of node {self.opts.node_name}")
        for child in self.children:
            self._start(child)
        try:
            await self._stopping.wait()
        finally:
            self.say("stopping the kubelet and the proxy")
            await self.stop_in_order(STOP_ORDER)
            self.say("stopped")
        return self.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_options(sys.argv[1:] if argv is None else argv)
    return uvloop.run(NodeSupervisor(opts).run())


if __name__ == "__main__":
    sys.exit(main())
