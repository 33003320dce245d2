"""How each component is started: one argv source of truth.

Why: ``kubelite up``, ``docker-compose.yml``, the tests and the benchmarks all start the same
components; when each spelled its command lines by hand, a flag renamed in one place broke
the others. Here, one function per component turns typed options into a ``Command``:

* ``apiserver(...)``, ``scheduler(...)``, ``controller_manager(...)``, ``kubelet(...)``,
  ``proxy(...)``, ``dns(...)``; ``node(kubelet(...), ...)``: a node's kubelet and proxy under
  one supervisor (``kubelite node``, what each compose node runs);
* ``certs_init(...)``: the PKI the compose file's one-shot ``pki`` service makes;
* ``etcd_member(...)``: one etcd member (``kubelite etcd member``, which execs etcd);
  ``front(...)``: the L4 front before several apiservers (``kubelite front``);
* ``Command.python()``: ``[sys.executable, "-m", "services.<name>", *flags]`` — what
  ``kubelite up``, the tests and the benchmarks run;
* ``Command.kubelite()``: ``["<sub-command>", *flags]`` — what follows ``kubelite`` (the
  compose file's ``command:`` lists, checked equal by ``tests/e2e/test_compose_file.py``).

Every option defaults to ``None``: the flag is left out and the component's own default
applies. Flags are spelled ``--name=value`` (so ``--healthz-port=-1`` cannot be read as a
flag of its own); durations in Go form (``15s``, ``1m30s``); ``extra`` is appended as given,
and since argparse lets a later flag win, it can override anything above it.

Not here: parsing (each component's ``main.build_parser`` owns its flags), and supervising
(``kubelite.up``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from component.flags import format_duration

__all__ = [
    "MODULES",
    "Command",
    "apiserver",
    "certs_init",
    "controller_manager",
    "dns",
    "etcd_member",
    "front",
    "kubelet",
    "node",
    "proxy",
    "scheduler",
]

MODULES = {
    "apiserver": "services.apiserver",
    "scheduler": "services.scheduler",
    "controller-manager": "services.controller_manager",
    "kubelet": "services.kubelet",
    "proxy": "services.proxy",
    "dns": "services.dns",
    "node": "kubelite.node",
    "certs": "kubelite.cluster_pki",
    "etcd": "kubelite.etcd_cli",
    "front": "services.front",
}
"""Sub-command (and ready-line component name) -> the module ``python -m`` runs (``node`` prints
no ready line of its own: its kubelet and proxy print theirs; ``etcd`` becomes etcd itself,
whose own log line "ready to serve client requests" says it is ready)."""

Value = str | int | float | bool | Path | Sequence[str] | None


@dataclass(frozen=True, slots=True)
class Command:
    """One component's command line: ``component`` (its sub-command) and its flags."""

    component: str
    args: tuple[str, ...]

    def python(self, *, python: str = sys.executable) -> list[str]:
        """``python -m services.<name> ...``: as ``kubelite up`` starts it."""
        return [python, "-m", MODULES[self.component], *self.args]

    def kubelite(self) -> list[str]:
        """``<sub-command> ...``: what follows ``kubelite`` (the compose file's ``command:``)."""
        return [self.component, *self.args]


def _flags(*pairs: tuple[str, Value], durations: Sequence[str] = ()) -> list[str]:
    """``--name=value`` for each pair whose value is not None; a True boolean is a bare
    ``--name`` (its false value spelled by the caller); a sequence is comma-joined."""
    out: list[str] = []
    for name, value in pairs:
        if value is None or value is False:
            continue
        if value is True:
            out.append(f"--{name}")
        elif name in durations and isinstance(value, int | float):
            out.append(f"--{name}={format_duration(float(value))}")
        elif isinstance(value, str | int | float | Path):
            out.append(f"--{name}={value}")
        else:
            out.append(f"--{name}={','.join(value)}")
    return out


def _log(log_level: str | None, verbosity: int | None) -> list[str]:
    return _flags(("log-level", log_level.upper() if log_level else None), ("v", verbosity))


def _leader_elect(value: bool | None) -> list[str]:
    return [] if value is None else [f"--leader-elect={'true' if value else 'false'}"]


def apiserver(
    *,
    store: str | None = None,
    state_dir: Path | str | None = None,
    bind_address: str | None = None,
    port: int | None = None,
    insecure_allow_remote: bool | None = None,
    secure_bind_address: str | None = None,
    secure_port: int | None = None,
    tls_cert_file: Path | None = None,
    tls_private_key_file: Path | None = None,
    client_ca_file: Path | None = None,
    service_account_signing_key_file: Path | None = None,
    kubelet_client_certificate: Path | None = None,
    kubelet_client_key: Path | None = None,
    kubelet_certificate_authority: Path | None = None,
    kubelet_preferred_address_types: Sequence[str] | None = None,
    watch_cache_size: int | None = None,
    service_cluster_ip_range: str | None = None,
    log_level: str | None = None,
    verbosity: int | None = None,
    extra: Sequence[str] = (),
) -> Command:
    args = _flags(
        ("store", store),
        ("state-dir", state_dir),
        ("insecure-bind-address", bind_address),
        ("insecure-port", port),
        ("insecure-allow-remote", insecure_allow_remote),
        ("bind-address", secure_bind_address),
        ("secure-port", secure_port),
        ("tls-cert-file", tls_cert_file),
        ("tls-private-key-file", tls_private_key_file),
        ("client-ca-file", client_ca_file),
        ("service-account-signing-key-file", service_account_signing_key_file),
        ("kubelet-client-certificate", kubelet_client_certificate),
        ("kubelet-client-key", kubelet_client_key),
        ("kubelet-certificate-authority", kubelet_certificate_authority),
        ("kubelet-preferred-address-types", kubelet_preferred_address_types),
        ("watch-cache-size", watch_cache_size),
        ("service-cluster-ip-range", service_cluster_ip_range),
    )
    return Command("apiserver", (*args, *_log(log_level, verbosity), *extra))


def _leader_elected(
    component: str,
    *,
    server: str | Sequence[str] | None,
    kubeconfig: Path | str | None,
    healthz_bind_address: str | None,
    healthz_port: int | None,
    leader_elect: bool | None,
    log_level: str | None,
    verbosity: int | None,
    extra: Sequence[str],
) -> Command:
    """The scheduler's and the controller-manager's command lines: the same flags."""
    args = _flags(
        ("server", server),
        ("kubeconfig", kubeconfig),
        ("healthz-bind-address", healthz_bind_address),
        ("healthz-port", healthz_port),
    )
    return Command(
        component,
        (*args, *_leader_elect(leader_elect), *_log(log_level, verbosity), *extra),
    )


def scheduler(
    *,
    server: str | Sequence[str] | None = None,
    kubeconfig: Path | str | None = None,
    healthz_bind_address: str | None = None,
    healthz_port: int | None = None,
    leader_elect: bool | None = None,
    log_level: str | None = None,
    verbosity: int | None = None,
    extra: Sequence[str] = (),
) -> Command:
    return _leader_elected(
        "scheduler", server=server, kubeconfig=kubeconfig,
        healthz_bind_address=healthz_bind_address, healthz_port=healthz_port,
        leader_elect=leader_elect, log_level=log_level, verbosity=verbosity, extra=extra,
    )  # fmt: skip


def controller_manager(
    *,
    server: str | Sequence[str] | None = None,
    kubeconfig: Path | str | None = None,
    healthz_bind_address: str | None = None,
    healthz_port: int | None = None,
    leader_elect: bool | None = None,
    root_ca_file: Path | None = None,
    log_level: str | None = None,
    verbosity: int | None = None,
    extra: Sequence[str] = (),
) -> Command:
    return _leader_elected(
        "controller-manager", server=server, kubeconfig=kubeconfig,
        healthz_bind_address=healthz_bind_address, healthz_port=healthz_port,
        leader_elect=leader_elect, log_level=log_level, verbosity=verbosity,
        extra=(*_flags(("root-ca-file", root_ca_file)), *extra),
    )  # fmt: skip


def kubelet(
    *,
    server: str | Sequence[str] | None = None,
    kubeconfig: Path | str | None = None,
    node_name: str | None = None,
    node_ip: str | None = None,
    runtime: str | None = None,
    state_dir: Path | str | None = None,
    address: str | None = None,
    port: int | None = None,
    healthz_bind_address: str | None = None,
    healthz_port: int | None = None,
    pod_cidr: str | None = None,
    nodes: int | None = None,
    sim_start_delay: float | None = None,
    cpu: str | None = None,
    memory: str | None = None,
    max_pods: int | None = None,
    stop_pods_on_exit: bool = False,
    cluster_dns: str | Sequence[str] | None = None,
    cluster_domain: str | None = None,
    tls_cert_file: Path | None = None,
    tls_private_key_file: Path | None = None,
    client_ca_file: Path | None = None,
    authentication_token_webhook: bool = False,
    authorization_mode: str | None = None,
    log_level: str | None = None,
    verbosity: int | None = None,
    extra: Sequence[str] = (),
) -> Command:
    args = _flags(
        ("server", server),
        ("kubeconfig", kubeconfig),
        ("node-name", node_name),
        ("node-ip", node_ip),
        ("runtime", runtime),
        ("state-dir", state_dir),
        ("address", address),
        ("port", port),
        ("healthz-bind-address", healthz_bind_address),
        ("healthz-port", healthz_port),
        ("pod-cidr", pod_cidr),
        ("nodes", nodes),
        ("sim-start-delay", sim_start_delay),
        ("cpu", cpu),
        ("memory", memory),
        ("max-pods", max_pods),
        ("stop-pods-on-exit", stop_pods_on_exit),
        ("cluster-dns", cluster_dns),
        ("cluster-domain", cluster_domain),
        ("tls-cert-file", tls_cert_file),
        ("tls-private-key-file", tls_private_key_file),
        ("client-ca-file", client_ca_file),
        ("authentication-token-webhook", authentication_token_webhook),
        ("authorization-mode", authorization_mode),
        durations=("sim-start-delay",),
    )
    return Command("kubelet", (*args, *_log(log_level, verbosity), *extra))


def proxy(
    *,
    server: str | Sequence[str] | None = None,
    kubeconfig: Path | str | None = None,
    hostname_override: str | Sequence[str] | None = None,
    nodeport_addresses: str | Sequence[str] | None = None,
    healthz_bind_address: str | None = None,
    healthz_port: int | None = None,
    balance: str | None = None,
    log_level: str | None = None,
    verbosity: int | None = None,
    extra: Sequence[str] = (),
) -> Command:
    args = _flags(
        ("server", server),
        ("kubeconfig", kubeconfig),
        ("hostname-override", hostname_override),
        ("nodeport-addresses", nodeport_addresses),
        ("healthz-bind-address", healthz_bind_address),
        ("healthz-port", healthz_port),
        ("balance", balance),
    )
    return Command("proxy", (*args, *_log(log_level, verbosity), *extra))


def dns(
    *,
    server: str | Sequence[str] | None = None,
    kubeconfig: Path | str | None = None,
    cluster_domain: str | None = None,
    cluster_dns_ip: str | None = None,
    dns_bind_address: str | None = None,
    dns_port: int | None = None,
    upstream: str | Sequence[str] | None = None,
    healthz_bind_address: str | None = None,
    healthz_port: int | None = None,
    log_level: str | None = None,
    verbosity: int | None = None,
    extra: Sequence[str] = (),
) -> Command:
    args = _flags(
        ("server", server),
        ("kubeconfig", kubeconfig),
        ("cluster-domain", cluster_domain),
        ("cluster-dns-ip", cluster_dns_ip),
        ("dns-bind-address", dns_bind_address),
        ("dns-port", dns_port),
        ("upstream", upstream),
        ("healthz-bind-address", healthz_bind_address),
        ("healthz-port", healthz_port),
    )
    return Command("dns", (*args, *_log(log_level, verbosity), *extra))


def node(
    kubelet: Command,
    *,
    proxy_healthz_bind_address: str | None = None,
    proxy_healthz_port: int | None = None,
    proxy_nodeport_addresses: str | Sequence[str] | None = None,
    proxy_kubeconfig: Path | str | None = None,
    extra: Sequence[str] = (),
) -> Command:
    """``kubelite node``: the command line of ``kubelet`` (a ``kubelet(...)``) plus its proxy's
    own flags; the proxy takes its apiserver connection, node name and log flags from the
    kubelet's (``kubelite.node``)."""
    if kubelet.component != "kubelet":
        raise ValueError(f"node() wraps a kubelet command, not {kubelet.component!r}")
    args = _flags(
        ("proxy-healthz-bind-address", proxy_healthz_bind_address),
        ("proxy-healthz-port", proxy_healthz_port),
        ("proxy-nodeport-addresses", proxy_nodeport_addresses),
        ("proxy-kubeconfig", proxy_kubeconfig),
    )
    return Command("node", (*kubelet.args, *args, *extra))


def certs_init(
    *,
    state_dir: Path | str,
    nodes: Sequence[str] = (),
    apiserver_names: Sequence[str] = (),
    server: str,
    service_cluster_ip_range: str | None = None,
) -> Command:
    """``kubelite certs init``: a cluster's CA, certificates and kubeconfigs
    (``kubelite.cluster_pki``), made by one command before its components start."""
    args = [
        "init",
        *_flags(("state-dir", state_dir)),
        *(f"--node={node}" for node in nodes),
        *(f"--apiserver-name={name}" for name in apiserver_names),
        *_flags(("server", server), ("service-cluster-ip-range", service_cluster_ip_range)),
    ]
    return Command("certs", tuple(args))


def etcd_member(
    *,
    name: str,
    data_dir: Path | str,
    client_url: str,
    peer_url: str,
    listen_address: str | None = None,
    initial_cluster: Sequence[str] | None = None,
) -> Command:
    """``kubelite etcd member``: one etcd member (``initial_cluster``: ``name=peer-url`` of
    every member; none: a cluster of one)."""
    args = _flags(
        ("name", name),
        ("data-dir", data_dir),
        ("client-url", client_url),
        ("peer-url", peer_url),
        ("listen-address", listen_address),
        ("initial-cluster", initial_cluster),
    )
    return Command("etcd", ("member", *args))


def front(
    *,
    backends: Sequence[str],
    bind_address: str | None = None,
    port: int | None = None,
    health_scheme: str | None = None,
    healthz_bind_address: str | None = None,
    healthz_port: int | None = None,
    log_level: str | None = None,
    verbosity: int | None = None,
    extra: Sequence[str] = (),
) -> Command:
    """``kubelite front``: one address for several apiservers (``backends``: ``host:port``)."""
    args = _flags(
        ("backends", backends),
        ("bind-address", bind_address),
        ("port", port),
        ("health-scheme", health_scheme),
        ("healthz-bind-address", healthz_bind_address),
        ("healthz-port", healthz_port),
    )
    return Command("front", (*args, *_log(log_level, verbosity), *extra))
