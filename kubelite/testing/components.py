"""How each kubelite component is started for tests and benchmarks: one builder per component.

Each builder returns an unstarted ``ComponentProcess`` running ``python -m services.<name>``
on loopback with every port ``0`` (the real port is read back from its ready line). Extra flags
go in ``args``; a later flag overrides an earlier one (argparse), so ``args`` can change any
default given here.

The apiserver's builder re-passes the port of the previous run, so ``restart()`` brings it back
on the same URL (clients and the other components keep their ``--server``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kubelite.testing.process import ComponentProcess

__all__ = ["apiserver", "controller_manager", "kubelet", "scheduler"]


def _py(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def apiserver(
    *, store: str, state_dir: Path, log_path: Path, args: Sequence[str] = (), **kw: Any
) -> ComponentProcess:
    """The apiserver over ``store`` (``memory://`` or ``sqlite:///path``)."""

    def argv(ports: Mapping[str, int]) -> list[str]:
        return _py(
            "services.apiserver", "--store", store, "--state-dir", str(state_dir),
            "--insecure-bind-address", "127.0.0.1", "--insecure-port", str(ports.get("api", 0)),
            *args,
        )  # fmt: skip

    state_dir.mkdir(parents=True, exist_ok=True)
    return ComponentProcess(argv, name="apiserver", log_path=log_path, state_dir=state_dir, **kw)


def scheduler(
    *, server: str, log_path: Path, args: Sequence[str] = (), name: str = "scheduler", **kw: Any
) -> ComponentProcess:
    argv = _py("services.scheduler", "--server", server, "--port", "0", *args)
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
    argv = _py("services.controller_manager", "--server", server, "--healthz-port", "0", *args)
    kw.setdefault("wait_ready", False)  # it prints no ready line yet
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
    argv = _py(
        "services.kubelet", "--server", server, "--node-name", node_name, "--runtime", runtime,
        "--port", "0", "--healthz-port", "0", "--state-dir", str(state_dir), *args,
    )  # fmt: skip
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
