"""Holding a container's start at a known point: every exec of one file waits until released.

Why: the kubelet's races with its own stop happen while a container is being started, a
window of milliseconds. A test that must stop the kubelet *inside* that window cannot aim at
it with timing; it has to hold the start there. ``ExecGate(path)`` does that from outside the
kubelet, without touching its code: a fanotify ``FAN_OPEN_EXEC_PERM`` mark on ``path``'s inode
makes the kernel suspend every ``execve`` of that file until the gate answers. A container
whose command is ``path`` has then been forked by its shim, but has not exec'd, so the shim
has not answered the kubelet: the start is in flight, and stays so until ``release()``.

The mark is on one inode (a file the test wrote under ``tmp_path``), so nothing else on the
machine is held. Needs root (``CAP_SYS_ADMIN``) and a kernel with fanotify permission events;
``ExecGate.unavailable()`` says why not, for a skip.

Not guaranteed: a held exec is answered only by ``release()`` or ``close()`` — a test must
close the gate in ``finally`` (closing allows whatever is still held).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import struct
from pathlib import Path

__all__ = ["ExecGate"]

_FAN_CLOEXEC = 0x01
_FAN_NONBLOCK = 0x02
_FAN_CLASS_CONTENT = 0x04
_FAN_MARK_ADD = 0x01
_FAN_OPEN_EXEC_PERM = 0x00040000
_FAN_ALLOW = 0x01
_AT_FDCWD = -100
_EVENT = struct.Struct("=IBBHQii")  # struct fanotify_event_metadata
_RESPONSE = struct.Struct("=iI")  # struct fanotify_response

_libc = ctypes.CDLL(None, use_errno=True)
_libc.fanotify_mark.argtypes = [
    ctypes.c_int,
    ctypes.c_uint,
    ctypes.c_uint64,
    ctypes.c_int,
    ctypes.c_char_p,
]


class ExecGate:
    """``ExecGate(path)``: ``await held()`` until an exec of ``path`` waits; ``release()``."""

    def __init__(self, path: Path) -> None:
        fd = _libc.fanotify_init(_FAN_CLASS_CONTENT | _FAN_CLOEXEC | _FAN_NONBLOCK, os.O_RDONLY)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "fanotify_init")
        if _libc.fanotify_mark(fd, _FAN_MARK_ADD, _FAN_OPEN_EXEC_PERM, _AT_FDCWD, bytes(path)) < 0:
            errno = ctypes.get_errno()
            os.close(fd)
            raise OSError(errno, f"fanotify_mark {path}")
        self._fd: int | None = fd
        self._waiting: list[int] = []
        """The event fds of the execs held now, each answered once."""
        self.held_pids: list[int] = []
        """Every process whose exec was held: the container, before it became the command."""

    @staticmethod
    def unavailable() -> str | None:
        """Why no gate can be made here (not root, no fanotify permission events), or None."""
        fd = _libc.fanotify_init(_FAN_CLASS_CONTENT | _FAN_CLOEXEC, os.O_RDONLY)
        if fd < 0:
            return f"fanotify permission events unavailable: {os.strerror(ctypes.get_errno())}"
        os.close(fd)
        return None

    async def held(self) -> int:
        """Return once an exec of the file is held; the pid of the process exec'ing it."""
        assert self._fd is not None, "the gate is closed"
        fd = self._fd
        readable = asyncio.Event()
        asyncio.get_running_loop().add_reader(fd, readable.set)
        try:
            while not self._read_events():
                readable.clear()
                await readable.wait()
        finally:
            asyncio.get_running_loop().remove_reader(fd)
        return self.held_pids[-1]

    def _read_events(self) -> bool:
        assert self._fd is not None
        try:
            data = os.read(self._fd, 4096)
        except BlockingIOError:
            return False
        while data:
            length, _version, _reserved, _meta, _mask, event_fd, pid = _EVENT.unpack_from(data)
            self._waiting.append(event_fd)
            self.held_pids.append(pid)
            data = data[length:]
        return True

    def release(self) -> None:
        """Let every held exec go on, and every later one pass unheld."""
        if self._fd is None:
            return
        for event_fd in self._waiting:
            with contextlib.suppress(OSError):
                os.write(self._fd, _RESPONSE.pack(event_fd, _FAN_ALLOW))
            os.close(event_fd)
        self._waiting.clear()
        os.close(self._fd)  # no mark any more: nothing is held from now on
        self._fd = None

    close = release
