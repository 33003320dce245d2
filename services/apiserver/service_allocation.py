"""ClusterIPs and NodePorts: allocated on write, released after, kept unique across crashes.

Why: a Service's ClusterIP and node ports are the apiserver's to hand out (Kubernetes'
``pkg/registry/core/service/ipallocator`` and ``portallocator``), and two Services holding one
address would send each other's traffic astray. The store has no multi-key transactions, so
uniqueness rests on its one atomic primitive, create-if-absent: every address and every node
port held is its own key (``/registry/kubelite/serviceips/<ip>``,
``/registry/kubelite/servicenodeports/<port>``), like the IPAddress objects Kubernetes 1.31+
keeps, naming the Service (namespace, name, uid) that holds it.

The order of writes makes a crash harmless:

1. **reserve** — create the allocation keys (a requested address that is taken is a 422
   ``provided IP is already allocated``; a random one that is taken is skipped);
2. **write the Service**; if that fails, the request's reservations are released at once;
3. **release** — a watch on the Services prefix sees each DELETED (and each MODIFIED that
   dropped an address or a port) and deletes the keys that Service no longer holds, each
   delete a compare-and-swap on the revision read, and only while the key still names that
   Service's uid.

A kill -9 between 1 and 2, or between 2 and 3, leaves an allocation nobody holds — a *leak*,
never a duplicate. The **repair loop** (``RepairIP``/``RepairNodePort``: at start and every
``repair_interval``) lists Services and allocations at one revision and releases allocations
whose Service does not hold them once they are older than ``leak_grace`` (an allocation younger
than that may belong to a create still in flight), records the addresses and ports of Services
that hold one without a key (a store written before this module, or restored from a backup),
and reports a Service whose address or port another Service's key holds, or that lies outside
the configured range, with a Warning event as Kubernetes does (``ClusterIPAlreadyAllocated``,
``ClusterIPOutOfRange``, ``PortAlreadyAllocated``, ``PortOutOfRange``).

Dynamic allocation picks at random, from the upper part of the range first (Kubernetes'
static-subrange rule: the first ``min(max(16, size/16), 256)`` addresses — and
``min(max(16, size/32), 128)`` ports — are handed out only when the rest is full, so addresses
people choose by hand, like ``.10`` for DNS, stay free).

Limits: IPv4 only; one range of each. Which addresses are taken is remembered in memory between
repairs to avoid a store read per candidate; another apiserver's releases are seen at the next
repair or when the range looks full (then it re-reads before answering 500 "range is full").
``dryRun`` writes reserve nothing. The allocation keys are not served through the API.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import random
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NoReturn

from api.errors import InternalError, Invalid
from api.meta import now_time
from api.services import cluster_ip_of, has_cluster_ip, node_ports_of, wants_node_ports
from api.validation import invalid
from services.apiserver.storage import decode
from store.base import (
    Compacted,
    EventType,
    KeyExists,
    KeyNotFound,
    KeyValue,
    RevisionMismatch,
    Store,
    StoreClosed,
    WatchOverflow,
)

__all__ = [
    "DEFAULT_CLUSTER_IP_RANGE",
    "DEFAULT_NODE_PORT_RANGE",
    "IP_PREFIX",
    "PORT_PREFIX",
    "PortRange",
    "Reservation",
    "ServiceAllocator",
    "carry_over_allocations",
    "parse_cluster_ip_range",
    "parse_port_range",
]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

DEFAULT_CLUSTER_IP_RANGE = "127.128.0.0/16"
"""Loopback, disjoint from the pod addresses (127.1.0.0-127.127.255.255): DESIGN.md §6."""
DEFAULT_NODE_PORT_RANGE = "30000-32767"
IP_PREFIX = "/registry/kubelite/serviceips/"
PORT_PREFIX = "/registry/kubelite/servicenodeports/"
SERVICES_PREFIX = "/registry/core/services/"
IP_REPAIR = "ipallocator-repair-controller"
PORT_REPAIR = "portallocator-repair-controller"


@dataclass(frozen=True, slots=True)
class PortRange:
    base: int
    size: int

    def __contains__(self, port: object) -> bool:
        return isinstance(port, int) and self.base <= port < self.base + self.size

    def __str__(self) -> str:
        return f"{self.base}-{self.base + self.size - 1}"


def parse_port_range(text: str) -> PortRange:
    """``30000-32767`` (or a single port) -> ``PortRange``; ValueError names what is wrong."""
    low, _, high = text.partition("-")
    try:
        first, last = int(low), int(high or low)
    except ValueError:
        raise ValueError(f"invalid port range {text!r} (want FIRST-LAST)") from None
    if not 0 < first <= last <= 65535:
        raise ValueError(f"invalid port range {text!r}: ports must be 1-65535, first <= last")
    return PortRange(first, last - first + 1)


def parse_cluster_ip_range(text: str) -> ipaddress.IPv4Network:
    """An IPv4 CIDR of at least 8 addresses (the network and broadcast are never handed out)."""
    try:
        network = ipaddress.ip_network(text, strict=True)
    except ValueError as exc:
        raise ValueError(f"invalid service cluster IP range {text!r}: {exc}") from None
    if not isinstance(network, ipaddress.IPv4Network):
        raise ValueError(f"service cluster IP range {text!r}: only IPv4 is supported")
    if network.prefixlen > 29:
        raise ValueError(f"service cluster IP range {text!r} is too small (at most /29)")
    return network


def _static_band(size: int, *, step: int, most: int) -> int:
    """``calculateRangeOffset``: how much of the range's start dynamic allocation keeps for last."""
    if size < 16:
        return 0
    return min(max(16, size // step), most)


def _record(owner: Obj) -> bytes:
    meta = owner.get("metadata") or {}
    return json.dumps(
        {
            "service": {
                "namespace": meta.get("namespace"),
                "name": meta.get("name"),
                "uid": meta.get("uid"),
            },
            "allocatedAt": time.time(),
        },
        sort_keys=True,
    ).encode()


def _owner_of(kv: KeyValue) -> tuple[dict[str, Any], float]:
    try:
        record = json.loads(kv.value)
        return dict(record["service"]), float(record["allocatedAt"])
    except (ValueError, KeyError, TypeError):
        return {}, 0.0


def _uid(obj: Obj) -> Any:
    return (obj.get("metadata") or {}).get("uid")


@dataclass
class Reservation:
    """The allocation keys one request created: undone if its write fails, or dropped if the
    final object does not hold them (a retried update that chose again)."""

    allocator: ServiceAllocator
    created: list[KeyValue] = field(default_factory=list)

    async def settle(self, final: Obj | None) -> None:
        """Release what this request reserved that ``final`` (the stored object; None when the
        write failed) does not hold."""
        held = self.allocator.keys_held(final) if final is not None else set()
        for kv in self.created:
            if kv.key not in held:
                await self.allocator.release_key(kv.key, expected=kv)
        self.created.clear()


class ServiceAllocator:
    """The apiserver's ClusterIP and NodePort allocator over ``store`` (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        *,
        cluster_ip_range: ipaddress.IPv4Network,
        node_port_range: PortRange,
        leak_grace: float = 60.0,
        record_event: Callable[[Obj, str, str, str], Awaitable[None]] | None = None,
    ) -> None:
        self.store = store
        self.cluster_ip_range = cluster_ip_range
        self.node_port_range = node_port_range
        self.leak_grace = leak_grace
        self.record_event = record_event
        self._ips_taken: set[str] = set()
        self._ports_taken: set[int] = set()

    # -- what a Service holds ------------------------------------------------------------------

    @property
    def kubernetes_ip(self) -> str:
        """The first address of the range: the ``kubernetes`` Service's."""
        return str(self.cluster_ip_range.network_address + 1)

    def keys_held(self, obj: Obj) -> set[str]:
        keys = set()
        ip = cluster_ip_of(obj) if has_cluster_ip(obj) else None
        if ip is not None:
            keys.add(IP_PREFIX + ip)
        keys.update(PORT_PREFIX + str(port) for port in node_ports_of(obj))
        return keys

    def _ip_in_range(self, ip: str) -> bool:
        try:
            address = ipaddress.IPv4Address(ip)
        except ValueError:
            return False
        net = self.cluster_ip_range
        return address in net and address not in (net.network_address, net.broadcast_address)

    # -- reserving -----------------------------------------------------------------------------

    async def reserve(self, obj: Obj) -> Reservation:
        """Give ``obj`` (a validated Service about to be written, changed in place) its ClusterIP
        and node ports, creating the allocation keys it does not hold yet (on an update, the
        keys it already holds are its own and stay). Raises 422 ``Invalid`` for a requested address or port that
        is out of range or taken, 500 when a range is full; nothing stays reserved then."""
        reservation = Reservation(self)
        try:
            await self._reserve_ip(obj, reservation)
            await self._reserve_node_ports(obj, reservation)
        except BaseException:
            await reservation.settle(None)
            raise
        return reservation

    async def _claim(self, key: str, obj: Obj, reservation: Reservation) -> bool:
        """Create ``key`` for ``obj``; True if it is now ``obj``'s (created here, or already its)."""
        try:
            kv = await self.store.create(key, _record(obj))
        except KeyExists:
            current = await self.store.get(key)
            if current is None:
                return await self._claim(key, obj, reservation)
            owner, _ = _owner_of(current)
            return bool(owner.get("uid")) and owner.get("uid") == _uid(obj)
        reservation.created.append(kv)
        return True

    async def _reserve_ip(self, obj: Obj, reservation: Reservation) -> None:
        spec = obj.get("spec") or {}
        if not has_cluster_ip(obj):
            return
        requested = cluster_ip_of(obj)
        if requested is None:
            ip = await self._next_ip(obj, reservation)
            spec["clusterIP"] = ip
            spec["clusterIPs"] = [ip]
            return
        if not self._ip_in_range(requested):
            raise self._ip_invalid(
                obj,
                requested,
                "provided IP is not in the valid range. The range of valid IPs is "
                f"{self.cluster_ip_range}",
            )
        if not await self._claim(IP_PREFIX + requested, obj, reservation):
            self._ips_taken.add(requested)
            raise self._ip_invalid(obj, requested, "provided IP is already allocated")
        self._ips_taken.add(requested)
        spec["clusterIPs"] = [requested]

    def _ip_invalid(self, obj: Obj, ip: str, problem: str) -> Invalid:
        spec = obj.get("spec") or {}
        shown = ", ".join(json.dumps(v) for v in spec.get("clusterIPs") or [ip])
        cause = {
            "reason": "FieldValueInvalid",
            "message": f"Invalid value: []string{{{shown}}}: failed to allocate IP {ip}: {problem}",
            "field": "spec.clusterIPs",
        }
        return Invalid.of("Service", str((obj.get("metadata") or {}).get("name")), [cause])

    def _candidates(self, size: int, band: int) -> Iterator[int]:
        """Offsets in ``[0, size)``: the upper part in random order, then the static band."""
        for low, high in ((band, size), (0, band)):
            if high <= low:
                continue
            start = random.randrange(low, high)
            yield from range(start, high)
            yield from range(low, start)

    async def _next_ip(self, obj: Obj, reservation: Reservation) -> str:
        net = self.cluster_ip_range
        size = net.num_addresses - 2
        base = int(net.network_address) + 1
        for attempt in range(2):
            band = _static_band(size, step=16, most=256)
            for offset in self._candidates(size, band):
                ip = str(ipaddress.IPv4Address(base + offset))
                if ip in self._ips_taken:
                    continue
                self._ips_taken.add(ip)
                if await self._claim(IP_PREFIX + ip, obj, reservation):
                    return ip
            if attempt == 0:
                await self._reload_taken()
        raise InternalError("failed to allocate a serviceIP: range is full")

    async def _reserve_node_ports(self, obj: Obj, reservation: Reservation) -> None:
        spec = obj.get("spec") or {}
        allocate = wants_node_ports(obj)
        shared: dict[Any, int] = {}  # ports with one number (53/TCP, 53/UDP) share a node port
        for i, port in enumerate(spec.get("ports") or []):
            if not isinstance(port, dict):
                continue
            number = port.get("nodePort")
            if isinstance(number, int) and number:
                await self._reserve_port(obj, number, f"spec.ports[{i}].nodePort", reservation)
            elif allocate:
                reuse = shared.get(port.get("port"))
                port["nodePort"] = reuse or await self._next_port(obj, reservation)
            if isinstance(port.get("nodePort"), int):
                shared.setdefault(port.get("port"), port["nodePort"])
        if spec.get("type") == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local":
            health = spec.get("healthCheckNodePort")
            if isinstance(health, int) and health:
                await self._reserve_port(obj, health, "spec.healthCheckNodePort", reservation)
            else:
                spec["healthCheckNodePort"] = await self._next_port(obj, reservation)

    async def _reserve_port(
        self, obj: Obj, number: int, field_path: str, reservation: Reservation
    ) -> None:
        name = str((obj.get("metadata") or {}).get("name"))
        if number not in self.node_port_range:
            detail = (
                "provided port is not in the valid range. The range of valid ports is "
                f"{self.node_port_range}"
            )
            raise Invalid.of("Service", name, [invalid(field_path, number, detail)])
        self._ports_taken.add(number)
        if not await self._claim(PORT_PREFIX + str(number), obj, reservation):
            detail = "provided port is already allocated"
            raise Invalid.of("Service", name, [invalid(field_path, number, detail)])

    async def _next_port(self, obj: Obj, reservation: Reservation) -> int:
        ports = self.node_port_range
        for attempt in range(2):
            band = _static_band(ports.size, step=32, most=128)
            for offset in self._candidates(ports.size, band):
                number = ports.base + offset
                if number in self._ports_taken:
                    continue
                self._ports_taken.add(number)
                if await self._claim(PORT_PREFIX + str(number), obj, reservation):
                    return number
            if attempt == 0:
                await self._reload_taken()
        raise InternalError("failed to allocate a nodePort: range is full")

    async def _reload_taken(self) -> None:
        ips = await self.store.list(IP_PREFIX)
        ports = await self.store.list(PORT_PREFIX)
        self._ips_taken = {kv.key.removeprefix(IP_PREFIX) for kv in ips.items}
        self._ports_taken = {
            int(kv.key.removeprefix(PORT_PREFIX))
            for kv in ports.items
            if kv.key.removeprefix(PORT_PREFIX).isdigit()
        }

    # -- releasing -----------------------------------------------------------------------------

    async def release_key(self, key: str, *, expected: KeyValue) -> bool:
        """Delete ``key`` if it is still the allocation ``expected`` was; True if deleted."""
        try:
            await self.store.delete(key, expected_revision=expected.mod_revision)
        except (KeyNotFound, RevisionMismatch):
            return False
        if key.startswith(IP_PREFIX):
            self._ips_taken.discard(key.removeprefix(IP_PREFIX))
        else:
            number = key.removeprefix(PORT_PREFIX)
            if number.isdigit():
                self._ports_taken.discard(int(number))
        return True

    async def release_dropped(self, old: Obj, new: Obj | None) -> None:
        """Release what ``old`` held that ``new`` (None: deleted) does not, while the keys still
        name ``old``'s uid (a key re-allocated since is someone else's)."""
        still = self.keys_held(new) if new is not None and _uid(new) == _uid(old) else set()
        for key in sorted(self.keys_held(old) - still):
            kv = await self.store.get(key)
            if kv is None:
                continue
            owner, _ = _owner_of(kv)
            if owner.get("uid") == _uid(old) and await self.release_key(key, expected=kv):
                log.debug(
                    "released %s of service %s/%s", key, owner.get("namespace"), owner.get("name")
                )

    async def follow_services(self) -> NoReturn:
        """Forever: release what deleted or changed Services let go of, from a store watch.

        A watch that breaks (overflow, compaction) is restarted after a repair pass, which
        catches whatever the gap hid."""
        while True:
            revision = await self.repair()
            try:
                async for event in self.store.watch(SERVICES_PREFIX, after_revision=revision):
                    if event.prev is None or event.type == EventType.ADDED:
                        continue
                    old = decode(event.prev)
                    new = decode(event.kv) if event.type == EventType.MODIFIED else None
                    await self.release_dropped(old, new)
            except (WatchOverflow, Compacted) as exc:
                log.warning(
                    "service watch ended (%s); repairing allocations, then watching again", exc
                )

    # -- repair ---------------------------------------------------------------------------------

    async def repair_forever(self, *, interval: float) -> NoReturn:
        """``repair`` every ``interval`` seconds (the first pass runs in ``follow_services``)."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.repair()
            except StoreClosed:
                raise
            except Exception:
                log.exception("allocation repair failed; will retry in %.0f s", interval)

    async def repair(self) -> int:
        """One pass of RepairIP + RepairNodePort; returns the store revision it read Services at."""
        services = await self.store.list(SERVICES_PREFIX)
        ips = await self.store.list(IP_PREFIX, revision=services.revision)
        ports = await self.store.list(PORT_PREFIX, revision=services.revision)
        holders: dict[str, list[Obj]] = {}
        for kv in services.items:
            svc = decode(kv)
            for key in self.keys_held(svc):
                holders.setdefault(key, []).append(svc)
        allocations = {kv.key: kv for kv in (*ips.items, *ports.items)}
        await self._release_leaks(allocations.values(), holders)
        for key, owners in holders.items():
            await self._record_holders(key, owners, allocations.get(key))
        await self._reload_taken()
        return services.revision

    async def _release_leaks(
        self, allocations: Iterable[KeyValue], holders: dict[str, list[Obj]]
    ) -> None:
        now = time.time()
        for kv in allocations:
            owner, allocated_at = _owner_of(kv)
            held = any(_uid(svc) == owner.get("uid") for svc in holders.get(kv.key, []))
            if held or now - allocated_at < self.leak_grace:
                continue
            if await self.release_key(kv.key, expected=kv):
                log.info(
                    "released leaked allocation %s (service %s/%s does not hold it)",
                    kv.key,
                    owner.get("namespace"),
                    owner.get("name"),
                )

    async def _record_holders(self, key: str, owners: list[Obj], kv: KeyValue | None) -> None:
        """Make sure ``key`` is recorded for one of the Services holding it; report the rest."""
        is_ip = key.startswith(IP_PREFIX)
        value = key.removeprefix(IP_PREFIX if is_ip else PORT_PREFIX)
        in_range = self._ip_in_range(value) if is_ip else int(value) in self.node_port_range
        if not in_range:
            for svc in owners:
                await self._report(svc, is_ip=is_ip, value=value, out_of_range=True)
            return
        recorded = _owner_of(kv)[0].get("uid") if kv is not None else None
        if recorded not in {_uid(svc) for svc in owners}:
            keeper = min(
                owners, key=lambda s: str((s.get("metadata") or {}).get("creationTimestamp"))
            )
            if not await self._record(key, keeper, kv):
                return
            recorded = _uid(keeper)
            log.info("recorded %s for service %s", key, _key_of(keeper))
        for svc in owners:
            if _uid(svc) != recorded:
                await self._report(svc, is_ip=is_ip, value=value, out_of_range=False)

    async def _record(self, key: str, svc: Obj, kv: KeyValue | None) -> bool:
        try:
            if kv is None:
                await self.store.create(key, _record(svc))
            else:
                await self.store.update(key, _record(svc), expected_revision=kv.mod_revision)
        except (KeyExists, KeyNotFound, RevisionMismatch):
            return False  # moved on meanwhile: the next pass looks again
        return True

    async def _report(self, svc: Obj, *, is_ip: bool, value: str, out_of_range: bool) -> None:
        if self.record_event is None:
            return
        if is_ip and out_of_range:
            reason = "ClusterIPOutOfRange"
            message = (
                f"Cluster IP [IPv4]:{value} is not within the configured Service CIDR "
                f"{self.cluster_ip_range}; please recreate service"
            )
        elif is_ip:
            reason = "ClusterIPAlreadyAllocated"
            message = (
                f"Cluster IP [IPv4]:{value} was assigned to multiple services; "
                "please recreate service"
            )
        elif out_of_range:
            reason = "PortOutOfRange"
            message = (
                f"Port {value} is not within the port range {self.node_port_range}; "
                "please recreate service"
            )
        else:
            reason = "PortAlreadyAllocated"
            message = f"Port {value} was assigned to multiple services; please recreate service"
        log.warning("service %s: %s", _key_of(svc), message)
        await self.record_event(svc, reason, message, IP_REPAIR if is_ip else PORT_REPAIR)


def _key_of(svc: Obj) -> str:
    meta = svc.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def repair_event(svc: Obj, reason: str, message: str, component: str) -> Obj:
    """The Warning Event the repair loops record on a Service."""
    meta = svc.get("metadata") or {}
    stamp = now_time()
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{meta.get('name')}.{secrets.token_hex(8)}",
            "namespace": meta.get("namespace"),
        },
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Service",
            "namespace": meta.get("namespace"),
            "name": meta.get("name"),
            "uid": meta.get("uid"),
        },
        "reason": reason,
        "message": message,
        "type": "Warning",
        "count": 1,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": "",
    }


# -- updates: what a write that omits them keeps ---------------------------------------------


def carry_over_allocations(new: Obj, old: Obj) -> None:
    """Kubernetes' ``patchAllocatedValues`` and ``dropTypeDependentFields`` on an update.

    A PUT or apply that omits ``clusterIP`` or a ``nodePort`` keeps the allocated one (else every
    ``kubectl replace`` would be refused as changing the address); a Service turned into an
    ExternalName drops the address it had, one that no longer needs node ports drops the ports
    it had — when the client left those fields as they were.
    """
    new_spec, old_spec = new.get("spec"), old.get("spec") or {}
    if not isinstance(new_spec, dict):
        return
    new_type = new_spec.get("type") or "ClusterIP"
    if new_type == "ExternalName":
        if new_spec.get("clusterIP") in (None, "", old_spec.get("clusterIP")):
            for key in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
                new_spec.pop(key, None)
    elif old_spec.get("type") != "ExternalName" and new_spec.get("clusterIP") in (None, ""):
        for key in ("clusterIP", "clusterIPs"):
            if key in old_spec:
                new_spec[key] = old_spec[key]
    old_ports = {
        (p.get("port"), p.get("protocol") or "TCP"): p.get("nodePort")
        for p in old_spec.get("ports") or []
        if isinstance(p, dict)
    }
    needs_ports = wants_node_ports(new)
    for port in new_spec.get("ports") or []:
        if not isinstance(port, dict):
            continue
        previous = old_ports.get((port.get("port"), port.get("protocol") or "TCP"))
        if needs_ports and not port.get("nodePort") and previous:
            port["nodePort"] = previous
        elif not needs_ports and port.get("nodePort") == previous:
            port.pop("nodePort", None)
    if new_spec.get("type") != "LoadBalancer" or new_spec.get("externalTrafficPolicy") != "Local":
        if new_spec.get("healthCheckNodePort") == old_spec.get("healthCheckNodePort"):
            new_spec.pop("healthCheckNodePort", None)
    elif not new_spec.get("healthCheckNodePort") and old_spec.get("healthCheckNodePort"):
        new_spec["healthCheckNodePort"] = old_spec["healthCheckNodePort"]
