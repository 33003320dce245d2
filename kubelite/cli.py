"""The ``kubelite`` command: one entry point, a sub-command per component.

Each component owns its flags: ``kubelite apiserver --help`` is the apiserver's own parser,
the same one ``python -m services.apiserver`` uses. This module only dispatches, importing the
component it runs and nothing else, so starting a kubelet does not load the apiserver.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

# sub-command -> module whose ``main(argv)`` runs it
COMMANDS: dict[str, str] = {
    "apiserver": "services.apiserver.main",
    "scheduler": "services.scheduler.main",
    "controller-manager": "services.controller_manager.main",
    "kubelet": "services.kubelet.main",
    "proxy": "services.proxy.main",
    "dns": "services.dns.main",
    "node": "kubelite.node",
    "up": "kubelite.up",
    "certs": "kubelite.cluster_pki",
    "etcd": "kubelite.etcd_cli",
    "front": "services.front.main",
    "trace": "kubelite.trace",
}

USAGE = """usage: kubelite <command> [flags]

commands:
  apiserver            the REST + watch hub over the store
  scheduler            binds pending pods to nodes
  controller-manager   replication, deployments, node lifecycle, garbage collection
  kubelet              the node agent that runs pods
  proxy                forwards Service addresses to ready endpoints (kube-proxy's job)
  dns                  cluster.local names from Services and pods (CoreDNS's job)
  node                 one node's kubelet and proxy, supervised (what a node container runs)
  front                one TCP address before several apiservers (HAProxy's job in kubeadm HA)
  etcd member          run one etcd member (--name, --data-dir, --initial-cluster)
  etcd snapshot        save FILE from a running etcd, or restore FILE into a new --data-dir
  up                   the whole cluster as supervised processes
  trace pod NAME       the steps a pod went through, with times and components (--watch)
  trace rs NAME        a replica set's scale-up: each pod created, scheduled, started
  certs init           make a cluster's CA, certificates and kubeconfigs (--node, --server)
  certs rotate         re-issue a cluster's certificates from its CA (--state-dir)

Run 'kubelite <command> --help' for a command's flags."""


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    command, rest = args[0], args[1:]
    if command == "version" or command == "--version":
        from importlib.metadata import version

        print(f"kubelite {version('kubelite')}")
        return 0
    module_name = COMMANDS.get(command)
    if module_name is None:
        print(f"kubelite: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
        return 2
    module = importlib.import_module(module_name)
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
