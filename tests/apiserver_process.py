"""A real ``python -m services.apiserver`` subprocess on a free loopback port, for tests.

Why: the list-watch machinery, and every component built on it, must be proven against the
real server across process boundaries — including the server being killed (SIGKILL) and
restarted on the same port and the same SQLite file, as a person would do with ``kill -9``.

``ApiServerProcess(store=..., state_dir=..., log_path=...)`` then ``start()``, ``kill()``
(SIGKILL), ``stop()`` (SIGTERM, then SIGKILL after 10 s), ``restart()`` (kill + start on the same
port). ``start()`` waits for ``/readyz`` by polling the socket with a bounded retry (the one
acceptable wait: the process gives no other signal) and blocks the caller meanwhile — it is
synchronous on purpose so it behaves the same from fixtures and tests, in real or virtual time.

The ``apiserver_process`` fixture in ``tests/conftest.py`` hands out a factory and stops
everything it started at teardown. Server output goes to ``log_path`` (shown on failure to
start).
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["ApiServerProcess", "free_port"]

READY_TIMEOUT = 30.0
"""Seconds a fresh apiserver gets to answer /readyz (generous: 2 shared cores under load)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ApiServerProcess:
    def __init__(
        self,
        *,
        store: str,
        state_dir: Path,
        log_path: Path,
        port: int | None = None,
        args: Sequence[str] = (),
    ) -> None:
        self.store = store
        self.state_dir = state_dir
        self.log_path = log_path
        self.port = port or free_port()
        self.args = list(args)
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "services.apiserver",
            "--store",
            self.store,
            "--insecure-port",
            str(self.port),
            "--state-dir",
            str(self.state_dir),
            *self.args,
        ]

    def start(self) -> ApiServerProcess:
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError("apiserver already running")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"--- start #{self.starts + 1}: {' '.join(self.command())}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=Path(__file__).resolve().parent.parent,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self.starts += 1
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"apiserver exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1.0)
                try:
                    conn.request("GET", "/readyz")
                    if conn.getresponse().status == 200:
                        return
                finally:
                    conn.close()
            except OSError:
                pass
            time.sleep(0.05)  # bounded readiness poll: the process gives no other signal
        raise RuntimeError(f"apiserver not ready after {READY_TIMEOUT}s:\n{self.tail()}")

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def kill(self) -> None:
        """SIGKILL: no shutdown handlers, connections die mid-stream."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def restart(self) -> ApiServerProcess:
        self.kill()
        return self.start()
