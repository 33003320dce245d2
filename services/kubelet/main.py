"""``kubelite kubelet`` / ``python -m services.kubelet``: flags -> options -> the runtime.

Parses the kubelet's flags into ``KubeletOptions`` and hands ``service.KubeletService`` (every
node this process hosts, their logs/exec server and health server) to the component runtime
(``component.run``). ``--port 0`` picks a free port for the kubelet server, named by the
``kubelite: kubelet server listening on ...`` line; ``--healthz-port -1`` turns the separate
health server off (``/healthz`` is also served on the kubelet server's port). The server's TLS
and who may use it are the kubelet's flags of the same names (``auth.py``): ``--tls-cert-file``,
``--tls-private-key-file``, ``--client-ca-file``, ``--authentication-token-webhook``,
``--authorization-mode=AlwaysAllow|Webhook``, ``--anonymous-auth`` and the webhook cache TTLs.
"""

from __future__ import annotations

import argparse
import ipaddress
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

import component
from client.kubeconfig import DEFAULT_SERVER, ClientConfig, KubeconfigError, add_client_arguments
from component.flags import (
    add_health_flags,
    add_log_flags,
    boolean,
    duration,
    health_address,
    log_flags,
    port,
)
from component.lifecycle import STOP_DEADLINE
from services.kubelet.auth import (
    AUTHORIZATION_MODES,
    AUTHORIZED_TTL,
    TOKEN_CACHE_TTL,
    UNAUTHORIZED_TTL,
    KubeletAuthOptions,
)
from services.kubelet.pod_dns import DEFAULT_CLUSTER_DOMAIN, ClusterDns
from services.kubelet.runtime.images import DEFAULT_CATALOG
from services.kubelet.runtime.sandbox import SANDBOX_MODES
from services.kubelet.service import STOP_PODS_GRACE, KubeletOptions, KubeletService

__all__ = ["KubeletOptions", "build_parser", "main", "parse_args"]

HEALTH_PORT = 10248
"""The kubelet's healthz port in Kubernetes."""


def _labels(text: str) -> dict[str, str]:
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"invalid label {part!r}: want key=value")
        out[key] = value
    return out


def _taints(text: str) -> tuple[dict[str, str], ...]:
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        kv, sep, effect = part.rpartition(":")
        if not sep or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise argparse.ArgumentTypeError(
                f"invalid taint {part!r}: want key[=value]:NoSchedule|PreferNoSchedule|NoExecute"
            )
        key, _, value = kv.partition("=")
        taint = {"key": key, "effect": effect}
        if value:
            taint["value"] = value
        out.append(taint)
    return tuple(out)


def _ips(text: str) -> tuple[str, ...]:
    """``--cluster-dns``: comma-separated IP addresses."""
    ips = tuple(filter(None, (item.strip() for item in text.split(","))))
    for ip in ips:
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{ip!r} is not an IP address") from None
    return ips


def _resolve_node_ip(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        pass
    try:
        return socket.gethostbyname(text)
    except OSError as exc:
        raise SystemExit(f"kubelite kubelet: --node-ip {text!r} does not resolve: {exc}") from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubelite kubelet", description="The kubelite node agent: runs the pods of its node."
    )
    add_client_arguments(p)
    p.add_argument("--node-name", default=socket.gethostname(), help="this node's name")
    p.add_argument("--runtime", choices=("process", "sim"), default="process")
    p.add_argument(
        "--state-dir", type=Path, help="per-pod state (default ./.kubelite/kubelet-<node>)"
    )
    p.add_argument(
        "--address",
        default="127.0.0.1",
        metavar="ADDRESS",
        help="address the kubelet server (logs, exec) binds (default: 127.0.0.1)",
    )
    p.add_argument(
        "--port",
        type=port,
        default=10250,
        metavar="PORT",
        help="kubelet server port; 0 picks any free port (printed on the ready line) "
        "(default: 10250)",
    )
    p.add_argument(
        "--node-ip",
        default="127.0.0.1",
        help="the node's InternalIP, or a host name resolved once at start (in a container: "
        "the container's own name, so the apiserver reaches this kubelet for logs and exec)",
    )
    p.add_argument(
        "--node-labels", type=_labels, default={}, help="k=v[,k=v...] added at registration"
    )
    p.add_argument(
        "--register-with-taints", type=_taints, default=(), help="key[=value]:Effect[,...]"
    )
    p.add_argument("--cpu", help="cpu capacity (default: the host's)")
    p.add_argument("--memory", help="memory capacity (default: the host's)")
    p.add_argument("--max-pods", type=int, default=110)
    p.add_argument(
        "--pod-cidr", help="pod IP range inside 127.0.0.0/8 (default from the node name)"
    )
    p.add_argument("--image-catalog", type=Path, default=DEFAULT_CATALOG)
    p.add_argument(
        "--sandbox",
        choices=SANDBOX_MODES,
        default="auto",
        help="give each container its own namespaces and view of the filesystem (process "
        "runtime): auto = when a probe at start succeeds (needs root), on = refuse to start "
        "without, off = never (default: auto)",
    )
    p.add_argument("--nodes", type=int, default=1, help="simulated nodes to host (sim runtime)")
    p.add_argument(
        "--sim-start-delay",
        type=duration,
        default=0.0,
        metavar="DURATION",
        help="time until a simulated container is Running (sim runtime) (default: 0s)",
    )
    p.add_argument(
        "--node-lease-renew-interval", type=duration, default=10.0, metavar="DURATION",
        help="time between renewals of the node's Lease (default: 10s)",
    )  # fmt: skip
    p.add_argument(
        "--node-status-update-frequency", type=duration, default=10.0, metavar="DURATION",
        help="time between node status posts (default: 10s)",
    )  # fmt: skip
    p.add_argument(
        "--stop-pods-on-exit",
        action="store_true",
        help="on SIGTERM/SIGINT also stop every container (default: they keep running)",
    )
    p.add_argument(
        "--cluster-dns",
        type=_ips,
        default=(),
        metavar="IP[,IP...]",
        help="the cluster DNS server(s): the nameservers of ClusterFirst pods (default: none; "
        "such pods then use the node's resolver)",
    )
    p.add_argument(
        "--cluster-domain",
        default=DEFAULT_CLUSTER_DOMAIN,
        help="the cluster's DNS domain: ClusterFirst pods search <ns>.svc.<domain>, "
        "svc.<domain> and <domain> (default: %(default)s)",
    )
    _add_auth_flags(p)
    add_health_flags(p, default_port=HEALTH_PORT)
    add_log_flags(p)
    return p


def _add_auth_flags(p: argparse.ArgumentParser) -> None:
    """The kubelet server's TLS, authentication and authorization flags (Kubernetes')."""
    auth = p.add_argument_group("TLS, authentication and authorization (the kubelet server)")
    auth.add_argument(
        "--tls-cert-file",
        type=Path,
        metavar="FILE",
        help="serve --port over TLS with this certificate (default: plain HTTP, no auth)",
    )
    auth.add_argument("--tls-private-key-file", type=Path, metavar="FILE")
    auth.add_argument(
        "--client-ca-file",
        type=Path,
        metavar="FILE",
        help="client certificates signed by this CA authenticate as CN (user) in O (groups)",
    )
    auth.add_argument(
        "--authentication-token-webhook",
        type=boolean,
        nargs="?",
        const=True,
        default=False,
        metavar="true|false",
        help="check bearer tokens with the apiserver's TokenReview API (default: false)",
    )
    auth.add_argument(
        "--authentication-token-webhook-cache-ttl",
        type=duration,
        default=TOKEN_CACHE_TTL,
        metavar="DURATION",
        help="how long a TokenReview's answer is kept (default: 2m)",
    )
    auth.add_argument(
        "--authorization-mode",
        choices=AUTHORIZATION_MODES,
        default="AlwaysAllow",
        help="Webhook: ask the apiserver's SubjectAccessReview API about every request "
        "(default: AlwaysAllow)",
    )
    auth.add_argument(
        "--authorization-webhook-cache-authorized-ttl",
        type=duration,
        default=AUTHORIZED_TTL,
        metavar="DURATION",
        help="how long an allowed SubjectAccessReview is kept (default: 5m)",
    )
    auth.add_argument(
        "--authorization-webhook-cache-unauthorized-ttl",
        type=duration,
        default=UNAUTHORIZED_TTL,
        metavar="DURATION",
        help="how long a denied SubjectAccessReview is kept (default: 30s)",
    )
    auth.add_argument(
        "--anonymous-auth",
        type=boolean,
        default=None,
        metavar="true|false",
        help="a request without credentials is system:anonymous (authorization decides); "
        "false answers it 401 (default: false with the token webhook or Webhook "
        "authorization, else true)",
    )


def _auth_options(a: argparse.Namespace) -> KubeletAuthOptions:
    """``KubeletAuthOptions`` from the flags; ``ValueError`` when they do not fit together.

    Kubernetes' own ``--anonymous-auth`` defaults to true everywhere (kubeadm turns it off);
    here it defaults to off as soon as the apiserver is asked about requests at all."""
    delegated = a.authentication_token_webhook or a.authorization_mode == "Webhook"
    return KubeletAuthOptions(
        tls_cert_file=a.tls_cert_file,
        tls_private_key_file=a.tls_private_key_file,
        client_ca_file=a.client_ca_file,
        token_webhook=a.authentication_token_webhook,
        token_cache_ttl=a.authentication_token_webhook_cache_ttl,
        authorization_mode=a.authorization_mode,
        authorized_ttl=a.authorization_webhook_cache_authorized_ttl,
        unauthorized_ttl=a.authorization_webhook_cache_unauthorized_ttl,
        anonymous=not delegated if a.anonymous_auth is None else a.anonymous_auth,
    )


def parse_args(argv: Sequence[str]) -> tuple[KubeletOptions, argparse.Namespace]:
    parser = build_parser()
    a = parser.parse_args(list(argv))
    if a.runtime != "sim" and a.nodes != 1:
        parser.error("--nodes needs --runtime sim")
    try:
        client = ClientConfig.from_args(a, default_server=DEFAULT_SERVER).with_options(
            user_agent="kubelite-kubelet"
        )
        auth = _auth_options(a)
    except (KubeconfigError, ValueError) as exc:
        parser.error(str(exc))
    options = KubeletOptions(
        client=client,
        node_name=a.node_name,
        runtime=a.runtime,
        state_dir=a.state_dir,
        address=a.address,
        port=a.port,
        node_ip=_resolve_node_ip(a.node_ip),
        node_labels=a.node_labels,
        taints=a.register_with_taints,
        cpu=a.cpu,
        memory=a.memory,
        max_pods=a.max_pods,
        pod_cidr=a.pod_cidr,
        image_catalog=a.image_catalog,
        sandbox=a.sandbox,
        nodes=a.nodes,
        sim_start_delay=a.sim_start_delay,
        lease_interval=a.node_lease_renew_interval,
        status_interval=a.node_status_update_frequency,
        stop_pods_on_exit=a.stop_pods_on_exit,
        health=health_address(a),
        cluster_dns=ClusterDns(servers=a.cluster_dns, domain=a.cluster_domain.strip(".")),
        auth=auth,
    )
    return options, a


def main(argv: Sequence[str] | None = None) -> int:
    options, args = parse_args(sys.argv[1:] if argv is None else argv)
    component.setup_logging(log_flags(args).level)
    # stopping pods gives each container STOP_PODS_GRACE after SIGTERM, all in parallel
    deadline = STOP_DEADLINE + (STOP_PODS_GRACE if options.stop_pods_on_exit else 0.0)
    return component.run(
        lambda: KubeletService(options), component="kubelet", stop_deadline=deadline
    )
