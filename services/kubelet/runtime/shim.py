"""The per-container shim: a tiny supervisor that outlives the kubelet (the role conmon plays).

Why it exists: a container must keep running when the kubelet is killed, and a restarted kubelet
must still learn how the container ended. Only a process's parent can read its exit status, so a
shim parents each container instance, copies its stdout/stderr into a CRI-format log file
(``<RFC3339Nano> stdout|stderr F|P <bytes>``, one line per line, so ``timestamps``,
``sinceSeconds`` and ``tailLines`` work), and writes the exit status to a file before it exits.

Run as a script with the standard library only (``python -I -S shim.py``), never imported by the
kubelet. Protocol: the kubelet writes a JSON config to stdin and closes it; the shim starts the
container in its own session and process group and answers one JSON line on stdout —
``{"pid": N, "shimPid": M, "startedAt": T}`` or ``{"error": "...", "exitCode": 128}`` — then
closes stdout. When the container's main process exits, the shim kills what is left of its
process group (no orphans), drains the pipes, atomically writes ``exit_file`` and exits.

The kubelet stops a container by signalling its process group (``kill(-pid, SIGTERM)``, then
``SIGKILL``); the shim lives in a different session, so it is not hit and still records the
exit. Limits: a descendant that calls ``setsid`` itself escapes the group kill.
"""

from __future__ import annotations

import json
import os
import resource
import selectors
import signal
import subprocess
import sys
import time

# The shim starts with every container, so it does not import typing (several milliseconds) at
# run time; type checkers treat any ``TYPE_CHECKING`` as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NotRequired, TypedDict

    class ShimConfig(TypedDict):
        """What the kubelet writes to the shim's stdin (``runtime/process.py``)."""

        argv: list[str]
        logPath: str
        exitFile: str
        env: NotRequired[dict[str, str]]
        cwd: NotRequired[str | None]
        pidFile: NotRequired[str]
        memoryLimit: NotRequired[int | None]

    Pipes = tuple[int, int]
    """The read ends of the container's stdout and stderr."""

PARTIAL_FLUSH_SECONDS = 0.25
"""Bytes without a newline are written as a partial (``P``) line after this long, so a prompt
printed without a newline still shows up in the log."""
MAX_LINE = 16 * 1024
"""Longer lines are split into partial records, as the CRI log format does."""


def rfc3339nano(ns: int) -> str:
    secs, frac = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{frac:09d}Z"


class LogWriter:
    def __init__(self, path: str) -> None:
        self.fh = open(path, "ab", buffering=0)
        self.pending: dict[str, bytes] = {"stdout": b"", "stderr": b""}
        self.pending_since: dict[str, float] = {}

    def _record(self, stream: str, tag: str, content: bytes) -> None:
        head = f"{rfc3339nano(time.time_ns())} {stream} {tag} ".encode()
        self.fh.write(head + content + b"\n")

    def feed(self, stream: str, data: bytes) -> None:
        buf = self.pending[stream] + data
        while True:
            nl = buf.find(b"\n")
            if nl < 0:
                break
            line, buf = buf[:nl], buf[nl + 1 :]
            while len(line) > MAX_LINE:
                self._record(stream, "P", line[:MAX_LINE])
                line = line[MAX_LINE:]
            self._record(stream, "F", line)
        while len(buf) > MAX_LINE:
            self._record(stream, "P", buf[:MAX_LINE])
            buf = buf[MAX_LINE:]
        self.pending[stream] = buf
        if buf:
            self.pending_since.setdefault(stream, time.monotonic())
        else:
            self.pending_since.pop(stream, None)

    def flush_partials(self, *, force: bool = False) -> None:
        now = time.monotonic()
        for stream, since in list(self.pending_since.items()):
            if force or now - since >= PARTIAL_FLUSH_SECONDS:
                self._record(stream, "P", self.pending[stream])
                self.pending[stream] = b""
                del self.pending_since[stream]


def _preexec(memory_limit: int | None) -> None:
    if memory_limit:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))


def _start(config: ShimConfig) -> tuple[subprocess.Popen[bytes], Pipes] | str:
    argv = config["argv"]
    if not argv:
        return "no command specified"
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    memory_limit = config.get("memoryLimit")
    try:
        proc = subprocess.Popen(
            argv,
            env=config.get("env") or {},
            cwd=config.get("cwd") or None,
            stdin=subprocess.DEVNULL,
            stdout=out_w,
            stderr=err_w,
            start_new_session=True,
            preexec_fn=(lambda: _preexec(memory_limit)) if memory_limit else None,
        )
    except FileNotFoundError:
        exe = argv[0]
        if "/" in exe:
            return f'exec: "{exe}": stat {exe}: no such file or directory'
        return f'exec: "{exe}": executable file not found in $PATH'
    except PermissionError:
        return f'exec: "{argv[0]}": permission denied'
    except OSError as exc:
        return f'exec: "{argv[0]}": {exc.strerror or exc}'
    finally:
        os.close(out_w)
        os.close(err_w)
    return proc, (out_r, err_r)


def _write_json_atomic(path: str, data: dict[str, object]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def main() -> int:
    config: ShimConfig = json.loads(sys.stdin.buffer.read())
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: None)
    started = time.time()
    result = _start(config)
    if isinstance(result, str):
        _write_json_atomic(
            config["exitFile"],
            {"exitCode": 128, "reason": "StartError", "message": result, "finishedAt": started},
        )
        sys.stdout.write(json.dumps({"error": result, "exitCode": 128}) + "\n")
        sys.stdout.flush()
        return 0
    proc, (out_r, err_r) = result
    if config.get("pidFile"):
        # written before the handshake: a kubelet killed right now still finds its container
        _write_json_atomic(
            config["pidFile"], {"pid": proc.pid, "shimPid": os.getpid(), "startedAt": started}
        )
    sys.stdout.write(
        json.dumps({"pid": proc.pid, "shimPid": os.getpid(), "startedAt": started}) + "\n"
    )
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)

    log = LogWriter(config["logPath"])
    sel = selectors.DefaultSelector()
    sel.register(out_r, selectors.EVENT_READ, "stdout")
    sel.register(err_r, selectors.EVENT_READ, "stderr")
    pidfd = os.pidfd_open(proc.pid)
    sel.register(pidfd, selectors.EVENT_READ, "exit")
    open_pipes = 2
    exited = False
    drain_deadline: float | None = None
    while open_pipes and not (drain_deadline and time.monotonic() > drain_deadline):
        for key, _ in sel.select(timeout=PARTIAL_FLUSH_SECONDS):
            if key.data == "exit":
                sel.unregister(pidfd)
                exited = True
                # the main process is gone: so is the container; take its leftovers with it
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                drain_deadline = time.monotonic() + 2.0
                continue
            chunk = os.read(key.fd, 65536)
            if not chunk:
                sel.unregister(key.fd)
                os.close(key.fd)
                open_pipes -= 1
                continue
            log.feed(key.data, chunk)
        log.flush_partials()
    log.flush_partials(force=True)
    code = proc.wait()
    if not exited:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
    if code < 0:
        sig, exit_code = -code, 128 - code
    else:
        sig, exit_code = None, code
    _write_json_atomic(
        config["exitFile"],
        {
            "exitCode": exit_code,
            "signal": sig,
            "reason": "Completed" if exit_code == 0 else "Error",
            "finishedAt": time.time(),
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
