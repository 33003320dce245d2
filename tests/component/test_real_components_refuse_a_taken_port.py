"""Every real component refuses a port in use the same way, as Kubernetes' do: one line
naming the address, the flag and what to do, and exit code 3 — which ``kubelite up`` does not
restart. (The scheduler used to exit, the others to warn and go on without the socket.)"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubelite import commands

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
NOWHERE = "http://127.0.0.1:9"  # discard port: nothing answers, and no component gets that far


@pytest.fixture
def taken() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def _run(command: commands.Command) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command.python(), capture_output=True, text=True, cwd=ROOT, timeout=60, check=False
    )


@pytest.mark.parametrize(
    ("component", "flag"),
    [
        ("apiserver", "--insecure-port"),
        ("scheduler", "--healthz-port"),
        ("controller-manager", "--healthz-port"),
        ("kubelet", "--healthz-port"),
        ("kubelet", "--port"),
    ],
)
def test_a_taken_port_is_one_line_and_exit_code_3(
    component: str, flag: str, taken: int, tmp_path: Path
) -> None:
    if component == "apiserver":
        command = commands.apiserver(store="memory://", state_dir=tmp_path, port=taken)
    elif component == "scheduler":
        command = commands.scheduler(server=NOWHERE, healthz_port=taken)
    elif component == "controller-manager":
        command = commands.controller_manager(server=NOWHERE, healthz_port=taken)
    else:
        ports = {"--port": taken, "--healthz-port": 0}
        if flag == "--healthz-port":
            ports = {"--port": 0, "--healthz-port": taken}
        command = commands.kubelet(
            server=NOWHERE, node_name="n", runtime="sim", state_dir=tmp_path,
            port=ports["--port"], healthz_port=ports["--healthz-port"],
        )  # fmt: skip
    done = _run(command)
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"kubelite {component}: cannot listen on 127.0.0.1:{taken} ({flag}): the port is in "
        f"use by another process; stop that process, or pass {flag}=0 to take any free port"
    )
