"""The PKI of a ``kubelite up`` cluster, its kubeconfigs, and ``kubelite certs rotate``.

Why: ``up`` serves the apiserver's secure port with a certificate of the cluster's own CA and
gives the user — and each component — a client certificate of that CA, as kubeadm does. The
files live in ``<state-dir>/pki`` (``component.pki``: 0600 keys, reused on every start):

* ``ca.crt``/``ca.key``; ``apiserver.crt`` for 127.0.0.1, localhost, the bind address, the
  ``kubernetes`` Service's ClusterIP and names; ``sa.key``/``sa.pub``;
* ``admin`` (CN ``kubernetes-admin``, O ``system:masters``), ``controller-manager``
  (``system:kube-controller-manager``), ``scheduler`` (``system:kube-scheduler``), ``proxy``
  (``system:kube-proxy``), ``dns`` (``system:serviceaccount:kube-system:coredns``) and one
  ``node-<name>`` per kubelet (``system:node:<name>`` in ``system:nodes``);
* the kubelets' server: ``kubelet-<name>.crt`` per node, serving its name and its node IP
  (127.0.0.1 under ``up``), and ``apiserver-kubelet-client`` (kubeadm's: CN
  ``kube-apiserver-kubelet-client``, O ``system:masters``), the certificate the apiserver shows
  kubelets, which check it against ``ca.crt`` as the apiserver checks theirs.

Kubeconfigs: ``<state-dir>/kubeconfig`` (the admin's, https) and
``<state-dir>/kubeconfigs/<component>.conf``, each naming the CA and its client certificate.

``kubelite certs init --state-dir DIR --node N1 --node N2 --apiserver-name NAME --server URL``
makes all of it (or keeps what is there) for a cluster ``up`` does not start — the compose
file's one-shot ``pki`` service, writing into a volume every component mounts read-only: the
apiserver's certificate also names each ``--apiserver-name`` (the compose service name), and
each kubeconfig names ``--server``.

``kubelite certs rotate --state-dir DIR`` re-issues every leaf certificate from the same CA
(the CA and the service-account key stay: tokens and kubeconfigs keep working); a running
cluster picks the new files up when its processes restart.
"""

from __future__ import annotations

import argparse
import base64
import ipaddress
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from component import pki

__all__ = [
    "ClusterPki",
    "build_parser",
    "ensure_cluster_pki",
    "kubeconfig",
    "kubeconfig_path",
    "main",
    "write_kubeconfigs",
]

KUBERNETES_NAMES = (
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
NODE_IP = "127.0.0.1"
"""Every kubelet's InternalIP under ``kubelite up`` (they share this host's loopback)."""
KUBELET_CLIENT_USER = "kube-apiserver-kubelet-client"
COMPONENT_USERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "admin": ("kubernetes-admin", ("system:masters",)),
    "controller-manager": ("system:kube-controller-manager", ()),
    "scheduler": ("system:kube-scheduler", ()),
    "proxy": ("system:kube-proxy", ()),
    "dns": (
        "system:serviceaccount:kube-system:coredns",
        ("system:serviceaccounts", "system:serviceaccounts:kube-system"),
    ),
}


@dataclass(frozen=True, slots=True)
class ClusterPki:
    directory: Path
    ca: pki.CertificateAuthority
    serving: pki.KeyPair
    signing_key: pki.KeyPair
    clients: dict[str, pki.KeyPair]
    """By name: ``admin``, the components', ``node-<name>``."""
    kubelet_serving: dict[str, pki.KeyPair]
    """By node name: each kubelet's serving certificate."""
    kubelet_client: pki.KeyPair
    """The apiserver's client certificate for kubelets."""


def ensure_cluster_pki(
    state_dir: Path,
    *,
    nodes: Sequence[str],
    service_cidr: str,
    bind_address: str,
    apiserver_names: Sequence[str] = (),
    force: bool = False,
) -> ClusterPki:
    """Every file of the cluster's PKI, made where missing (``force``: leaves re-issued);
    ``apiserver_names``: more names the apiserver's certificate is for."""
    directory = state_dir / "pki"
    ca = pki.ensure_ca(directory)
    kubernetes_ip = str(ipaddress.ip_network(service_cidr, strict=False)[1])
    hosts = ["127.0.0.1", "localhost", kubernetes_ip, *KUBERNETES_NAMES]
    if bind_address not in ("0.0.0.0", "::") and bind_address not in hosts:
        hosts.append(bind_address)
    hosts.extend(name for name in apiserver_names if name not in hosts)
    serving = pki.ensure_serving_cert(ca, directory, name="apiserver", hosts=hosts, force=force)
    users = dict(COMPONENT_USERS)
    for node in nodes:
        users[f"node-{node}"] = (f"system:node:{node}", ("system:nodes",))
    clients = {
        name: pki.ensure_client_cert(
            ca, directory, name=name, user=user, groups=groups, force=force
        )
        for name, (user, groups) in users.items()
    }
    kubelet_serving = {
        node: pki.ensure_serving_cert(
            ca, directory, name=f"kubelet-{node}", hosts=[node, NODE_IP], force=force
        )
        for node in nodes
    }
    kubelet_client = pki.ensure_client_cert(
        ca, directory, name="apiserver-kubelet-client", user=KUBELET_CLIENT_USER,
        groups=("system:masters",), force=force,
    )  # fmt: skip
    return ClusterPki(
        directory=directory,
        ca=ca,
        serving=serving,
        signing_key=pki.ensure_signing_key(directory),
        clients=clients,
        kubelet_serving=kubelet_serving,
        kubelet_client=kubelet_client,
    )


def kubeconfig(server: str, *, ca: Path, client: pki.KeyPair, user: str) -> str:
    """A kubeconfig for ``server`` trusting ``ca``, authenticating with ``client``."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "kubelite",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca.read_bytes()).decode(),
                },
            }
        ],
        "users": [
            {
                "name": user,
                "user": {"client-certificate": str(client.cert), "client-key": str(client.key)},
            }
        ],
        "contexts": [
            {
                "name": "kubelite",
                "context": {"cluster": "kubelite", "user": user, "namespace": "default"},
            }
        ],
        "current-context": "kubelite",
        "preferences": {},
    }
    return json.dumps(doc, indent=2) + "\n"  # JSON is YAML; kubectl reads either


def kubeconfig_path(state_dir: Path, name: str) -> Path:
    """Where the kubeconfig of client ``name`` (``scheduler``, ``node-node1`` ...) is written."""
    return state_dir / "kubeconfigs" / f"{name}.conf"


def write_kubeconfigs(state_dir: Path, cluster: ClusterPki, *, server: str) -> Path:
    """The admin's ``<state-dir>/kubeconfig`` and one per component under ``kubeconfigs/``;
    returns the admin's path."""
    (state_dir / "kubeconfigs").mkdir(parents=True, exist_ok=True)
    for name, client in cluster.clients.items():
        text = kubeconfig(server, ca=cluster.ca.files.cert, client=client, user=name)
        pki.write_private(kubeconfig_path(state_dir, name), text.encode())
    admin = state_dir / "kubeconfig"
    text = kubeconfig(
        server, ca=cluster.ca.files.cert, client=cluster.clients["admin"], user="admin"
    )
    pki.write_private(admin, text.encode())
    return admin


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubelite certs",
        description="Manage a kubelite cluster's certificates and kubeconfigs.",
    )
    sub = parser.add_subparsers(dest="action", required=True)
    init = sub.add_parser(
        "init", help="make the CA, every certificate and kubeconfig where missing"
    )
    init.add_argument(
        "--state-dir", default="./.kubelite", help="written to DIR/pki, DIR/kubeconfigs"
    )
    init.add_argument(
        "--node", action="append", default=[], help="a kubelet's node name; repeatable"
    )
    init.add_argument(
        "--apiserver-name",
        action="append",
        default=[],
        help="a DNS name or address the apiserver is reached at; repeatable",
    )
    init.add_argument(
        "--server", required=True, help="the apiserver URL the kubeconfigs name (https://...)"
    )
    init.add_argument(
        "--service-cluster-ip-range",
        default=None,
        help="the apiserver's range (its .1 is in the certificate; default: derived from "
        "--state-dir, as kubelite up does)",
    )
    rotate = sub.add_parser("rotate", help="re-issue every leaf certificate from the same CA")
    rotate.add_argument("--state-dir", default="./.kubelite", help="the cluster's state dir")
    rotate.add_argument("--nodes", type=int, default=2, help="kubelets node1..nodeN (default 2)")
    rotate.add_argument("--bind-address", default="127.0.0.1")
    return parser


def _init(args: argparse.Namespace, state_dir: Path) -> int:
    from kubelite.up import cluster_service_cidr

    cluster = ensure_cluster_pki(
        state_dir,
        nodes=args.node,
        service_cidr=args.service_cluster_ip_range or cluster_service_cidr(state_dir),
        bind_address="0.0.0.0",
        apiserver_names=args.apiserver_name,
    )
    write_kubeconfigs(state_dir, cluster, server=args.server)
    print(f"certificates in {cluster.directory}, kubeconfigs in {state_dir / 'kubeconfigs'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``kubelite certs init ...`` / ``kubelite certs rotate --state-dir DIR [--nodes N]``."""
    from kubelite.up import cluster_service_cidr, node_names

    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    state_dir = Path(args.state_dir).resolve()
    if args.action == "init":
        return _init(args, state_dir)
    cluster = ensure_cluster_pki(
        state_dir,
        nodes=node_names(args.nodes),
        service_cidr=cluster_service_cidr(state_dir),
        bind_address=args.bind_address,
        force=True,
    )
    kubelets = [f"kubelet-{node}" for node in cluster.kubelet_serving]
    for name in ("apiserver", *cluster.clients, *kubelets, "apiserver-kubelet-client"):
        print(f"re-issued {cluster.directory / name}.crt")
    print("restart the cluster (kubelite up) for its processes to use them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
