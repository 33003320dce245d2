"""Fixtures of the kubectl tests: one apiserver process per session, a kubectl per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.apiserver_process import ApiServerProcess
from tests.kubectl.harness import Kubectl, kubectl_binary


@pytest.fixture(scope="session")
def kubectl_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServerProcess]:
    """A real apiserver process over the memory store; tests keep apart by namespace and name."""
    base = tmp_path_factory.mktemp("kubectl-apiserver")
    proc = ApiServerProcess(
        store="memory://", state_dir=base / "state", log_path=base / "apiserver.log"
    ).start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def kubectl(kubectl_apiserver: ApiServerProcess, tmp_path: Path) -> Kubectl:
    binary = kubectl_binary()
    if binary is None:
        pytest.skip("no kubectl on the PATH")
    cache = tmp_path / "kube-cache"
    cache.mkdir()
    return Kubectl(binary=binary, server=kubectl_apiserver.url, cache_dir=cache, workdir=tmp_path)
