"""A real apiserver process on ``--store etcd://`` (a real etcd member) serves the stock
kubectl: create, get, watch and delete, its objects landing in etcd under the prefix; a write
over etcd's request limit is a 413 in etcd's words, and with etcd gone writes are 503."""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from kubelite.testing import ComponentProcess, etcd
from store import open_store
from tests.factories import container, pod

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
    url = f"etcd://{member.endpoint}?prefix={PREFIX}&timeout=2"
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

    configmaps = f"{api}/api/v1/namespaces/default/configmaps"
    pods = f"{api}/api/v1/namespaces/default/pods"
    async with aiohttp.ClientSession() as http:
        # a ConfigMap may hold 1 MiB, etcd 1.5 MiB; a pod has no limit of its own
        env = [{"name": "BIG", "value": "x" * (2 * 1024 * 1024)}]
        big = pod("too-big", container("main", env=env))
        body = io.BytesIO(json.dumps(big).encode())  # aiohttp streams a file-like body
        headers = {"Content-Type": "application/json"}
        async with http.post(pods, data=body, headers=headers) as resp:
            status = await resp.json()
            assert (resp.status, status["reason"]) == (413, "RequestEntityTooLarge")
            assert "etcdserver: request is too large" in status["message"]

        await asyncio.to_thread(member.kill)
        async with http.post(configmaps, json={"metadata": {"name": "no-etcd"}}) as resp:
            status = await resp.json()
            assert (resp.status, status["reason"]) == (503, "ServiceUnavailable")
            assert member.endpoint in status["message"]
