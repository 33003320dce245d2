"""Driving the stock kubectl binary against a real kubelite apiserver process.

The apiserver runs as its own OS process (``tests/apiserver_process.py``, memory store) on a
free loopback port, once per test session; every test talks to it only through kubectl, with ``KUBECONFIG=/dev/null`` and a
private ``--cache-dir`` so no discovery or dispatcher cache leaks in from the machine. kubectl
is run as ``kubectl.1.32`` from the folder the ``kubectl`` dispatcher on the PATH links to
(bypassing the dispatcher), falling back to whatever ``kubectl`` is on the PATH.
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.factories import Obj, yaml_of

REPO = Path(__file__).resolve().parents[2]
KUBECTL_TIMEOUT_S = 60  # one kubectl invocation; discovery + a request take well under a second


def kubectl_binary(minor: int = 32) -> str | None:
    """``kubectl.1.<minor>`` beside the PATH dispatcher; for 1.32 any ``kubectl`` will do."""
    found = shutil.which("kubectl")
    if found is None:
        return None
    pinned = Path(os.path.realpath(found)).parent / f"kubectl.1.{minor}"
    if pinned.exists():
        return str(pinned)
    return found if minor == 32 else None


@dataclass(frozen=True)
class Kubectl:
    binary: str
    server: str
    cache_dir: Path
    workdir: Path

    @classmethod
    def on(cls, server: str, *, workdir: Path, minor: int = 32) -> Kubectl:
        """kubectl 1.``minor`` against ``server``, its cache in ``workdir``; the test is
        skipped when that kubectl is not installed."""
        binary = kubectl_binary(minor)
        if binary is None:
            pytest.skip(f"kubectl 1.{minor} is not installed")
        cache = workdir / "kube-cache"
        cache.mkdir(exist_ok=True)
        return cls(binary=binary, server=server, cache_dir=cache, workdir=workdir)

    def __call__(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl; with ``check`` a non-zero exit fails the test showing stdout and stderr."""
        env = self.env()
        cmd = [self.binary, f"--server={self.server}", f"--cache-dir={self.cache_dir}", *args]
        done = subprocess.run(
            cmd,
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            cwd=self.workdir,
            timeout=KUBECTL_TIMEOUT_S,
            check=False,
        )
        if check and done.returncode != 0:
            pytest.fail(
                f"kubectl {' '.join(args)} exited {done.returncode}\n"
                f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
            )
        return done

    def apply(self, manifest: str | Obj, *args: str) -> subprocess.CompletedProcess[str]:
        """``kubectl apply -f -`` of ``manifest`` (YAML text, or an object rendered as YAML)."""
        text = manifest if isinstance(manifest, str) else yaml_of(manifest)
        return self("apply", "-f", "-", *args, stdin=text)

    def env(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(self.workdir),
            "KUBECONFIG": "/dev/null",
        }

    def start(self, *args: str) -> StreamingKubectl:
        """Start a long-running kubectl (``get -w``) whose stdout lines arrive on a queue."""
        cmd = [self.binary, f"--server={self.server}", f"--cache-dir={self.cache_dir}", *args]
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env(),
            cwd=self.workdir,
        )
        return StreamingKubectl(proc)


class StreamingKubectl:
    """A running kubectl whose output lines are read on a thread into a queue."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._drainer = threading.Thread(target=self._drain, name="kubectl-stdout", daemon=True)
        self._drainer.start()

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def next_line(self, timeout: float = KUBECTL_TIMEOUT_S) -> str:
        """The next output line; fails the test if kubectl exits or stays silent too long."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"kubectl printed nothing for {timeout}s")
        if line is None:
            stderr = self.proc.stderr.read() if self.proc.stderr else ""
            pytest.fail(f"kubectl exited {self.proc.wait()} early; stderr:\n{stderr}")
        return line

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._drainer.join(timeout=10)  # ends at EOF, right after the process does
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
