"""``kubelite up --store etcd`` runs the cluster on a local etcd member it starts (data in
``<state-dir>/etcd``); ``kubelite etcd snapshot save`` backs it up while it runs; after Ctrl-C,
wiping the member's data and ``kubelite etcd snapshot restore``, the next ``kubelite up``
serves the same objects — same uids, same resourceVersions."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import socket
import sys
from pathlib import Path

import pytest

from api.registry import REGISTRY
from client.rest import ApiClient
from kubelite.testing import etcd

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(400),
    pytest.mark.skipif(not etcd.available(), reason="no etcd binary: apt-get install etcd-server"),
    pytest.mark.skipif(shutil.which("etcdctl") is None, reason="no etcdctl: apt-get etcd-client"),
]

ROOT = Path(__file__).resolve().parents[2]
CONFIG_MAPS = REGISTRY.require("", "ConfigMap")
BANNER = re.compile(r"kubelite is up: API at (http://[^\s:/]+:\d+)")


def _two_free_ports() -> int:
    """A port P with P and P + 1 free (the member's client and peer ports)."""
    for _ in range(100):
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            base = int(first.getsockname()[1])
            with socket.socket() as second:
                try:
                    second.bind(("127.0.0.1", base + 1))
                except OSError:
                    continue
                return base
    raise AssertionError("no two consecutive free ports")


async def _up(state_dir: Path, etcd_port: int, log: Path) -> tuple[asyncio.subprocess.Process, str]:
    """``kubelite up --store etcd`` with no nodes, until its banner: the process and the API."""
    argv = [
        sys.executable, "-m", "kubelite", "up", "--state-dir", str(state_dir), "--nodes", "0",
        "--store", "etcd", "--etcd-port", str(etcd_port), "--port", "0", "--secure-port", "-1",
        "--scheduler-port", "0", "--controller-manager-port", "0", "--proxy-port", "0",
        "--dns-health-port", "0", "--ready-timeout", "120s", "--no-color",
    ]  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    with log.open("a") as out:
        while raw := await asyncio.wait_for(proc.stdout.readline(), 180):
            line = raw.decode(errors="replace")
            out.write(line)
            if match := BANNER.search(line):
                # keep draining its output, so the children never block on a full pipe
                asyncio.get_running_loop().create_task(_drain(proc, log), name="e2e up output")
                return proc, match[1]
    raise AssertionError(f"kubelite up ended without a banner; see {log}")


async def _drain(proc: asyncio.subprocess.Process, log: Path) -> None:
    assert proc.stdout is not None
    with log.open("a") as out:
        while raw := await proc.stdout.readline():
            out.write(raw.decode(errors="replace"))


async def _interrupt(proc: asyncio.subprocess.Process) -> None:
    proc.send_signal(signal.SIGINT)
    assert await asyncio.wait_for(proc.wait(), 90) == 0


async def _kubelite(*args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kubelite", *args, cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await proc.communicate()
    assert proc.returncode == 0, out.decode()
    return out.decode()


def _identity(items: list[dict[str, object]]) -> dict[str, tuple[object, object, object]]:
    return {
        str(meta["name"]): (meta["uid"], meta["resourceVersion"], item.get("data"))
        for item in items
        if isinstance(meta := item["metadata"], dict)
    }


async def test_snapshot_wipe_restore_brings_back_the_same_objects(tmp_path: Path) -> None:
    state, log = tmp_path / "state", tmp_path / "up.log"
    etcd_port = _two_free_ports()
    proc, api = await _up(state, etcd_port, log)
    try:
        assert (state / "etcd" / "etcd-1" / "member").is_dir()
        async with ApiClient(server=api) as client:
            for i in range(10):
                await client.create(
                    CONFIG_MAPS,
                    {"metadata": {"name": f"kept-{i}"}, "data": {"i": str(i)}},
                    namespace="default",
                )
            before = _identity((await client.list(CONFIG_MAPS, namespace="default"))["items"])
        snapshot = tmp_path / "backup.db"
        said = await _kubelite(
            "etcd", "snapshot", "save", str(snapshot), f"--endpoints=127.0.0.1:{etcd_port}"
        )
        assert "snapshot saved" in said and snapshot.stat().st_size > 0
    finally:
        await _interrupt(proc)

    shutil.rmtree(state / "etcd")
    await _kubelite(
        "etcd", "snapshot", "restore", str(snapshot),
        f"--data-dir={state / 'etcd' / 'etcd-1'}", "--name=etcd-1",
        f"--peer-url=http://127.0.0.1:{etcd_port + 1}",
    )  # fmt: skip

    proc, api = await _up(state, etcd_port, log)
    try:
        async with ApiClient(server=api) as client:
            after = _identity((await client.list(CONFIG_MAPS, namespace="default"))["items"])
    finally:
        await _interrupt(proc)
    assert len(before) >= 10
    assert after == before
