"""A pod's ``/etc/resolv.conf``: the kubelet's ``dnsPolicy`` and ``dnsConfig`` rules.

Why a module of its own: these are the kubelet's (``pkg/kubelet/network/dns/dns.go``,
``GetPodDNS``), and a pod that cannot resolve a Service name is debugged by reading them:

* ``ClusterFirst`` (the default) — unless the pod uses the host's network — and
  ``ClusterFirstWithHostNet``: the cluster DNS (``--cluster-dns``) is the only nameserver, the
  search path is ``<ns>.svc.<domain> svc.<domain> <domain>`` followed by the node's own search
  domains, and the options are ``ndots:5`` alone; without ``--cluster-dns`` such a pod falls
  back to ``Default``, as the kubelet does (it also warns ``MissingClusterDNS``; kubelite
  does not);
* ``Default`` (and ``ClusterFirst`` on the host's network): the node's resolver;
* ``None``: ``dnsConfig`` alone;
* then ``dnsConfig`` is *appended* — nameservers and searches with duplicates dropped, options
  merged by name (the pod's value wins).

What it owns: ``ClusterDns`` (the kubelet's ``--cluster-dns``/``--cluster-domain``) and
``resolv_conf`` (pure, over the pod spec, its namespace and the node's resolv.conf text).

What it does not guarantee: for the node's resolver without ``dnsConfig`` it returns None —
the runtime then shows the node's file unchanged; Kubernetes' limits (3 nameservers, 32 search
domains) are applied by truncation, without the kubelet's warning event.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_CLUSTER_DOMAIN", "ClusterDns", "resolv_conf"]

MAX_NAMESERVERS = 3
MAX_SEARCHES = 32
DEFAULT_CLUSTER_DOMAIN = "cluster.local"
CLUSTER_OPTIONS = ("ndots:5",)
"""``defaultDNSOptions``: a name with fewer than 5 dots tries the search path first."""


@dataclass(frozen=True, slots=True)
class ClusterDns:
    """The kubelet's ``--cluster-dns`` (nameserver IPs; empty: none) and ``--cluster-domain``."""

    servers: tuple[str, ...] = ()
    domain: str = DEFAULT_CLUSTER_DOMAIN


def _uses_cluster_dns(spec: Mapping[str, Any], cluster: ClusterDns) -> bool:
    """``getPodDNSType``: cluster DNS for ClusterFirst off the host network and for
    ClusterFirstWithHostNet — when the kubelet knows one."""
    policy = spec.get("dnsPolicy") or "ClusterFirst"
    wants = policy == "ClusterFirstWithHostNet" or (
        policy == "ClusterFirst" and not spec.get("hostNetwork")
    )
    return wants and bool(cluster.servers)


def _unique(values: list[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _parse(text: str) -> tuple[list[str], list[str], list[str]]:
    servers: list[str] = []
    searches: list[str] = []
    options: list[str] = []
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if fields[0] == "nameserver" and len(fields) > 1:
            servers.append(fields[1])
        elif fields[0] in ("search", "domain"):
            searches = fields[1:]
        elif fields[0] == "options":
            options.extend(fields[1:])
    return servers, searches, options


def _merge_options(base: list[str], extra: list[Mapping[str, Any]]) -> list[str]:
    merged = {o.split(":", 1)[0]: o for o in base}
    for option in extra:
        name = str(option.get("name") or "")
        value = option.get("value")
        merged[name] = f"{name}:{value}" if value is not None else name
    return list(merged.values())


def resolv_conf(
    spec: Mapping[str, Any],
    *,
    node_resolv_conf: str,
    namespace: str = "default",
    cluster: ClusterDns = ClusterDns(),
) -> str | None:
    """The pod's resolv.conf text, or None when the node's file serves unchanged."""
    config = spec.get("dnsConfig")
    policy = spec.get("dnsPolicy") or "ClusterFirst"
    cluster_first = _uses_cluster_dns(spec, cluster)
    if config is None and policy != "None" and not cluster_first:
        return None
    config = config or {}
    servers, searches, options = ([], [], []) if policy == "None" else _parse(node_resolv_conf)
    if cluster_first:
        servers = list(cluster.servers)
        if cluster.domain:
            domain = cluster.domain
            searches = [f"{namespace}.svc.{domain}", f"svc.{domain}", domain, *searches]
        options = list(CLUSTER_OPTIONS)
    servers = _unique([*servers, *(config.get("nameservers") or ())])[:MAX_NAMESERVERS]
    searches = _unique([*searches, *(config.get("searches") or ())])[:MAX_SEARCHES]
    options = _merge_options(options, list(config.get("options") or ()))
    lines = [f"nameserver {s}" for s in servers]
    if searches:
        lines.append(f"search {' '.join(searches)}")
    if options:
        lines.append(f"options {' '.join(options)}")
    return "".join(line + "\n" for line in lines)
