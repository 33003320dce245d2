"""The ``kubernetes`` Service's endpoints: every live apiserver names itself behind it.

Why: the ``kubernetes`` Service in ``default`` has no selector, so no controller fills its
endpoints; Kubernetes' apiservers write them themselves (the "lease" endpoint reconciler).
Without them the Service's ClusterIP leads nowhere and the proxy refuses connections to it; with
them ``https://kubernetes.default.svc`` inside a pod reaches an apiserver, as client libraries'
in-cluster configuration expects.

How several apiservers share it (Kubernetes' ``pkg/controlplane/reconcilers/lease.go``, with a
Lease object where Kubernetes keeps a TTL'd etcd key): every ``interval`` seconds (10, as
Kubernetes) each apiserver

1. renews its own Lease ``kube-system/apiserver-<host>-<address>-<port>`` (label
   ``k8s.io/component: kube-apiserver``, ``spec.leaseDurationSeconds`` 15 as Kubernetes'
   lease TTL, its ``address:port`` in the annotation ``kubelite.io/advertise-address``);
2. lists those Leases and keeps the ones renewed within their duration — the live apiservers;
3. makes the Endpoints ``default/kubernetes`` (labelled
   ``endpointslice.kubernetes.io/skip-mirror: "true"`` so the mirroring controller leaves it
   alone) and the EndpointSlice ``default/kubernetes`` name exactly those, as port ``https``.

Every write is a compare-and-swap re-read on conflict, so apiservers reconciling at once
converge on the same answer. An apiserver that stops cleanly deletes its Lease and reconciles
once more, so it leaves the endpoints at once; one that is killed drops out when its Lease
expires (at most 15 s, plus one interval).

Limits: "renewed within its duration" compares the Lease's ``renewTime`` with this apiserver's
wall clock, so the apiservers' clocks must agree to well within 15 s (Kubernetes' TTL'd keys
avoid that; etcd leases are not in the store contract). Endpoints carry one subset per port;
the EndpointSlice (one port per slice) names the apiservers of the port most of them serve on
(the lowest on a tie) — apiservers behind one Service serve on one port, as in Kubernetes.
"""

from __future__ import annotations

import asyncio
import copy
import ipaddress
import logging
import re
import socket
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from api.errors import NotFound, StatusError
from api.meta import now_micro_time, parse_time
from services.apiserver.context import ApiContext
from services.apiserver.strategy import default_object, prepare_for_create

__all__ = [
    "LEASE_LABEL",
    "advertised_address",
    "keep_kubernetes_endpoints",
    "lease_name",
    "live_apiservers",
    "reconcile_kubernetes_endpoints",
]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Address = tuple[str, int]
NAME = "kubernetes"
NAMESPACE = "default"
PORT_NAME = "https"
LEASE_NAMESPACE = "kube-system"
LEASE_LABEL = ("k8s.io/component", "kube-apiserver")
ADDRESS_ANNOTATION = "kubelite.io/advertise-address"
LEASE_DURATION = 15
"""Seconds a Lease counts as live after its renewal: Kubernetes' endpoint reconciler TTL."""
RECONCILE_INTERVAL = 10.0
"""Seconds between renewals: Kubernetes' ``EndpointReconcilerInterval``."""


def advertised_address(bind_address: str) -> str:
    """The address pods should use: the bind address, or loopback when bound to every address."""
    try:
        if ipaddress.ip_address(bind_address).is_unspecified:
            return "127.0.0.1"
    except ValueError:  # a host name: what it resolves to is the caller's business
        pass
    return bind_address


def lease_name(address: str, port: int, *, host: str | None = None) -> str:
    """``apiserver-<host>-<address>-<port>``: unique for apiservers on one machine (their
    addresses differ) and in containers (their host names differ, their address may be the
    same loopback one). Characters a Lease name cannot hold become dashes."""
    host = socket.gethostname() if host is None else host
    raw = f"apiserver-{host}-{address}-{port}".lower()
    return re.sub(r"[^a-z0-9.-]", "-", raw)[:253].strip("-.")


def _groups(addresses: Iterable[Address]) -> list[tuple[int, list[str]]]:
    """(port, sorted addresses) for each port, the port most apiservers serve on first."""
    by_port: dict[int, set[str]] = {}
    for address, port in addresses:
        by_port.setdefault(port, set()).add(address)
    ordered = sorted(by_port.items(), key=lambda item: (-len(item[1]), item[0]))
    return [(port, sorted(ips, key=_ip_order)) for port, ips in ordered]


def _ip_order(address: str) -> tuple[int, Any]:
    try:
        return (0, ipaddress.ip_address(address))
    except ValueError:
        return (1, address)


def _endpoints(addresses: Iterable[Address]) -> tuple[Obj, Obj]:
    """The wanted Endpoints and EndpointSlice bodies (the parts this module owns)."""
    groups = _groups(addresses)
    endpoints: Obj = {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"},
        },
        "subsets": [
            {
                "addresses": [{"ip": ip} for ip in ips],
                "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}],
            }
            for port, ips in sorted(groups)
        ],
    }
    port, ips = groups[0] if groups else (443, [])
    slice_: Obj = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "labels": {"kubernetes.io/service-name": NAME},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in ips],
        "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}],
    }
    return endpoints, slice_


async def _ensure(
    ctx: ApiContext, group: str, plural: str, wanted: Obj, fields: tuple[str, ...]
) -> None:
    """Create ``wanted`` or bring the existing object's ``fields`` and labels in line."""
    rt = ctx.resource(group, plural)
    storage = ctx.storage(rt)

    async def create() -> Obj:
        obj = copy.deepcopy(wanted)
        prepare_for_create(rt, obj)
        default_object(rt, obj)
        return obj

    async def mutate(current: Obj) -> Obj | None:
        labels = current["metadata"].get("labels") or {}
        if all(current.get(f) == wanted[f] for f in fields) and (
            labels.items() >= wanted["metadata"]["labels"].items()
        ):
            return None
        new = copy.deepcopy(current)
        for f in fields:
            new[f] = copy.deepcopy(wanted[f])
        new["metadata"]["labels"] = {**labels, **wanted["metadata"]["labels"]}
        default_object(rt, new)
        return new

    await storage.guaranteed_update(NAMESPACE, NAME, mutate, create=create)


async def reconcile_kubernetes_endpoints(ctx: ApiContext, addresses: Iterable[Address]) -> None:
    """Make ``default/kubernetes`` Endpoints and EndpointSlice name exactly ``addresses``."""
    endpoints, slice_ = _endpoints(addresses)
    await _ensure(ctx, "", "endpoints", endpoints, ("subsets",))
    await _ensure(
        ctx, "discovery.k8s.io", "endpointslices", slice_, ("addressType", "endpoints", "ports")
    )


async def renew_lease(ctx: ApiContext, *, address: str, port: int) -> None:
    """Create or renew this apiserver's Lease."""
    rt = ctx.resource("coordination.k8s.io", "leases")
    storage = ctx.storage(rt)
    name = lease_name(address, port)
    wanted_meta = {
        "labels": dict([LEASE_LABEL]),
        "annotations": {ADDRESS_ANNOTATION: f"{address}:{port}"},
    }
    spec = {"holderIdentity": name, "leaseDurationSeconds": LEASE_DURATION}

    async def create() -> Obj:
        obj: Obj = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": LEASE_NAMESPACE, **wanted_meta},
            "spec": {**spec, "renewTime": now_micro_time()},
        }
        prepare_for_create(rt, obj)
        default_object(rt, obj)
        return obj

    async def renew(current: Obj) -> Obj:
        new = copy.deepcopy(current)
        meta = new["metadata"]
        for field, values in wanted_meta.items():
            meta[field] = {**(meta.get(field) or {}), **values}
        new["spec"] = {**(new.get("spec") or {}), **spec, "renewTime": now_micro_time()}
        return new

    await storage.guaranteed_update(LEASE_NAMESPACE, name, renew, create=create)


async def drop_lease(ctx: ApiContext, *, address: str, port: int) -> None:
    """Delete this apiserver's Lease (a clean shutdown)."""
    storage = ctx.storage(ctx.resource("coordination.k8s.io", "leases"))
    name = lease_name(address, port)
    current = await storage.get_or_none(LEASE_NAMESPACE, name)
    if current is None:
        return
    try:
        await storage.delete(
            LEASE_NAMESPACE, name, expected_rv=int(current["metadata"]["resourceVersion"])
        )
    except (NotFound, StatusError):  # gone, or renewed meanwhile: it will expire
        return


async def live_apiservers(ctx: ApiContext, *, now: datetime | None = None) -> list[Address]:
    """``(address, port)`` of every apiserver whose Lease was renewed within its duration."""
    storage = ctx.storage(ctx.resource("coordination.k8s.io", "leases"))
    now = now or datetime.now(UTC)
    page = await storage.list(LEASE_NAMESPACE)
    key, value = LEASE_LABEL
    live: list[Address] = []
    for lease in page.items:
        meta = lease.get("metadata") or {}
        if (meta.get("labels") or {}).get(key) != value:
            continue
        where = str((meta.get("annotations") or {}).get(ADDRESS_ANNOTATION) or "")
        spec = lease.get("spec") or {}
        try:
            renewed = parse_time(str(spec.get("renewTime") or ""))
            address, _, port = where.rpartition(":")
            served = (address, int(port))
        except ValueError:
            continue
        duration = timedelta(seconds=int(spec.get("leaseDurationSeconds") or LEASE_DURATION))
        if address and renewed + duration > now:
            live.append(served)
    return live


async def _round(ctx: ApiContext, *, address: str, port: int) -> None:
    await renew_lease(ctx, address=address, port=port)
    live = await live_apiservers(ctx)
    await reconcile_kubernetes_endpoints(ctx, live)


async def keep_kubernetes_endpoints(
    ctx: ApiContext, *, address: str, port: int, interval: float = RECONCILE_INTERVAL
) -> None:
    """Renew this apiserver's Lease and reconcile at once and then every ``interval`` seconds,
    until cancelled; then drop the Lease and reconcile once more without it."""
    log.info(
        "the kubernetes Service's endpoints name %s:%d among the live apiservers", address, port
    )
    try:
        while True:
            try:
                await _round(ctx, address=address, port=port)
            except StatusError as exc:  # refused (a conflict storm, say): try again next round
                log.warning(
                    "cannot write the kubernetes Service's endpoints: %s; will retry in %.0f s",
                    exc,
                    interval,
                )
            await asyncio.sleep(interval)
    except asyncio.CancelledError:
        await _leave(ctx, address=address, port=port)
        raise


async def _leave(ctx: ApiContext, *, address: str, port: int) -> None:
    """On shutdown: this apiserver leaves the endpoints now rather than when its Lease expires."""
    try:
        await drop_lease(ctx, address=address, port=port)
        others = [a for a in await live_apiservers(ctx) if a != (address, port)]
        if others:
            await reconcile_kubernetes_endpoints(ctx, others)
    except Exception as exc:  # the store may already be closing: the Lease then expires
        log.info("could not leave the kubernetes Service's endpoints: %s", exc)
