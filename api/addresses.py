"""Node addresses: which strings may stand for a node, and which one the apiserver dials.

Why: the apiserver reaches a pod's kubelet (for ``pods/log`` and ``pods/exec``) at an address
the Node object advertises in ``status.addresses``. Anyone who may write a Node could otherwise
make the apiserver fetch an arbitrary URL (an "address" such as ``::ffff:127.0.0.1]:18399/x?#``
spliced into ``http://[...]:port/...``). So an address is only ever one of two plain things:

* for ``InternalIP`` / ``ExternalIP``: an IP address, IPv4 or IPv6, with no zone (``%eth0``),
  no brackets, no port — what ``ipaddress.ip_address`` accepts minus scope ids;
* for ``Hostname`` / ``InternalDNS`` / ``ExternalDNS``: a lowercase RFC 1123 subdomain.

``address_errors(type, address)`` says why a value is neither (the apiserver's validation turns
that into 422 causes); ``dialable_address(addresses)`` picks the address to dial — the first
valid one in ``PREFERRED_ADDRESS_TYPES`` order — and skips invalid ones, so objects stored
before validation existed cannot steer the proxy either.

Kubernetes itself only checks node addresses for duplicates and relies on kubelet TLS to keep
the proxy honest; kubelite checks the syntax too, because a kubelet without a serving
certificate (``--tls-cert-file`` unset: plain HTTP) has no TLS to do that. ``PREFERRED_ADDRESS_TYPES``
is the default order; the apiserver's ``--kubelet-preferred-address-types`` changes it. Address types
other than the five above are allowed on write (Kubernetes does not restrict them) and never
dialled.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any

from api.names import is_dns1123_subdomain

__all__ = [
    "DNS_ADDRESS_TYPES",
    "IP_ADDRESS_TYPES",
    "PREFERRED_ADDRESS_TYPES",
    "address_errors",
    "dialable_address",
    "parse_ip",
]

IP_ADDRESS_TYPES = ("InternalIP", "ExternalIP")
DNS_ADDRESS_TYPES = ("Hostname", "InternalDNS", "ExternalDNS")
PREFERRED_ADDRESS_TYPES = ("InternalIP", "Hostname", "InternalDNS", "ExternalIP", "ExternalDNS")
"""kubelite's kubelets advertise their reachable address as InternalIP and the node name as
Hostname (which need not resolve on the host), so InternalIP comes first — unlike
kube-apiserver's default ``--kubelet-preferred-address-types``, which starts with Hostname."""

IP_MESSAGE = "must be a valid IP address, (e.g. 127.0.0.1 or 2001:db8::ffff)"


def parse_ip(text: object) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address ``text`` spells, or None: no zone, brackets, port, or surrounding space."""
    if not isinstance(text, str) or "%" in text or text != text.strip():
        return None
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def address_errors(kind: str, address: Any) -> list[str]:
    """Why ``address`` is not a valid address of type ``kind`` (empty: valid or unchecked)."""
    if kind in IP_ADDRESS_TYPES:
        return [] if parse_ip(address) is not None else [IP_MESSAGE]
    if kind in DNS_ADDRESS_TYPES:
        if not isinstance(address, str):
            return ["must be a string"]
        return is_dns1123_subdomain(address)
    return []


def dialable_address(addresses: Iterable[Mapping[str, Any]]) -> str | None:
    """The host to dial — an IP in its canonical form, or a DNS name — or None if no address
    of a known type is valid."""
    listed = [a for a in addresses if isinstance(a, Mapping)]
    for kind in PREFERRED_ADDRESS_TYPES:
        for entry in listed:
            if entry.get("type") != kind:
                continue
            address = entry.get("address")
            if kind in IP_ADDRESS_TYPES:
                ip = parse_ip(address)
                if ip is not None:
                    return str(ip)
            elif isinstance(address, str) and address and not address_errors(kind, address):
                return address
    return None
