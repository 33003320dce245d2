"""Fixtures: a real apiserver process (memory store) and a real controller-manager process.

``cluster`` yields a ``Cluster`` with the apiserver, the controller-manager process (started
with the test's ``cm_args``, default none) and an ``ApiClient`` for the test to act and watch
through. The controller-manager's log is printed at teardown, so a failing test shows it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from client.rest import ApiClient
from kubelite.testing import ComponentProcess, Processes


@dataclass
class Cluster:
    api: ComponentProcess
    cm: ComponentProcess
    client: ApiClient
    tmp_path: Path
    processes: Processes
    started: list[ComponentProcess]

    def new_cm(self, *args: str, server: str | None = None) -> ComponentProcess:
        """Another controller-manager process (not started) with its own log."""
        proc = self.processes.controller_manager(server or self.api.url, args=args, start=False)
        self.started.append(proc)
        return proc


@pytest.fixture
def cm_args() -> tuple[str, ...]:
    return ()


@pytest.fixture
async def cluster(
    kubelite_processes: Processes, tmp_path: Path, cm_args: tuple[str, ...]
) -> AsyncIterator[Cluster]:
    api = kubelite_processes.apiserver(store="memory://")
    client = ApiClient(server=api.url)
    c = Cluster(
        api=api, cm=None, client=client, tmp_path=tmp_path, processes=kubelite_processes, started=[]
    )  # type: ignore[arg-type]
    c.cm = c.new_cm(*cm_args).start()
    try:
        yield c
    finally:
        await client.close()
        for proc in c.started:
            proc.stop()
        for proc in c.started:
            print(f"===== {proc.log_path.name} (tail) =====")
            print(proc.tail(80))
