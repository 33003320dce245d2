"""How each kubelite component is started for tests and benchmarks: one builder per component.

Each builder returns an unstarted ``ComponentProcess`` running the command line
``kubelite.commands`` builds (the one argv source ``kubelite up``, compose and the benchmarks
use too) on loopback with every port ``0`` (the real port is read back from its ready line).
Extra flags go in ``args``; a later flag overrides an earlier one (argparse), so ``args`` can
change any default given here.

The apiserver's builder re-passes the port of the previous run, so ``restart()`` brings it back
on the same URL (clients and the other components keep their ``--server``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kubelite import commands
from kubelite.testing.process import ComponentProcess

__all__ = ["apiserver", "controller_manager", "dns", "kubelet", "scheduler"]


def apiserver(
    *,
    store: str,
    state_dir: Path,
    log_path: Path,
    args: Sequence[str] = (),
    secure: bool = False,
    **kw: Any,
) -> ComponentProcess:
    """The apiserver over ``store`` (``memory://`` or ``sqlite:///path``); with ``secure``
    its TLS port too, on 127.0.0.1 (a free port, ``port_of("secure")``), certificates made in
    ``<state_dir>/pki`` unless ``args`` name them."""

    def argv(ports: Mapping[str, int]) -> list[str]:
        return commands.apiserver(
            store=store, state_dir=state_dir, bind_address="127.0.0.1",
            port=ports.get("api", 0), secure_bind_address="127.0.0.1",
            secure_port=ports.get("secure", 0) if secure else -1, extra=args,
        ).python()  # fmt: skip

    state_dir.mkdir(parents=True, exist_ok=True)
    return ComponentProcess(argv, name="apiserver", log_path=log_path, state_dir=state_dir, **kw)


def scheduler(
    *, server: str, log_path: Path, args: Sequence[str] = (), name: str = "scheduler", **kw: Any
) -> ComponentProcess:
    argv = commands.scheduler(
        server=server, healthz_bind_address="127.0.0.1", healthz_port=0, extra=args
    ).python()
    return ComponentProcess(
        argv,
        name=name,
        component="scheduler",
        endpoint="health",
        log_path=log_path,
        **kw,
    )


def controller_manager(
    *,
    server: str,
    log_path: Path,
    args: Sequence[str] = (),
    name: str = "controller-manager",
    **kw: Any,
) -> ComponentProcess:
    argv = commands.controller_manager(
        server=server, healthz_bind_address="127.0.0.1", healthz_port=0, extra=args
    ).python()
    return ComponentProcess(
        argv, name=name, component="controller-manager", endpoint="health", log_path=log_path,
        **kw,
    )  # fmt: skip


def kubelet(
    *,
    server: str,
    node_name: str,
    state_dir: Path,
    log_path: Path,
    runtime: str = "sim",
    args: Sequence[str] = (),
    **kw: Any,
) -> ComponentProcess:
    """A kubelet for ``node_name`` (``runtime`` sim or process)."""
    argv = commands.kubelet(
        server=server, node_name=node_name, runtime=runtime, address="127.0.0.1", port=0,
        healthz_bind_address="127.0.0.1", healthz_port=0, state_dir=state_dir, extra=args,
    ).python()  # fmt: skip
    state_dir.mkdir(parents=True, exist_ok=True)
    return ComponentProcess(
        argv,
        name=node_name,
        component="kubelet",
        endpoint="server",
        log_path=log_path,
        state_dir=state_dir,
        **kw,
    )


def dns(
    *,
    server: str,
    address: str,
    log_path: Path,
    port: int = 0,
    args: Sequence[str] = (),
    **kw: Any,
) -> ComponentProcess:
    """The cluster DNS answering on ``address:port`` (0: any free port; ``port_of("dns")``),
    registering ``kube-dns`` with that address as its ClusterIP."""
    argv = commands.dns(
        server=server, cluster_dns_ip=address, dns_port=port, healthz_bind_address="127.0.0.1",
        healthz_port=0, extra=args,
    ).python()  # fmt: skip
    return ComponentProcess(
        argv, name="dns", component="dns", endpoint="dns", log_path=log_path, **kw
    )
