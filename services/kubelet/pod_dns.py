"""A pod's ``/etc/resolv.conf`` when its spec asks for specific content.

Why a module of its own: ``dnsPolicy`` and ``dnsConfig`` are the kubelet's
(``pkg/kubelet/network/dns/dns.go``): ``None`` takes ``dnsConfig`` alone; any other policy
starts from the node's resolver and *appends* ``dnsConfig`` — nameservers and searches with
duplicates dropped, options merged by name (the pod's value wins). kubelite has no cluster DNS
yet, so ``ClusterFirst`` falls back to the node's resolver as the kubelet does without
``--cluster-dns``.

What it owns: ``resolv_conf`` (pure, over the pod spec and the node's resolv.conf text).

What it does not guarantee: with no ``dnsConfig`` and a policy other than ``None`` it returns
None — the runtime then shows the node's file unchanged; Kubernetes' limits (3 nameservers,
32 search domains) are applied by truncation, without the kubelet's warning event.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["resolv_conf"]

MAX_NAMESERVERS = 3
MAX_SEARCHES = 32


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


def resolv_conf(spec: Mapping[str, Any], *, node_resolv_conf: str) -> str | None:
    """The pod's resolv.conf text, or None when the node's file serves unchanged."""
    config = spec.get("dnsConfig")
    policy = spec.get("dnsPolicy") or "ClusterFirst"
    if config is None and policy != "None":
        return None
    config = config or {}
    servers, searches, options = ([], [], []) if policy == "None" else _parse(node_resolv_conf)
    servers = _unique([*servers, *(config.get("nameservers") or ())])[:MAX_NAMESERVERS]
    searches = _unique([*searches, *(config.get("searches") or ())])[:MAX_SEARCHES]
    options = _merge_options(options, list(config.get("options") or ()))
    lines = [f"nameserver {s}" for s in servers]
    if searches:
        lines.append(f"search {' '.join(searches)}")
    if options:
        lines.append(f"options {' '.join(options)}")
    return "".join(line + "\n" for line in lines)
