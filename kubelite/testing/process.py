"""One real kubelite component as an OS process: started, read back, signalled, restarted.

Why: the tests, the benchmarks and operators' own tests all need the same thing — run
``python -m services.<component>`` on loopback, know when it is ready and which ports it
bound, keep its output, kill it (any signal) and start it again. This is the one place that
does it; nothing else in the tree spawns a component.

Ports are never guessed: a component is started with port ``0`` and its real port is read
back from the line it prints once the socket is bound (no bind-release-reuse race)::

    kubelite: <component> <endpoint> listening on http://<host>:<port>
    kubelite: <component> ready

(``component`` is apiserver, scheduler, controller-manager, kubelet or dns; ``endpoint`` is
api, secure, health, server or dns — the DNS server's line says ``dns://``, the apiserver's
secure port's ``https://``). ``ComponentProcess.ports`` maps endpoint -> port, ``url(endpoint)`` builds
the URL. A restart passes the ports of the previous run back to the argv builder, so a
component comes back on the same port (as ``kill -9`` and a restart by hand would) — that reuse
is the one place a port is bound twice, and only after the process holding it has died.

Readiness is an event, not a poll: a reader thread copies the merged stdout/stderr into
``log_path`` line by line and wakes ``start()`` on the ready line or at end of output (the
process died). ``start()`` is synchronous so fixtures of any scope can use it; ``astart()``
runs it in a thread for code on an event loop.

Not guaranteed: Linux-like process semantics (signals, process groups); a component that
prints nothing but keeps running is reported after ``ready_timeout``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

__all__ = ["READY_TIMEOUT", "ComponentFailed", "ComponentProcess"]

READY_TIMEOUT = 60.0
"""Seconds a component gets to say it is ready (generous: 2 shared cores, several suites)."""
STOP_GRACE = 15.0
"""SIGTERM -> SIGKILL in ``stop()`` unless told otherwise."""

_LISTENING = re.compile(
    rb"kubelite: (?P<component>[a-z-]+) (?P<endpoint>[a-z]+) listening on "
    rb"(?:https|http|dns|tcp)://(?P<host>[^\s:/]+):(?P<port>\d+)"
)
_READY = re.compile(rb"kubelite: (?P<component>[a-z-]+) ready\b")

Argv = Sequence[str] | Callable[[Mapping[str, int]], Sequence[str]]
"""A command line, or a builder given the ports of the previous run (empty at first start)."""


class ComponentFailed(RuntimeError):
    """A component exited or did not become ready; the message carries its output's tail."""


class ComponentProcess:
    """``ComponentProcess(argv, name=..., log_path=...)``; ``start()``; ``url``; ``kill()`` ...

    ``component`` (default: ``name``) is the name its ready lines carry; ``endpoint`` the one
    ``port``/``url`` name (others: ``port_of``/``url_of``); ``wait_ready=False`` returns from
    ``start()`` as soon as the process is spawned."""

    def __init__(
        self,
        argv: Argv,
        *,
        name: str,
        log_path: Path,
        component: str | None = None,
        endpoint: str = "api",
        cwd: Path | None = None,
        state_dir: Path | None = None,
        env: Mapping[str, str] | None = None,
        wait_ready: bool = True,
        ready_timeout: float = READY_TIMEOUT,
        stop_grace: float = STOP_GRACE,
        new_session: bool = False,
    ) -> None:
        self.argv = argv
        self.name = name
        self.component = component or name
        self.endpoint = endpoint
        self.log_path = log_path
        self.cwd = cwd
        self.state_dir = state_dir
        """Where the component keeps its state (if it has one); for the test to inspect."""
        self.env = dict(env or {})
        self.wait_ready = wait_ready
        self.ready_timeout = ready_timeout
        self.stop_grace = stop_grace
        """SIGTERM -> SIGKILL in ``stop()`` unless told otherwise (a process kubelet stops its
        containers first)."""
        self.new_session = new_session
        self.ports: dict[str, int] = {}
        self.host = "127.0.0.1"
        self.starts = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._ready = threading.Event()
        self._settled = threading.Event()
        self._pump: threading.Thread | None = None

    # ---- reading back --------------------------------------------------------------------

    def command(self) -> list[str]:
        """The command line the next start runs."""
        if callable(self.argv):
            return list(self.argv(dict(self.ports)))
        return list(self.argv)

    def port_of(self, endpoint: str) -> int:
        try:
            return self.ports[endpoint]
        except KeyError:
            raise ComponentFailed(
                f"{self.name} announced no {endpoint!r} endpoint (has {sorted(self.ports)})"
            ) from None

    def url_of(self, endpoint: str) -> str:
        return f"http://{self.host}:{self.port_of(endpoint)}"

    @property
    def port(self) -> int:
        """The port of the main endpoint (``endpoint=`` at construction)."""
        return self.port_of(self.endpoint)

    @property
    def url(self) -> str:
        return self.url_of(self.endpoint)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise ComponentFailed(f"{self.name} was never started")
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    def rss_bytes(self) -> int:
        """Resident set size now, from ``/proc/<pid>/status`` (VmRSS; Linux)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise ComponentFailed(f"{self.name}: no VmRSS in /proc/{self.pid}/status")

    def cpu_seconds(self) -> float:
        """User + system CPU time so far, from ``/proc/<pid>/stat`` (Linux)."""
        stat = Path(f"/proc/{self.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime

    def tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no output)"

    # ---- lifecycle -----------------------------------------------------------------------

    def start(self) -> ComponentProcess:
        """Spawn; with ``wait_ready`` return once the ready line is printed."""
        if self.running:
            raise ComponentFailed(f"{self.name} is already running")
        argv = self.command()
        if self.cwd is not None:
            self.cwd.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        self._ready.clear()
        self._settled.clear()
        with self.log_path.open("ab") as log:
            log.write(f"--- start #{self.starts}: {' '.join(argv)}\n".encode())
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=self.cwd,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
            start_new_session=self.new_session,
        )
        self._pump = threading.Thread(
            target=self._copy_output, args=(self.proc,), name=f"output {self.name}", daemon=True
        )
        self._pump.start()
        if self.wait_ready:
            self._await_ready()
        return self

    async def astart(self) -> ComponentProcess:
        """``start()`` off the event loop."""
        return await asyncio.to_thread(self.start)

    def _await_ready(self) -> None:
        if not self._settled.wait(self.ready_timeout):
            self.kill()
            raise ComponentFailed(
                f"{self.name} not ready after {self.ready_timeout:.0f}s:\n{self.tail()}"
            )
        if not self._ready.is_set():
            code = self.wait(timeout=STOP_GRACE)
            raise ComponentFailed(f"{self.name} exited with {code} before ready:\n{self.tail()}")

    def _copy_output(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        try:
            with self.log_path.open("ab") as log, proc.stdout:
                for line in proc.stdout:
                    log.write(line)
                    log.flush()
                    self._scan(line)
        finally:
            self._settled.set()

    def _scan(self, line: bytes) -> None:
        if b"kubelite: " not in line:
            return
        if (m := _LISTENING.search(line)) and m["component"].decode() == self.component:
            self.host = m["host"].decode()
            self.ports[m["endpoint"].decode()] = int(m["port"])
        elif (m := _READY.search(line)) and m["component"].decode() == self.component:
            self._ready.set()
            self._settled.set()

    def send(self, sig: signal.Signals) -> None:
        """Send ``sig`` if the process is alive (it may handle it or die of it)."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)

    def kill(self, sig: signal.Signals = signal.SIGKILL) -> int | None:
        """``sig`` (SIGKILL: no shutdown handler runs), then wait for the exit."""
        self.send(sig)
        return self.wait()

    def stop(self, *, grace: float | None = None) -> int | None:
        """SIGTERM, then SIGKILL after ``grace`` seconds (``stop_grace``); the exit status."""
        self.send(signal.SIGTERM)
        try:
            return self.wait(timeout=self.stop_grace if grace is None else grace)
        except subprocess.TimeoutExpired:
            return self.kill()

    def wait(self, *, timeout: float | None = None) -> int | None:
        """The exit status once the process has ended (and its output is copied)."""
        if self.proc is None:
            return None
        code = self.proc.wait(timeout=timeout)
        if self._pump is not None:
            self._pump.join()
        return code

    async def wait_exit(self, *, within: float | None = None) -> int | None:
        """``wait()`` off the event loop."""
        return await asyncio.to_thread(lambda: self.wait(timeout=within))

    async def astop(self, *, grace: float | None = None) -> int | None:
        return await asyncio.to_thread(lambda: self.stop(grace=grace))

    async def akill(self, sig: signal.Signals = signal.SIGKILL) -> int | None:
        return await asyncio.to_thread(self.kill, sig)

    def restart(self) -> ComponentProcess:
        """SIGKILL, then start again with the same ports."""
        self.kill()
        return self.start()
