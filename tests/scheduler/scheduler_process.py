"""A real ``python -m services.scheduler`` subprocess for the scheduler's e2e tests.

Started on a free loopback port for ``/healthz`` and ``/metrics``; ``start()`` returns once
``/healthz`` answers (a bounded readiness poll, as ``tests/apiserver_process.py`` does: the
process gives no other signal). ``kill()`` is SIGKILL (no lease release, bindings cut off
mid-flight), ``stop()`` is SIGTERM and returns the exit status.
"""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tests.apiserver_process import free_port

READY_TIMEOUT = 30.0
REPO = Path(__file__).resolve().parents[2]


class SchedulerProcess:
    def __init__(self, *, server: str, log_path: Path, args: Sequence[str] = ()) -> None:
        self.server = server
        self.log_path = log_path
        self.args = list(args)
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "services.scheduler", "--server", self.server,
            "--port", str(self.port), "--log-level", "debug", *self.args,
        ]  # fmt: skip

    def start(self) -> SchedulerProcess:
        with self.log_path.open("ab") as log:
            log.write(f"--- start: {' '.join(self.command())}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )  # fmt: skip
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"scheduler exited with {self.proc.returncode}:\n{self.tail()}")
            if self.get("/healthz")[0] == 200:
                return self
            time.sleep(0.05)  # bounded readiness poll: the process gives no other signal
        raise RuntimeError(f"scheduler not ready after {READY_TIMEOUT}s:\n{self.tail()}")

    def get(self, path: str) -> tuple[int, str]:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2.0)
            try:
                conn.request("GET", path)
                resp = conn.getresponse()
                return resp.status, resp.read().decode()
            finally:
                conn.close()
        except OSError:
            return 0, ""

    def metric(self, metric: str, /, **labels: str) -> float:
        """One sample of ``/metrics`` (0 when absent)."""
        _, body = self.get("/metrics")
        want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        for line in body.splitlines():
            series, _, value = line.rpartition(" ")
            if series == (f"{metric}{{{want}}}" if want else metric):
                return float(value)
        return 0.0

    def tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode
