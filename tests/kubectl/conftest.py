"""Fixtures of the kubectl tests: one apiserver process per session, a kubectl per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelite.testing import ComponentProcess, Processes
from tests.kubectl.harness import Kubectl


@pytest.fixture(scope="session")
def kubectl_apiserver(session_processes: Processes) -> ComponentProcess:
    """A real apiserver process over the memory store; tests keep apart by namespace and name."""
    return session_processes.apiserver(store="memory://")


@pytest.fixture
def kubectl(kubectl_apiserver: ComponentProcess, tmp_path: Path) -> Kubectl:
    return Kubectl.on(kubectl_apiserver.url, workdir=tmp_path)
