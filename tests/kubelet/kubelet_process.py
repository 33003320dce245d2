"""A real ``python -m services.kubelet`` subprocess for e2e tests, and the waits tests need.

``KubeletProcess(server=..., node_name=..., state_dir=..., log_path=...)``: ``start()``,
``kill()`` (SIGKILL — containers survive, as with ``kill -9`` of a real kubelet), ``stop()``
(SIGTERM). Readiness and pod progress are awaited through the apiserver's watch
(``wait_for_object``), never by sleeping; a process exit is awaited through a pidfd.
``kill_container_processes`` is the teardown that guarantees no orphan outlives a test.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from api.errors import NotFound
from api.registry import REGISTRY, ResourceType
from client.rest import ApiClient

__all__ = [
    "KubeletProcess",
    "kill_container_processes",
    "pods_rt",
    "wait_for_object",
    "wait_process_exit",
]

Obj = dict[str, Any]


def pods_rt() -> ResourceType:
    rt = REGISTRY.get("", "v1", "pods")
    assert rt is not None
    return rt


class KubeletProcess:
    def __init__(
        self,
        *,
        server: str,
        node_name: str,
        state_dir: Path,
        log_path: Path,
        args: Sequence[str] = (),
    ) -> None:
        self.server = server
        self.node_name = node_name
        self.state_dir = state_dir
        self.log_path = log_path
        self.args = list(args)
        self.proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "services.kubelet",
            "--server",
            self.server,
            "--node-name",
            self.node_name,
            "--port",
            "0",
            "--healthz-port",
            "0",
            "--state-dir",
            str(self.state_dir),
            *self.args,
        ]

    def start(self) -> KubeletProcess:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=Path(__file__).resolve().parents[2],
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


async def wait_for_object(
    client: ApiClient,
    rt: ResourceType,
    name: str,
    predicate: Callable[[Obj | None], bool],
    *,
    namespace: str | None = None,
    within: float = 30.0,
) -> Obj | None:
    """List, then watch ``name`` until ``predicate(obj)`` holds (``obj`` None once deleted)."""
    selector = f"metadata.name={name}"
    async with asyncio.timeout(within):
        while True:
            listed = await client.list(rt, namespace=namespace, field_selector=selector)
            current: Obj | None = listed["items"][0] if listed["items"] else None
            if predicate(current):
                return current
            rv = listed["metadata"]["resourceVersion"]
            async with client.watch(
                rt, namespace=namespace, field_selector=selector, resource_version=rv
            ) as stream:
                async for event in stream:
                    if event.type == "BOOKMARK":
                        continue
                    current = None if event.type == "DELETED" else event.object
                    if predicate(current):
                        return current


async def wait_process_exit(pid: int, *, within: float = 30.0) -> None:
    """Return once ``pid`` has terminated (a pidfd becomes readable), without polling."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    loop.add_reader(fd, lambda: done.done() or done.set_result(None))
    try:
        async with asyncio.timeout(within):
            await done
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def kill_container_processes(state_dir: Path) -> None:
    """SIGKILL every container process group and shim recorded under ``state_dir``."""
    for pid_file in state_dir.glob("**/containers/*.pid.json"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            pids = json.loads(pid_file.read_text())
            for pid in (pids["pid"], pids["shimPid"]):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)


async def get_or_none(client: ApiClient, rt: ResourceType, name: str, namespace: str) -> Obj | None:
    try:
        return await client.get(rt, name, namespace=namespace)
    except NotFound:
        return None
