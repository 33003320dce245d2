"""Fixtures for kubelet tests: runtimes over a temporary state dir, torn down without orphans."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.kubelet.runtime.base import PodSandbox
from services.kubelet.runtime.images import ImageCatalog, ImageStore
from services.kubelet.runtime.process import ProcessRuntime
from services.kubelet.runtime.sim import SimRuntime


def kill_leftovers(state_dir: Path) -> None:
    """SIGKILL every process group a shim recorded under ``state_dir`` (test teardown only)."""
    for pid_file in state_dir.glob("**/containers/*.pid.json"):
        import json

        with contextlib.suppress(OSError, ValueError, KeyError):
            pids = json.loads(pid_file.read_text())
            for pid in (pids["pid"], pids["shimPid"]):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)


@pytest.fixture
async def process_runtime(tmp_path: Path) -> AsyncIterator[ProcessRuntime]:
    images = ImageStore(catalog=ImageCatalog(), state_dir=tmp_path)
    rt = ProcessRuntime(state_dir=tmp_path, pod_cidr="127.201.0.0/16", images=images)
    await rt.start()
    try:
        yield rt
    finally:
        if not rt.closed:
            for uid in rt.list_pod_uids():
                await rt.remove_pod_sandbox(uid)
            await rt.close()
        kill_leftovers(tmp_path)


@pytest.fixture
async def sim_runtime() -> AsyncIterator[SimRuntime]:
    rt = SimRuntime(pod_cidr="127.202.0.0/24")
    await rt.start()
    yield rt
    await rt.close()


def sandbox(name: str = "demo", uid: str | None = None) -> PodSandbox:
    return PodSandbox(uid=uid or f"uid-{name}", namespace="default", name=name)
