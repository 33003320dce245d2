"""A real apiserver process on ``--store etcd://`` (a real etcd member) serves the stock
kubectl: create, get, watch and delete, its objects landing in etcd under the prefix."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubelite.testing import ComponentProcess, etcd
from store import open_store

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not etcd.available(), reason="no etcd binary: apt-get install etcd-server"),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]

PREFIX = "/kubelite-e2e"


@pytest.fixture
def member(tmp_path: Path) -> Iterator[etcd.EtcdMember]:
    started = etcd.EtcdMember(tmp_path / "etcd")
    started.start()
    yield started
    started.stop()


def _kubectl_argv(server: str, workdir: Path, *args: str) -> list[str]:
    kubectl = shutil.which("kubectl")
    assert kubectl is not None
    return [kubectl, f"--server={server}", f"--cache-dir={workdir / 'kube-cache'}", *args]


def _env(workdir: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", ""), "HOME": str(workdir), "KUBECONFIG": "/dev/null"}


def kubectl(server: str, workdir: Path, *args: str) -> str:
    done = subprocess.run(
        _kubectl_argv(server, workdir, *args),
        capture_output=True,
        text=True,
        env=_env(workdir),
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stdout}{done.stderr}"
    return done.stdout


async def test_kubectl_create_get_watch_delete_through_an_apiserver_on_etcd(
    member: etcd.EtcdMember, apiserver_process, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    url = f"etcd://{member.endpoint}?prefix={PREFIX}"
    server: ComponentProcess = await asyncio.to_thread(apiserver_process, store=url)
    api = server.url

    await asyncio.to_thread(
        kubectl, api, tmp_path, "create", "configmap", "on-etcd", "--from-literal=a=b"
    )
    got = await asyncio.to_thread(
        kubectl, api, tmp_path, "get", "configmap", "on-etcd", "-o",
        "jsonpath={.data.a} {.metadata.resourceVersion}",
    )  # fmt: skip
    value, resource_version = got.split()
    assert value == "b"

    # the object is in etcd under the prefix, at the resourceVersion the apiserver reported
    store = open_store(url)
    try:
        kv = await store.get("/registry/core/configmaps/default/on-etcd")
        assert kv is not None and str(kv.mod_revision) == resource_version
    finally:
        await store.close()

    # list then watch from the list's resourceVersion: the deletion arrives whenever it lands
    watcher = await asyncio.create_subprocess_exec(
        *_kubectl_argv(api, tmp_path, "get", "configmaps", "--watch", "--output-watch-events",
                       "--no-headers"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=_env(tmp_path),
    )  # fmt: skip
    assert watcher.stdout is not None
    stdout = watcher.stdout

    async def next_line_about_the_object() -> list[str]:
        async with asyncio.timeout(60):
            while True:
                line = (await stdout.readline()).decode()
                assert line, "kubectl get --watch exited"
                if "on-etcd" in line:
                    return line.split()[:2]

    try:
        assert await next_line_about_the_object() == ["ADDED", "on-etcd"]
        await asyncio.to_thread(kubectl, api, tmp_path, "delete", "configmap", "on-etcd")
        assert await next_line_about_the_object() == ["DELETED", "on-etcd"]
        gone = await asyncio.to_thread(
            kubectl, api, tmp_path, "get", "configmaps", "--ignore-not-found", "-o", "name"
        )
        assert "on-etcd" not in gone
    finally:
        watcher.kill()
        await watcher.wait()
