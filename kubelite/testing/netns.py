"""A private network namespace for tests that cut links: its own loopback and its own firewall.

Why: a partition test (one etcd member cut off its peers) needs firewall rules, and those must
never touch the machine's own firewall or the loopback other suites share. A
``NetworkNamespace`` is a fresh network stack (``unshare --net``) whose ``lo`` is up, so all of
``127.0.0.0/8`` is there and every port is free; processes are started inside it through
``launcher()`` (``nsenter --net=...``), rules are added with ``run("iptables", ...)``, and the
test's own client code runs inside it with ``call(fn)`` — on a thread of its own that entered
the namespace (``setns`` moves only the calling thread; Python 3.11 has no ``os.setns``, so
libc's is called through ctypes), so the test process itself never leaves the host's network.

The namespace lives as long as its holder process (a ``sleep`` started by ``unshare``);
``close()`` kills it, and with it the namespace once the last process inside has exited.

Limits: needs root (or CAP_SYS_ADMIN and CAP_NET_ADMIN) and util-linux's ``unshare`` /
``nsenter``; ``unavailable()`` says why a machine cannot, so tests skip with that reason.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["NetworkNamespace", "unavailable"]

T = TypeVar("T")

_CLONE_NEWNET = 0x40000000
_READY = "netns-ready"


def unavailable() -> str | None:
    """Why no private network namespace can be made here, or None when one can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    missing = [tool for tool in ("unshare", "nsenter", "ip", "iptables") if not shutil.which(tool)]
    if missing:
        return f"missing {', '.join(missing)} (util-linux, iproute2, iptables)"
    probe = subprocess.run(
        ["unshare", "--net", "ip", "link", "set", "lo", "up"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        return f"cannot make a network namespace: {probe.stderr.strip()}"
    return None


class NetworkNamespace:
    """A network namespace of its own, alive from ``open()`` until ``close()``."""

    def __init__(self) -> None:
        self._holder: subprocess.Popen[str] | None = None

    @property
    def path(self) -> str:
        """``/proc/<holder>/ns/net``: what ``nsenter --net`` and ``setns`` open."""
        if self._holder is None:
            raise RuntimeError("network namespace not open")
        return f"/proc/{self._holder.pid}/ns/net"

    def open(self) -> None:
        holder = subprocess.Popen(
            [
                "unshare",
                "--net",
                "sh",
                "-c",
                f"ip link set lo up && echo {_READY} && exec sleep infinity",
            ],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self._holder = holder
        assert holder.stdout is not None
        if holder.stdout.readline().strip() != _READY:
            self.close()
            raise RuntimeError("unshare --net could not bring up the namespace's loopback")

    def close(self) -> None:
        holder, self._holder = self._holder, None
        if holder is None:
            return
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=30)
        if holder.stdout is not None:
            holder.stdout.close()

    def launcher(self) -> list[str]:
        """The argv prefix that runs a program inside the namespace."""
        return ["nsenter", f"--net={self.path}"]

    def run(self, *argv: str) -> None:
        """Run ``argv`` inside the namespace; raises ``CalledProcessError`` with its stderr."""
        subprocess.run([*self.launcher(), *argv], check=True, capture_output=True, text=True)

    def call(self, fn: Callable[[], T]) -> T:
        """``fn()`` on a new thread inside the namespace (its sockets are the namespace's);
        its value, or its exception re-raised here."""
        outcome: list[T] = []
        failure: list[BaseException] = []

        def inside() -> None:
            try:
                _enter(self.path)
                outcome.append(fn())
            except BaseException as err:  # handed to the caller, who re-raises it
                failure.append(err)

        thread = threading.Thread(target=inside, name="netns-call")
        thread.start()
        thread.join()
        if failure:
            raise failure[0]
        return outcome[0]


def _enter(path: str) -> None:
    """Move the calling thread into the network namespace at ``path``."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"setns({path}): {os.strerror(errno)}")
    finally:
        os.close(fd)
