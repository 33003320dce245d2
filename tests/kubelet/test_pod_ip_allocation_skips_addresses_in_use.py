"""A pod never gets a loopback address some other socket on the host already uses.

Two clusters on one host share 127/8: if another cluster's pod (or any program) listens on
``127.x.y.2:80``, handing ``127.x.y.2`` to a pod here means that pod cannot bind its port. The
kubelet's IPAM reads the kernel's socket tables and skips such addresses — TCP listeners, UDP
sockets, and IPv4-mapped IPv6 sockets alike.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path

import pytest

from services.kubelet.runtime.images import ImageCatalog, ImageStore
from services.kubelet.runtime.ipam import PodIPAllocator, bound_loopback_addresses
from services.kubelet.runtime.process import ProcessRuntime
from tests.kubelet.conftest import sandbox
from tests.kubelet.waits import kill_container_processes


@pytest.fixture
def network() -> IPv4Network:
    # a /24 of this test's own, away from the ranges other kubelet tests pick
    return IPv4Network(f"127.{random.randint(203, 209)}.{random.randint(0, 255)}.0/24")


@pytest.fixture
def squatters(network: IPv4Network) -> Iterator[set[str]]:
    """Sockets of "another cluster" on the range's first three pod addresses."""
    first = [str(network[i]) for i in (2, 3, 4)]
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tcp6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    try:
        tcp.bind((first[0], 0))
        tcp.listen()
        udp.bind((first[1], 0))
        tcp6.bind((f"::ffff:{first[2]}", 0))
        tcp6.listen()
        yield set(first)
    finally:
        for s in (tcp, udp, tcp6):
            s.close()


def test_the_kernel_tables_show_every_kind_of_bound_socket(squatters: set[str]) -> None:
    found = {str(IPv4Address(n)) for n in bound_loopback_addresses()}
    assert squatters <= found


def test_the_allocator_skips_addresses_in_use(network: IPv4Network, squatters: set[str]) -> None:
    ipam = PodIPAllocator(str(network), in_use=bound_loopback_addresses)
    ip = ipam.allocate("uid-1")
    assert ip not in squatters and ip in {str(a) for a in network.hosts()}


async def test_the_process_runtime_gives_a_pod_a_free_address(
    tmp_path: Path, network: IPv4Network, squatters: set[str]
) -> None:
    images = ImageStore(catalog=ImageCatalog(), state_dir=tmp_path)
    runtime = ProcessRuntime(state_dir=tmp_path, pod_cidr=str(network), images=images)
    await runtime.start()
    try:
        ip = await runtime.run_pod_sandbox(sandbox())
        assert ip not in squatters, f"{ip} is already bound by another socket"
        # the address really is free: a pod's server can listen on it
        with socket.socket() as server:
            server.bind((ip, 0))
            server.listen()
    finally:
        for uid in runtime.list_pod_uids():
            await runtime.remove_pod_sandbox(uid)
        await runtime.close()
        kill_container_processes(tmp_path)
