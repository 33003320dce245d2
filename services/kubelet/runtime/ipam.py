"""Pod IP allocation from a per-node range inside 127.0.0.0/8.

Every pod gets its own loopback address: Linux routes all of 127/8 to ``lo``, so a process can
bind ``127.1.0.2:80`` without any interface set-up, and two pods can both listen on port 80.
A node gets a range (``--pod-cidr``; ``kubelite up`` hands each cluster its own, see
``kubelite/up.py``; a kubelet started alone defaults from its node name: ``node1`` ->
``127.1.0.0/16``); addresses are handed out lowest first, skipping the network address, the
``.1`` a real bridge would take, and the broadcast address — so the first pod of
``127.1.0.0/16`` is ``127.1.0.2``, as a Kubernetes user would expect the first pod of a node's
range to look.

Another cluster on the same host (or any other program) may already use an address of the range:
loopback is shared by everything on the machine. ``PodIPAllocator`` is given ``in_use``, a
look-up of the addresses the kernel has sockets on (``bound_loopback_addresses``: every TCP and
UDP socket, listening or connected, IPv4 or IPv4-mapped IPv6, from ``/proc/net``), and skips
those. A bind test would not do: binding ``<ip>:0`` succeeds even while another process listens
on ``<ip>:80``. What it cannot see: an address handed to a pod elsewhere whose process has not
bound anything yet — so disjoint ranges per cluster stay the first line of defence.

Ranges outside 127.0.0.0/8 are refused: pod traffic must never leave the machine.
Not thread-safe; the kubelet calls it from its event loop only.
"""

from __future__ import annotations

import ipaddress
import re
import sys
import zlib
from collections.abc import Callable, Collection
from pathlib import Path

__all__ = [
    "LOOPBACK",
    "PodIPAllocator",
    "bound_loopback_addresses",
    "default_pod_cidr",
    "sim_pod_cidr",
]

LOOPBACK = ipaddress.IPv4Network("127.0.0.0/8")
PROC_NET = Path("/proc/net")
_SOCKET_TABLES = ("tcp", "udp", "tcp6", "udp6")
_V4_MAPPED = bytes(10) + b"\xff\xff"


def _kernel_address(hex_text: str) -> int | None:
    """A ``/proc/net`` local address (hex of host-order 32-bit words) as an IPv4 int, or None."""
    raw = b"".join(
        int(hex_text[i : i + 8], 16).to_bytes(4, sys.byteorder) for i in range(0, len(hex_text), 8)
    )
    if len(raw) == 4:
        return int.from_bytes(raw, "big")
    if len(raw) == 16 and raw.startswith(_V4_MAPPED):
        return int.from_bytes(raw[12:], "big")
    return None


def bound_loopback_addresses(proc_net: Path = PROC_NET) -> set[int]:
    """Every 127/8 address some socket of this network namespace is bound to (as ints).

    Empty where ``/proc/net`` cannot be read (not Linux): the allocator then trusts its range.
    """
    found: set[int] = set()
    for table in _SOCKET_TABLES:
        try:
            lines = (proc_net / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 2:
                continue
            try:
                ip = _kernel_address(fields[1].partition(":")[0])
            except ValueError:
                continue
            if ip is not None and ip >> 24 == 127:
                found.add(ip)
    return found


def default_pod_cidr(node_name: str) -> str:
    """``node1`` -> ``127.1.0.0/16``; names without a trailing number hash into 127.64-127.127.

    127.0.x.x is left alone (the host's own services live there).
    """
    match = re.search(r"(\d+)$", node_name)
    if match and 1 <= int(match.group(1)) <= 63:
        return f"127.{int(match.group(1))}.0.0/16"
    return f"127.{64 + zlib.crc32(node_name.encode()) % 64}.0.0/16"


def sim_pod_cidr(index: int) -> str:
    """Simulated node ``index`` -> a /24 inside 127.128.0.0/9 (room for 32,768 nodes)."""
    if not 0 <= index < 32768:
        raise ValueError(f"simulated node index {index} out of range")
    return f"127.{128 + index // 256}.{index % 256}.0/24"


class PodIPAllocator:
    """Hands out addresses of one range; remembers which pod holds which."""

    def __init__(self, cidr: str, *, in_use: Callable[[], Collection[int]] | None = None) -> None:
        """``in_use``: addresses taken by something outside this allocator (read once per
        allocation); None trusts the range to be this node's alone (the sim runtime)."""
        network = ipaddress.ip_network(cidr, strict=False)
        if not isinstance(network, ipaddress.IPv4Network) or not network.subnet_of(LOOPBACK):
            raise ValueError(f"pod CIDR {cidr} is not inside 127.0.0.0/8")
        if network.num_addresses < 4:
            raise ValueError(f"pod CIDR {cidr} is too small")
        self.cidr = str(network)
        self._first = int(network.network_address) + 2
        self._last = int(network.broadcast_address) - 1
        self._next = self._first
        self._by_pod: dict[str, str] = {}
        self._used: set[int] = set()
        self._in_use = in_use

    def reserve(self, *, pod_uid: str, ip: str) -> None:
        """Record an address already in use (a pod re-adopted after a restart)."""
        self._by_pod[pod_uid] = ip
        self._used.add(int(ipaddress.ip_address(ip)))

    def allocate(self, pod_uid: str) -> str:
        if pod_uid in self._by_pod:
            return self._by_pod[pod_uid]
        size = self._last - self._first + 1
        elsewhere = self._in_use() if self._in_use is not None else ()
        for offset in range(size):
            candidate = self._first + (self._next - self._first + offset) % size
            if candidate not in self._used and candidate not in elsewhere:
                self._used.add(candidate)
                # next search starts after this one, so a freed IP is not reused at once
                self._next = candidate + 1 if candidate < self._last else self._first
                ip = str(ipaddress.ip_address(candidate))
                self._by_pod[pod_uid] = ip
                return ip
        raise RuntimeError(f"pod CIDR {self.cidr} is exhausted (or every free address is bound)")

    def release(self, pod_uid: str) -> None:
        ip = self._by_pod.pop(pod_uid, None)
        if ip is not None:
            self._used.discard(int(ipaddress.ip_address(ip)))

    def get(self, pod_uid: str) -> str | None:
        return self._by_pod.get(pod_uid)
