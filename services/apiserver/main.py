"""``kubelite apiserver`` / ``python -m services.apiserver``: flags -> options -> the runtime.

Parses the flags into ``ServerOptions`` and hands ``service.ApiServer`` to the component
runtime (``component.run``: uvloop, signals, exit codes). With ``--insecure-port 0`` (or
``--secure-port 0``) the OS picks a free port; the line ``kubelite: apiserver api listening on
http://ADDRESS:PORT`` (``secure ... https://``) on stderr names it (``component.ready``), then
``kubelite: apiserver ready``. -1 closes a port. The insecure port binds only loopback unless
``--insecure-allow-remote``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import component
from api.addresses import PREFERRED_ADDRESS_TYPES
from api.registry import REGISTRY
from component.flags import (
    add_log_flags,
    duration,
    format_duration,
    log_flags,
    port_or_off,
)
from services.apiserver.audit_policy import load_policy
from services.apiserver.connections import HEADER_TIMEOUT, default_max_connections
from services.apiserver.context import ServerOptions
from services.apiserver.encryption import load_encryption_config
from services.apiserver.service import ApiServer
from services.apiserver.service_account_tokens import DEFAULT_ISSUER
from services.apiserver.service_allocation import (
    DEFAULT_CLUSTER_IP_RANGE,
    DEFAULT_NODE_PORT_RANGE,
)
from services.apiserver.serving import is_loopback

__all__ = ["build_parser", "main", "parse_args"]


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid count {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative (0 means no limit)")
    return value


def _boolean(text: str) -> bool:
    if text.lower() in ("true", "1"):
        return True
    if text.lower() in ("false", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubelite apiserver",
        description="The kubelite apiserver: Kubernetes REST and watch over a pluggable store.",
    )
    p.add_argument(
        "--store",
        metavar="URL",
        help="store URL: sqlite:///path.db, sqlite://relative.db or memory:// "
        "(default: sqlite:///<state-dir>/kubelite.db)",
    )
    p.add_argument(
        "--state-dir",
        type=Path,
        default=Path(".kubelite"),
        help="state directory (default: ./.kubelite)",
    )
    p.add_argument(
        "--insecure-bind-address",
        default="127.0.0.1",
        metavar="ADDRESS",
        help="address of the plain-HTTP port, where every request is a superuser without "
        "authentication; only a loopback address unless --insecure-allow-remote "
        "(default: 127.0.0.1)",
    )
    p.add_argument(
        "--insecure-allow-remote",
        action="store_true",
        help="allow a non-loopback --insecure-bind-address (a warning is logged at every start)",
    )
    p.add_argument(
        "--insecure-port",
        type=port_or_off,
        default=8080,
        metavar="PORT",
        help="plain-HTTP port; 0 picks any free port (printed on the ready line), -1 closes "
        "it (default: 8080)",
    )
    p.add_argument(
        "--bind-address",
        default="0.0.0.0",
        metavar="ADDRESS",
        help="address of the secure port (default: 0.0.0.0)",
    )
    p.add_argument(
        "--secure-port",
        type=port_or_off,
        default=6443,
        metavar="PORT",
        help="HTTPS port with authentication; 0 picks any free port, -1 turns it off "
        "(default: 6443)",
    )
    tls = p.add_argument_group("TLS and authentication (the secure port)")
    tls.add_argument(
        "--cert-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="where a CA, serving certificate and service-account key are made when "
        "--tls-cert-file is not given (default: <state-dir>/pki)",
    )
    tls.add_argument("--tls-cert-file", type=Path, default=None, metavar="FILE")
    tls.add_argument("--tls-private-key-file", type=Path, default=None, metavar="FILE")
    tls.add_argument(
        "--client-ca-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="client certificates signed by this CA authenticate as CN (user) in O (groups)",
    )
    tls.add_argument(
        "--token-auth-file",
        type=Path,
        default=None,
        metavar="FILE",
        help='static bearer tokens: CSV lines token,user,uid[,"group1,group2"]',
    )
    tls.add_argument(
        "--service-account-key-file",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="PEM public (or private) keys that verify service-account tokens; repeatable",
    )
    tls.add_argument(
        "--service-account-signing-key-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="PEM RSA private key the TokenRequest API signs tokens with",
    )
    tls.add_argument(
        "--service-account-issuer",
        default=DEFAULT_ISSUER,
        metavar="URL",
        help=f"the iss claim of service-account tokens (default: {DEFAULT_ISSUER})",
    )
    tls.add_argument(
        "--api-audiences",
        type=lambda text: tuple(a for a in text.split(",") if a),
        default=(),
        metavar="AUD1,AUD2",
        help="audiences a token must name one of (default: the issuer)",
    )
    tls.add_argument(
        "--kubelet-client-certificate",
        type=Path,
        default=None,
        metavar="FILE",
        help="the client certificate shown to kubelets (logs, exec, port-forward); with it "
        "or --kubelet-certificate-authority kubelets are reached over https",
    )
    tls.add_argument("--kubelet-client-key", type=Path, default=None, metavar="FILE")
    tls.add_argument(
        "--kubelet-certificate-authority",
        type=Path,
        default=None,
        metavar="FILE",
        help="the CA kubelets' serving certificates must chain to (default: not verified)",
    )
    tls.add_argument(
        "--kubelet-preferred-address-types",
        type=lambda text: tuple(t.strip() for t in text.split(",") if t.strip()),
        default=PREFERRED_ADDRESS_TYPES,
        metavar="TYPE1,TYPE2",
        help="the Node address types a kubelet is dialled at, in order; the certificate "
        "of an https kubelet must name the address chosen "
        f"(default: {','.join(PREFERRED_ADDRESS_TYPES)})",
    )
    p.add_argument(
        "--authorization-mode",
        type=lambda text: tuple(m.strip() for m in text.split(",") if m.strip()),
        default=("Node", "RBAC"),
        metavar="MODE1,MODE2",
        help="the authorizers asked on the secure port, in order, after system:masters: Node "
        "(a kubelet reads what its pods reference) and RBAC (default: Node,RBAC)",
    )
    tls.add_argument(
        "--anonymous-auth",
        type=_boolean,
        default=True,
        metavar="true|false",
        help="requests without credentials are system:anonymous (authorization decides); "
        "false answers them 401 (default: true)",
    )
    p.add_argument(
        "--event-ttl",
        type=duration,
        default=3600.0,
        metavar="DURATION",
        help="how long Events are kept after their last update (default: 1h)",
    )
    p.add_argument(
        "--compaction-window",
        type=int,
        default=10_000,
        help="store revisions kept for watch resumption and paging (default: 10000)",
    )
    p.add_argument(
        "--compaction-interval",
        type=duration,
        default=300.0,
        metavar="DURATION",
        help="time between store compactions (default: 5m)",
    )
    p.add_argument(
        "--watch-cache-size",
        type=int,
        default=10_000,
        help="events kept in memory per resource for resuming watches (default: 10000)",
    )
    p.add_argument(
        "--max-requests-inflight",
        type=_count,
        default=400,
        help="read-only requests served at once; more are answered 429 with Retry-After. "
        "Watches and other long-running requests are not counted. 0 = no limit (default: 400)",
    )
    p.add_argument(
        "--max-mutating-requests-inflight",
        type=_count,
        default=200,
        help="mutating requests (POST, PUT, PATCH, DELETE) served at once; more are answered "
        "429 with Retry-After. 0 = no limit (default: 200)",
    )
    p.add_argument(
        "--enable-priority-and-fairness",
        type=_boolean,
        default=True,
        metavar="true|false",
        help="API Priority and Fairness: classify requests by the FlowSchemas and share the "
        "two limits above among the PriorityLevelConfigurations' seats and queues; false "
        "enforces the two in-flight limits as separate pools (default: true)",
    )
    p.add_argument(
        "--request-header-timeout",
        type=duration,
        default=HEADER_TIMEOUT,
        metavar="DURATION",
        help="time a connection gets to send a whole request head, and to stay idle between "
        f"requests, before it is closed (default: {format_duration(HEADER_TIMEOUT)}, "
        "kube-apiserver's)",
    )
    p.add_argument(
        "--max-open-connections",
        type=_count,
        default=None,
        help="open client connections; more are answered 503 with Retry-After and closed. "
        "0 = no limit (default: sized from the open-files limit, "
        f"now {default_max_connections()})",
    )
    p.add_argument(
        "--service-cluster-ip-range",
        default=DEFAULT_CLUSTER_IP_RANGE,
        metavar="CIDR",
        help="IPv4 range ClusterIPs are allocated from; its first address is the kubernetes "
        f"Service's. Keep it on loopback, apart from the pod ranges "
        f"(default: {DEFAULT_CLUSTER_IP_RANGE})",
    )
    p.add_argument(
        "--service-node-port-range",
        default=DEFAULT_NODE_PORT_RANGE,
        metavar="FIRST-LAST",
        help=f"ports NodePorts are allocated from (default: {DEFAULT_NODE_PORT_RANGE})",
    )
    p.add_argument(
        "--service-repair-interval",
        type=duration,
        default=180.0,
        metavar="DURATION",
        help="time between passes of the ClusterIP/NodePort repair loop, which releases "
        "allocations no Service holds and records ones a Service holds unrecorded (default: 3m)",
    )
    p.add_argument(
        "--service-leak-grace",
        type=duration,
        default=60.0,
        metavar="DURATION",
        help="age an allocation no Service holds must reach before the repair loop releases "
        "it (default: 1m)",
    )
    p.add_argument(
        "--audit-policy-file",
        type=Path,
        metavar="FILE",
        help="audit.k8s.io/v1 Policy deciding which requests are logged and how much of each; "
        "without it nothing is audited",
    )
    p.add_argument(
        "--audit-log-path",
        metavar="PATH",
        help="file the audit events are appended to, one JSON line each; - for stdout",
    )
    p.add_argument(
        "--audit-log-maxsize",
        type=_count,
        default=0,
        metavar="MB",
        help="rotate the audit log when it reaches this many MiB; 0 = never (default: 0)",
    )
    p.add_argument(
        "--audit-log-maxbackup",
        type=_count,
        default=0,
        metavar="N",
        help="rotated audit logs to keep; 0 = all (default: 0)",
    )
    p.add_argument(
        "--encryption-provider-config",
        type=Path,
        metavar="FILE",
        help="apiserver.config.k8s.io/v1 EncryptionConfiguration: which resources are "
        "encrypted in the store, and with which keys (aesgcm, aescbc, identity)",
    )
    add_log_flags(p)
    p.add_argument("--access-log", action="store_true", help="log every request")
    return p


def parse_args(argv: Sequence[str]) -> tuple[ServerOptions, argparse.Namespace]:
    parser = build_parser()
    args = parser.parse_args(list(argv))
    if not args.insecure_allow_remote and not is_loopback(args.insecure_bind_address):
        parser.error(
            f"--insecure-bind-address {args.insecure_bind_address}: the insecure port has no "
            "authentication; bind it to loopback, or pass --insecure-allow-remote"
        )
    store_url = args.store or f"sqlite://{(args.state_dir / 'kubelite.db').resolve()}"
    try:
        options = ServerOptions(
            store_url=store_url,
            state_dir=args.state_dir,
            bind_address=args.insecure_bind_address,
            port=args.insecure_port,
            secure_port=args.secure_port,
            secure_bind_address=args.bind_address,
            cert_dir=args.cert_dir,
            tls_cert_file=args.tls_cert_file,
            tls_private_key_file=args.tls_private_key_file,
            client_ca_file=args.client_ca_file,
            token_auth_file=args.token_auth_file,
            service_account_key_files=tuple(args.service_account_key_file),
            service_account_signing_key_file=args.service_account_signing_key_file,
            service_account_issuer=args.service_account_issuer,
            api_audiences=args.api_audiences,
            anonymous_auth=args.anonymous_auth,
            authorization_modes=args.authorization_mode,
            kubelet_client_certificate=args.kubelet_client_certificate,
            kubelet_client_key=args.kubelet_client_key,
            kubelet_certificate_authority=args.kubelet_certificate_authority,
            kubelet_preferred_address_types=args.kubelet_preferred_address_types,
            event_ttl=args.event_ttl,
            compaction_window=args.compaction_window,
            compaction_interval=args.compaction_interval,
            watch_cache_capacity=args.watch_cache_size,
            max_requests_inflight=args.max_requests_inflight,
            max_mutating_requests_inflight=args.max_mutating_requests_inflight,
            enable_priority_and_fairness=args.enable_priority_and_fairness,
            request_header_timeout=args.request_header_timeout,
            max_open_connections=args.max_open_connections,
            service_cluster_ip_range=args.service_cluster_ip_range,
            service_node_port_range=args.service_node_port_range,
            service_repair_interval=args.service_repair_interval,
            service_leak_grace=args.service_leak_grace,
            audit_policy_file=args.audit_policy_file,
            audit_log_path=args.audit_log_path,
            audit_log_maxsize=args.audit_log_maxsize,
            audit_log_maxbackup=args.audit_log_maxbackup,
            encryption_provider_config=args.encryption_provider_config,
        )
        if options.audit_policy_file is not None:
            load_policy(options.audit_policy_file)
        if options.encryption_provider_config is not None:
            load_encryption_config(options.encryption_provider_config, REGISTRY)
    except ValueError as exc:
        parser.error(str(exc))
    return options, args


def main(argv: Sequence[str] | None = None) -> int:
    options, args = parse_args(sys.argv[1:] if argv is None else argv)
    component.setup_logging(log_flags(args).level)
    return component.run(
        lambda: ApiServer(options, access_log=args.access_log), component="apiserver"
    )
