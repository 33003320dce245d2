"""A command run "inside" a process-runtime container: its env, its working directory, a pty or pipes.

``kubectl exec`` lands here through the kubelet server. Without a tty the command gets three
pipes and stdout/stderr stay separate; with a tty it gets a pseudo-terminal as its controlling
terminal (so ``sh`` is interactive and Ctrl-C works) and stderr is merged into stdout, as with
a real container runtime. The command runs in its own session so killing it kills its children.

In a sandboxed container (``in_namespaces_of`` its PID 1) the command runs through util-linux
``nsenter`` in the container's mount, UTS, IPC and PID namespaces, chrooted to its root and in
its working directory, so it sees what the container sees (``ps`` lists the pod's processes,
``tar`` for ``kubectl cp`` reads and writes the container's ``/tmp``). Unsandboxed, it runs on
the host, as the container does.

Limits: output is read in chunks of up to 64 KiB as it arrives; a tty command is its own
session leader, so ``kill`` reaches it through the namespace (its PID 1 dying) or the hang-up
of its terminal rather than its process group.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import pty
import shutil
import signal
import struct
import sys
import termios
from collections.abc import Mapping

from services.kubelet.runtime.sandbox import nsenter_argv

__all__ = ["ProcessExecSession", "start_exec"]

_EOF = (0, b"")


class ProcessExecSession:
    """Implements ``runtime.base.ExecSession`` over an asyncio subprocess."""

    def __init__(
        self,
        *,
        proc: asyncio.subprocess.Process,
        master_fd: int | None,
    ) -> None:
        self._proc = proc
        self._master = master_fd
        self._queue: asyncio.Queue[tuple[int, bytes]] = asyncio.Queue()
        self._open_streams = 0
        self._readers: list[asyncio.Task[None]] = []
        loop = asyncio.get_running_loop()
        if master_fd is not None:
            os.set_blocking(master_fd, False)
            self._open_streams = 1
            loop.add_reader(master_fd, self._on_master_readable)
        else:
            for stream_id, stream in ((1, proc.stdout), (2, proc.stderr)):
                if stream is not None:
                    self._open_streams += 1
                    self._readers.append(
                        asyncio.create_task(
                            self._pump(stream_id, stream), name=f"exec-pump-{proc.pid}-{stream_id}"
                        )
                    )

    def _on_master_readable(self) -> None:
        assert self._master is not None
        try:
            data = os.read(self._master, 65536)
        except BlockingIOError:
            return
        except OSError:  # EIO: the slave side is closed, the command is gone
            data = b""
        if data:
            self._queue.put_nowait((1, data))
        else:
            asyncio.get_running_loop().remove_reader(self._master)
            self._queue.put_nowait(_EOF)

    async def _pump(self, stream_id: int, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            self._queue.put_nowait((stream_id, chunk))
        self._queue.put_nowait(_EOF)

    async def write_stdin(self, data: bytes) -> None:
        if self._master is not None:
            view = memoryview(data)
            while view:
                try:
                    n = os.write(self._master, view)
                except BlockingIOError:
                    await self._writable(self._master)
                    continue
                view = view[n:]
        elif self._proc.stdin is not None and not self._proc.stdin.is_closing():
            self._proc.stdin.write(data)
            with contextlib.suppress(ConnectionError):
                await self._proc.stdin.drain()

    @staticmethod
    async def _writable(fd: int) -> None:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_writer(fd, wake)
        try:
            await ready
        finally:
            loop.remove_writer(fd)

    async def close_stdin(self) -> None:
        if self._master is not None:
            # a tty has no half-close: send EOF (Ctrl-D) as a terminal would
            await self.write_stdin(b"\x04")
        elif self._proc.stdin is not None and not self._proc.stdin.is_closing():
            self._proc.stdin.close()

    async def read_output(self) -> tuple[int, bytes]:
        while self._open_streams:
            item = await self._queue.get()
            if item == _EOF:
                self._open_streams -= 1
                continue
            return item
        return _EOF

    def resize(self, *, width: int, height: int) -> None:
        if self._master is not None and width > 0 and height > 0:
            with contextlib.suppress(OSError):
                fcntl.ioctl(
                    self._master, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0)
                )

    async def wait(self) -> int:
        code = await self._proc.wait()
        for task in self._readers:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._close_master()
        return 128 - code if code < 0 else code

    def _close_master(self) -> None:
        if self._master is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._master)
            with contextlib.suppress(OSError):
                os.close(self._master)
            self._master = None

    async def kill(self) -> None:
        """SIGKILL the command's process group, and those its children lead: with ``nsenter``
        in front, a tty command is nsenter's child and leads a session of its own."""
        if self._proc.returncode is None:
            for leader in (self._proc.pid, *_children(self._proc.pid)):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(leader, signal.SIGKILL)
        await self._proc.wait()
        for task in self._readers:
            task.cancel()
        self._close_master()


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (``/proc/<pid>/task/*/children`` is not always
    compiled in, so every ``stat`` is read: only ever on a kill)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        if int(stat[stat.rfind(b")") + 2 :].split()[1]) == pid:
            found.append(int(name))
    return found


_WITH_CTTY = (
    "import fcntl, os, sys, termios\n"
    "os.setsid()\n"
    "fcntl.ioctl(0, termios.TIOCSCTTY, 0)\n"
    "os.execvp(sys.argv[1], sys.argv[1:])\n"
)
"""Runs the command as a session leader with the pty as its controlling terminal. A tiny python
prelude instead of ``preexec_fn``, which uvloop runs before the child's stdio is in place."""


def _findable(program: str, *, path: str | None, root: str) -> bool:
    """Whether ``program`` is on ``path`` as seen from ``root`` (a container's, via /proc)."""
    if "/" in program:
        return True  # exec itself says whether it exists
    dirs = (path or os.defpath).split(os.pathsep)
    return shutil.which(program, path=os.pathsep.join(root + d for d in dirs)) is not None


async def start_exec(
    command: list[str],
    *,
    env: Mapping[str, str],
    cwd: str | None,
    tty: bool,
    in_namespaces_of: int | None = None,
) -> ProcessExecSession:
    """Start ``command`` (inside the namespaces of the process ``in_namespaces_of``, when
    given); raises ``FileNotFoundError``/``PermissionError`` if it cannot run."""
    program = command[0]
    root = f"/proc/{in_namespaces_of}/root" if in_namespaces_of else ""
    if not _findable(program, path=env.get("PATH"), root=root):
        raise FileNotFoundError(errno.ENOENT, "executable file not found in $PATH", program)
    enter: list[str] = []
    if in_namespaces_of:
        enter, cwd = nsenter_argv(in_namespaces_of, cwd=cwd), None
    if tty:
        master, slave = pty.openpty()
        try:
            proc = await asyncio.create_subprocess_exec(
                *enter,
                sys.executable,
                "-I",
                "-S",
                "-c",
                _WITH_CTTY,
                *command,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                env=dict(env),
                cwd=cwd,
                # nsenter leads a group with its child until the child's own setsid, so kill()
                # reaches the command in between too
                start_new_session=bool(enter),
            )
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        return ProcessExecSession(proc=proc, master_fd=master)
    proc = await asyncio.create_subprocess_exec(
        *enter,
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,
    )
    return ProcessExecSession(proc=proc, master_fd=None)
