"""The per-container shim: a tiny supervisor that outlives the kubelet (the role conmon plays).

Why it exists: a container must keep running when the kubelet is killed, and a restarted kubelet
must still learn how the container ended. Only a process's parent can read its exit status, so a
shim parents each container instance, copies its stdout/stderr into a CRI-format log file
(``<RFC3339Nano> stdout|stderr F|P <bytes>``, one line per line, so ``timestamps``,
``sinceSeconds`` and ``tailLines`` work), and writes the exit status to a file before it exits.

Run as a script with the standard library only (``python -I -S shim.py``), never imported by the
kubelet. Protocol: the kubelet writes a JSON config to stdin and closes it; the shim forks the
container into its own session and process group and answers one JSON line on stdout —
``{"pid": N, "shimPid": M, "startedAt": T}`` or ``{"error": "...", "exitCode": 128}`` — then
closes stdout. With a ``sandbox`` in the config the shim first unshares a PID namespace, so the
container is its PID 1, and the child builds the sandbox (``sandbox_setup.py``) before exec; a
failure between fork and exec comes back through a close-on-exec pipe as the error.

With a ``memoryLimit`` the shim checks the container's resident memory every 50 ms (250 ms
unsandboxed; ``MemoryWatch``) and SIGKILLs it when over, reporting ``OOMKilled``. When the container's main
process exits, the shim kills what is left of its process group (with a PID namespace the kernel
has already killed everything in it: no orphans), drains the pipes, atomically writes
``exit_file`` and exits.

The kubelet stops a container by signalling it (a sandboxed container's PID 1, else its process
group); the shim lives in a different session, so it is not hit and still records the exit.
Limits: unsandboxed, a descendant that calls ``setsid`` itself escapes the group kill and the
memory accounting.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import sys
import time

# The shim starts with every container, so it does not import typing (several milliseconds) at
# run time; type checkers treat any ``TYPE_CHECKING`` as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NotRequired, TypedDict

    from services.kubelet.runtime.sandbox_setup import SandboxSpec

    class ShimConfig(TypedDict):
        """What the kubelet writes to the shim's stdin (``runtime/process.py``)."""

        argv: list[str]
        logPath: str
        exitFile: str
        env: NotRequired[dict[str, str]]
        cwd: NotRequired[str | None]
        pidFile: NotRequired[str]
        memoryLimit: NotRequired[int | None]
        sandbox: NotRequired[SandboxSpec | None]

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


def _exec_error(argv: list[str], exc: OSError) -> str:
    """The message containerd gives when a container's command cannot be executed."""
    exe = argv[0]
    if isinstance(exc, FileNotFoundError):
        if "/" in exe:
            return f'exec: "{exe}": stat {exe}: no such file or directory'
        return f'exec: "{exe}": executable file not found in $PATH'
    if isinstance(exc, PermissionError):
        return f'exec: "{exe}": permission denied'
    return f'exec: "{exe}": {exc.strerror or exc}'


def _child(config: ShimConfig, out_w: int, err_w: int, report: int) -> None:
    """In the forked child: become the container (never returns)."""
    argv = config["argv"]
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        spec = config.get("sandbox")
        if spec:
            if TYPE_CHECKING:
                from services.kubelet.runtime import sandbox_setup
            else:
                import sandbox_setup  # already imported by _start

            sandbox_setup.enter(spec)
        elif config.get("cwd"):
            os.chdir(config["cwd"] or "/")
        try:
            os.execvpe(argv[0], argv, config.get("env") or {})
        except OSError as exc:
            message = _exec_error(argv, exc)
    except BaseException as exc:  # a failed sandbox step: its message says which
        message = f"failed to create the container's sandbox: {exc}"
    os.write(report, message.encode()[:4000])
    os._exit(127)


def _start(config: ShimConfig) -> tuple[int, Pipes] | str:
    """Fork the container; return its pid and output pipes, or why it could not start.

    Failures between fork and exec come back through a close-on-exec pipe: EOF means the exec
    happened. With a sandbox, this shim first unshares a PID namespace, so the child is its PID 1.
    """
    if not config["argv"]:
        return "no command specified"
    if config.get("sandbox"):
        # beside this file (``-I`` leaves the script's directory off sys.path); only sandboxed
        # containers pay for its ctypes
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        if TYPE_CHECKING:
            from services.kubelet.runtime import sandbox_setup
        else:
            import sandbox_setup

        try:
            sandbox_setup.unshare(sandbox_setup.CLONE_NEWPID)
        except sandbox_setup.SetupError as exc:
            return f"failed to create the container's sandbox: {exc}"
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    report_r, report_w = os.pipe()  # os.pipe() is close-on-exec
    pid = os.fork()
    if pid == 0:
        _child(config, out_w, err_w, report_w)
    for fd in (out_w, err_w, report_w):
        os.close(fd)
    with os.fdopen(report_r, "rb") as fh:
        failure = fh.read()
    if failure:
        os.waitpid(pid, 0)
        os.close(out_r)
        os.close(err_r)
        return failure.decode(errors="replace")
    return pid, (out_r, err_r)


def _write_json_atomic(path: str, data: dict[str, object]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class MemoryWatch:
    """Kills the container when the resident memory of its processes passes its limit.

    Without a memory cgroup of its own to enforce a limit, the shim accounts the container's
    process tree itself: every ``interval`` seconds it sums the resident set (``statm``) of
    every process in the container — those listed in the container's own ``/proc`` when it has
    a PID namespace, else those in its process group — and SIGKILLs the container when the sum
    is over the limit, which the exit file then reports as ``OOMKilled``. Limits: memory that
    grows faster than the limit allows in one interval overshoots until the next check, and
    shared pages are counted once per process that maps them (as RSS does).
    """

    def __init__(self, *, pid: int, limit: int, sandboxed: bool) -> None:
        self.pid = pid
        self.limit = limit
        self.proc = f"/proc/{pid}/root/proc" if sandboxed else "/proc"
        self.sandboxed = sandboxed
        self.interval = MEMORY_CHECK_SECONDS if sandboxed else MEMORY_SCAN_SECONDS
        self.due = time.monotonic()
        self.killed = False

    def _members(self) -> list[str]:
        names = [n for n in os.listdir(self.proc) if n.isdigit()]
        if self.sandboxed:
            return names
        members = []
        for name in names:
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    stat = fh.read()
            except OSError:
                continue
            if int(stat[stat.rfind(b")") + 2 :].split()[2]) == self.pid:  # its process group
                members.append(name)
        return members

    def resident_bytes(self) -> int:
        total = 0
        for name in self._members():
            try:
                with open(f"{self.proc}/{name}/statm", "rb") as fh:
                    total += int(fh.read().split()[1]) * PAGE_SIZE
            except (OSError, IndexError, ValueError):
                continue  # it exited meanwhile
        return total

    def check(self) -> None:
        now = time.monotonic()
        if self.killed or now < self.due:
            return
        self.due = now + self.interval
        try:
            over = self.resident_bytes() > self.limit
        except OSError:  # the container is going away
            return
        if over:
            self.killed = True
            _kill_container(self.pid)


MEMORY_CHECK_SECONDS = 0.05
"""How often a sandboxed container's memory is checked: 50 ms bounds the overshoot of a process
allocating as fast as it can (hundreds of MB in that time); reading the ``statm`` of the few
processes in its own ``/proc`` costs well under 1% of a core."""
MEMORY_SCAN_SECONDS = 0.25
"""How often an unsandboxed one's is: finding its process group reads every process's ``stat``
on the host (3 ms for 90 processes here), so the check runs less often, overshooting more."""
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def _kill_container(pid: int) -> None:
    """SIGKILL the container: its process group, which with a PID namespace is all of it
    (its PID 1 dying takes every process of the namespace along)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def _supervise(config: ShimConfig, pid: int, pipes: Pipes) -> tuple[int, bool]:
    """Copy the output into the log until the container is gone; its wait status and
    whether it was killed for its memory."""
    log = LogWriter(config["logPath"])
    sel = selectors.DefaultSelector()
    sel.register(pipes[0], selectors.EVENT_READ, "stdout")
    sel.register(pipes[1], selectors.EVENT_READ, "stderr")
    pidfd = os.pidfd_open(pid)
    sel.register(pidfd, selectors.EVENT_READ, "exit")
    limit = config.get("memoryLimit")
    memory = MemoryWatch(pid=pid, limit=limit or 0, sandboxed=bool(config.get("sandbox")))
    timeout = min(PARTIAL_FLUSH_SECONDS, memory.interval) if limit else PARTIAL_FLUSH_SECONDS
    open_pipes = 2
    exited = False
    drain_deadline: float | None = None
    while open_pipes and not (drain_deadline and time.monotonic() > drain_deadline):
        for key, _ in sel.select(timeout=timeout):
            if key.data == "exit":
                sel.unregister(pidfd)
                exited = True
                # the main process is gone: so is the container; take its leftovers with it
                _kill_container(pid)
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
        if limit and not exited:
            memory.check()
    log.flush_partials(force=True)
    _, status = os.waitpid(pid, 0)
    if not exited:
        _kill_container(pid)
    return status, memory.killed


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
    pid, pipes = result
    answer: dict[str, object] = {"pid": pid, "shimPid": os.getpid(), "startedAt": started}
    if config.get("pidFile"):
        # written before the handshake: a kubelet killed right now still finds its container
        _write_json_atomic(config["pidFile"], answer)
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    status, oom_killed = _supervise(config, pid, pipes)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        sig, exit_code = -code, 128 - code
    else:
        sig, exit_code = None, code
    reason = "Completed" if exit_code == 0 else "Error"
    if oom_killed and sig == signal.SIGKILL:
        reason = "OOMKilled"
    _write_json_atomic(
        config["exitFile"],
        {"exitCode": exit_code, "signal": sig, "reason": reason, "finishedAt": time.time()},
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
