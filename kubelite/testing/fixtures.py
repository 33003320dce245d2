"""The ``kubelite.testing`` pytest fixtures (registered by ``pytest_plugins = ["kubelite.testing"]``).

``kubelite_processes``, ``kubelite_apiserver`` and ``kubelite_control_plane``: see the package
docstring. Kept out of ``kubelite/testing/__init__.py`` so the launcher imports without pytest.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kubelite.testing import ComponentProcess, ControlPlane, Processes, kubeconfig


@pytest.fixture
def kubelite_processes(tmp_path: Path) -> Iterator[Processes]:
    processes = Processes(tmp_path)
    try:
        yield processes
    finally:
        processes.stop_all()


@pytest.fixture
def kubelite_apiserver(kubelite_processes: Processes) -> ComponentProcess:
    return kubelite_processes.apiserver(store="memory://")


@pytest.fixture
def kubelite_control_plane(kubelite_processes: Processes, tmp_path: Path) -> ControlPlane:
    api = kubelite_processes.apiserver(store="memory://")
    kubelite_processes.scheduler(api.url)
    kubelite_processes.controller_manager(api.url)
    kubelite_processes.kubelet(api.url, "sim", args=["--nodes", "2"])
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig(api.url))
    return ControlPlane(url=api.url, kubeconfig=path, processes=kubelite_processes)
