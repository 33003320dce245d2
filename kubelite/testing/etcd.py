"""One real etcd member on loopback for tests and benchmarks: started, killed, restarted.

Why: the etcd store (``store.etcd``) is tested against the real thing — Debian's ``etcd``
binary (package ``etcd-server``, which ``make test`` installs) — never a fake. This is the one
place that starts it, so the store's conformance suite, its kill -9 tests, the apiserver's
etcd smoke test and ``bench/etcd_store.py`` share one way to run it.

A member runs as a single-member cluster with its data in ``data_dir`` — or, given
``initial_cluster``, as one member of several (start those concurrently: none is ready before a
quorum has elected a leader), possibly inside a private network namespace
(``kubelite.testing.netns``) on fixed addresses and ports; ``kill()`` sends
SIGKILL (or any signal), ``start()`` again brings it back on the same ports over the same data,
as a restart by hand would. Readiness is etcd's own log line "ready to serve client requests",
read by a thread that copies etcd's output to ``<data_dir>.log``.

Limits: etcd cannot report a port it chose itself, so unless given, its two ports are picked free by the
kernel (bind to port 0, release) just before start; if another process takes one meanwhile,
start fails and is tried once more with new ports. ``ETCD_BINARY`` names the binary
(default: ``etcd`` on the PATH); ``available()`` says whether there is one.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

__all__ = ["EtcdFailed", "EtcdMember", "available", "binary"]

READY_LINE = "ready to serve client requests"
START_TIMEOUT = 60.0
"""Seconds to wait for the ready line: a cold start on a loaded 2-core machine takes ~1 s."""


class EtcdFailed(RuntimeError):
    """etcd exited or did not become ready; the message ends with its last log lines."""


def binary() -> str | None:
    """The etcd binary to run, or None when there is none."""
    return shutil.which(os.environ.get("ETCD_BINARY", "etcd"))


def available() -> bool:
    return binary() is not None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class EtcdMember:
    """A single-member etcd cluster whose data lives in ``data_dir``."""

    def __init__(
        self,
        data_dir: Path,
        *,
        name: str = "kubelite-test",
        host: str = "127.0.0.1",
        client_port: int = 0,
        peer_port: int = 0,
        initial_cluster: Sequence[str] = (),
        launcher: Sequence[str] = (),
        group: int | None = None,
        progress_notify_interval: float | None = None,
    ) -> None:
        """``initial_cluster`` (``name=peer-url`` of every member) makes it one member of a
        larger cluster; ``launcher`` prefixes etcd's argv (``NetworkNamespace.launcher()``);
        ``group`` runs it under that group id, which firewall rules can match (``-m owner``);
        ``progress_notify_interval`` (seconds) is how often etcd tells a watch that asked for
        progress notifications that it is current (etcd's default: 10 minutes)."""
        self.data_dir = data_dir
        self.name = name
        self.host = host
        self.log_path = data_dir.with_name(data_dir.name + ".log")
        self.client_port = client_port
        self.peer_port = peer_port
        self.initial_cluster = list(initial_cluster)
        self.launcher = list(launcher)
        self.group = group
        self.progress_notify_interval = progress_notify_interval
        self._process: subprocess.Popen[str] | None = None

    @property
    def endpoint(self) -> str:
        """``host:port`` of the client API (what ``etcd://`` URLs list)."""
        return f"{self.host}:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://{self.host}:{self.peer_port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        """Start (or restart, on the same ports and data) and wait until it serves clients."""
        if self._process is not None and self._process.poll() is None:
            raise RuntimeError("etcd member already running")
        first_start = not self.client_port
        for attempt in (1, 2):
            if first_start:
                self.client_port, self.peer_port = _free_port(), _free_port()
            try:
                self._spawn()
                return
            except EtcdFailed:
                if not first_start or attempt == 2:
                    raise

    def _spawn(self) -> None:
        executable = binary()
        if executable is None:
            raise EtcdFailed("no etcd binary on the PATH (apt-get install etcd-server)")
        client = f"http://{self.endpoint}"
        peer = self.peer_url
        initial_cluster = ",".join(self.initial_cluster) or f"{self.name}={peer}"
        argv = [
            *self.launcher,
            executable,
            f"--name={self.name}",
            f"--data-dir={self.data_dir}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster={initial_cluster}",
        ]
        if self.progress_notify_interval is not None:
            interval = f"{self.progress_notify_interval}s"
            argv.append(f"--experimental-watch-progress-notify-interval={interval}")
        log = self.log_path.open("a")
        process = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            group=self.group,
            extra_groups=[] if self.group is not None else None,
        )
        self._process = process
        ready = threading.Event()

        def copy() -> None:
            assert process.stdout is not None
            with process.stdout, log:
                for line in process.stdout:
                    log.write(line)
                    log.flush()
                    if READY_LINE in line:
                        ready.set()
            ready.set()  # end of output: etcd exited

        threading.Thread(target=copy, name=f"etcd-log:{self.name}", daemon=True).start()
        if not ready.wait(START_TIMEOUT) or process.poll() is not None:
            self.kill()
            tail = "".join(self.log_path.read_text().splitlines(keepends=True)[-5:])
            raise EtcdFailed(f"etcd did not become ready on {self.endpoint}:\n{tail}")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` (SIGKILL by default) and wait until the process is gone."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        process.send_signal(sig)
        process.wait(timeout=30)

    def stop(self) -> None:
        """Stop cleanly (SIGTERM), falling back to SIGKILL."""
        try:
            self.kill(signal.SIGTERM)
        except subprocess.TimeoutExpired:
            self.kill()
