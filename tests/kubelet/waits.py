"""What the kubelet's e2e tests await, and the teardown that leaves no container behind.

Pod progress is awaited through the apiserver's watch (``wait_for_object``, on
``kubelite.testing.waiting.Watcher``), never by sleeping; a process exit is awaited through a pidfd (``wait_process_exit``).
``kill_container_processes`` is the teardown that guarantees no orphan outlives a test. The
kubelet processes themselves come from ``kubelite.testing`` (``kubelite_processes.kubelet``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from api.errors import NotFound
from api.registry import REGISTRY, ResourceType
from client.rest import ApiClient
from kubelite.testing.waiting import Watcher

__all__ = [
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


async def wait_for_object(
    client: ApiClient,
    rt: ResourceType,
    name: str,
    predicate: Callable[[Obj | None], bool],
    *,
    namespace: str | None = None,
    within: float = 30.0,
) -> Obj | None:
    """Watch ``name`` until ``predicate(obj)`` holds (``obj`` None once deleted); that obj."""
    key = f"{namespace}/{name}" if namespace else name
    async with Watcher(
        client, rt, namespace=namespace, field_selector=f"metadata.name={name}"
    ) as watcher:
        await watcher.wait_until(
            lambda _o: predicate(watcher.get(key)), what=f"{rt.kind} {key}", within=within
        )
        return watcher.get(key)


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
