"""Supervising component processes: what ``kubelite up`` and ``kubelite node`` share.

Why: both run several components as child OS processes and must do the same things with them
— read their output, restart them when they die, stop them when asked. One copy of that lives
here; each supervisor adds its own plan (which children, in which order, when it is up).

``Supervision`` owns a list of ``Child``\\ ren and

* starts each as its own session (a terminal's Ctrl-C reaches the supervisor only, which then
  stops the children in order) that gets SIGTERM if the supervisor dies (``PR_SET_PDEATHSIG``,
  Linux);
* prefixes every line a child prints with the child's name (coloured when asked) on the
  supervisor's stdout, and reads each child's ready lines (``component.ready``) for the ports
  it bound and for when it is ready;
* restarts a child that dies after a jittered back-off that grows while it keeps dying
  (1 s doubling to 30 s) and resets once it stayed up for a minute, and says so — except a
  child that exits at once with a usage error (exit code 2), or one that cannot listen on its
  port (exit code 3, at any time): restarting cannot help either, so the supervisor stops with
  that code;
* on the first SIGINT/SIGTERM (``handle_signals``) sets ``stopping``; on a second one kills
  every child at once;
* ``stop_in_order`` stops groups of children one group after the other: SIGTERM, then SIGKILL
  for any child that outlives its grace period.

What it does not do: it watches its own children only; a child that forks and detaches is that
child's business, and orphans re-parented to the supervisor (when it is a container's PID 1)
are not reaped by it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import random
import signal
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from component.errors import EXIT_CANNOT_LISTEN, EXIT_USAGE
from component.ready import Listening, Ready, parse_line

__all__ = [
    "CANNOT_LISTEN",
    "COLOURS",
    "DEFAULT_STOP_GRACE",
    "USAGE_ERROR",
    "Child",
    "Supervision",
]

COLOURS = ("36", "33", "35", "32", "34", "31", "96", "93", "95", "92")

# Back-off for a crashing child: 1 s doubling to 30 s, reset after 60 s of healthy running.
RESTART_INITIAL = 1.0
RESTART_MAX = 30.0
RESTART_RESET_AFTER = 60.0
USAGE_ERROR = EXIT_USAGE
"""argparse's exit code: a child exiting with it right after starting has a bad command line."""
CANNOT_LISTEN = EXIT_CANNOT_LISTEN
"""A child that cannot bind its port exits with this (``component.errors``); not restarted."""
USAGE_ERROR_WINDOW = 5.0
"""Seconds after start within which exit code 2 counts as a usage error, not a crash."""
DEFAULT_STOP_GRACE = 10.0
"""Seconds a child gets to exit after SIGTERM before SIGKILL, unless its kind says otherwise."""
PR_SET_PDEATHSIG = 1


@dataclass
class Child:
    """One supervised component: its command line and its running process, if any."""

    name: str
    kind: str
    argv: list[str]
    colour: str
    process: asyncio.subprocess.Process | None = None
    restarts: int = 0
    stopping: bool = False
    exited: asyncio.Event = field(default_factory=asyncio.Event)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the running process printed its ``ready`` line (cleared when it exits, and at
    each start): after ``exited``, it waits for the next process's ready line."""
    endpoints: dict[str, Listening] = field(default_factory=dict)
    """What the child's ready lines said it listens on, by endpoint (``api``, ``health`` ...)."""


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM us if the supervisor dies (Linux only)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Supervision:
    """Starts, watches, restarts and finally stops ``children``; ``own_name`` prefixes the
    supervisor's own lines, ``whole`` names what stops when a child cannot be helped (``the
    cluster``); ``stop_grace`` maps a child's kind to its SIGTERM grace period."""

    def __init__(
        self,
        children: list[Child],
        *,
        own_name: str,
        whole: str,
        colour: bool,
        stop_grace: Mapping[str, float] | None = None,
    ) -> None:
        self.children = children
        self.own_name = own_name
        self.whole = whole
        self.colour = colour
        self.stop_grace = dict(stop_grace or {})
        self.width = max(len(name) for name in [own_name, *(c.name for c in children)])
        self.exit_code = 0
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def stopping(self) -> bool:
        """Whether the supervisor was asked to stop (or gave up)."""
        return self._stopping.is_set()

    # -- output --------------------------------------------------------------------------
    def say(self, text: str) -> None:
        """A line from the supervisor itself."""
        prefix = self.own_name.ljust(self.width)
        if self.colour:
            prefix = f"\x1b[1m{prefix}\x1b[0m"
        sys.stdout.write(f"{prefix} | {text}\n")
        sys.stdout.flush()

    def _prefix(self, child: Child) -> str:
        name = child.name.ljust(self.width)
        return f"\x1b[{child.colour}m{name}\x1b[0m" if self.colour else name

    async def _pump(self, child: Child, stream: asyncio.StreamReader) -> None:
        prefix = self._prefix(child)
        while True:
            try:
                line = await stream.readline()
            except ValueError:  # a line longer than the reader's limit: print what we have
                line = await stream.read(65536)
            if not line:
                return
            text = line.decode("utf-8", "replace").rstrip("\n")
            sys.stdout.write(f"{prefix} | {text}\n")
            sys.stdout.flush()
            self._note(child, text)

    def _note(self, child: Child, text: str) -> None:
        """Record what a child's ready lines say (``component.ready``)."""
        said = parse_line(text)
        if said is None or said.component != child.kind:
            return
        if isinstance(said, Listening):
            child.endpoints[said.endpoint] = said
        elif isinstance(said, Ready):
            child.ready.set()

    # -- lifecycle -----------------------------------------------------------------------
    async def _spawn(self, child: Child) -> asyncio.subprocess.Process:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        return await asyncio.create_subprocess_exec(
            *child.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )

    async def _run_child(self, child: Child) -> None:
        """Keep one child running until the supervisor stops."""
        delay = RESTART_INITIAL
        loop = asyncio.get_running_loop()
        while not self._stopping.is_set():
            child.exited.clear()
            child.ready.clear()
            child.endpoints.clear()
            child.process = await self._spawn(child)
            started = loop.time()
            assert child.process.stdout is not None
            await self._pump(child, child.process.stdout)
            code = await child.process.wait()
            child.ready.clear()
            child.exited.set()
            if self._stopping.is_set() or child.stopping:
                return
            if code == USAGE_ERROR and loop.time() - started < USAGE_ERROR_WINDOW:
                self._give_up(
                    code,
                    f"{child.name} exited with a usage error (code {code}); restarting it "
                    f"cannot help, so {self.whole} stops — fix the flags above",
                )
                return
            if code == CANNOT_LISTEN:
                self._give_up(
                    code,
                    f"{child.name} cannot listen on its port (code {code}; its line above says "
                    f"why); restarting it cannot help, so {self.whole} stops — free the "
                    "port or choose another (0 picks a free one)",
                )
                return
            if loop.time() - started > RESTART_RESET_AFTER:
                delay = RESTART_INITIAL
            child.restarts += 1
            wait = delay * random.uniform(0.8, 1.2)
            self.say(
                f"{child.name} exited with code {code}; restarting in {wait:.1f}s "
                f"(restart #{child.restarts})"
            )
            delay = min(delay * 2, RESTART_MAX)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=wait)

    def _give_up(self, code: int, why: str) -> None:
        self.say(why)
        self.exit_code = code
        self._stopping.set()

    def _start(self, child: Child) -> None:
        self._tasks.append(
            asyncio.create_task(self._run_child(child), name=f"{self.own_name}:{child.name}")
        )

    # -- stopping ------------------------------------------------------------------------
    def handle_signals(self) -> None:
        """SIGINT and SIGTERM ask to stop; a second one kills every child at once."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._on_signal, sig.name)

    def _on_signal(self, signame: str) -> None:
        if not self._stopping.is_set():
            self._stopping.set()
            return
        self.say(f"{signame} again: killing every process now")
        for child in self.children:
            proc = child.process
            if proc is not None and proc.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)

    async def stop_in_order(self, order: Iterable[Sequence[str]]) -> None:
        """Stop the children group by group (each group a set of kinds, stopped together),
        then end the supervising tasks."""
        self._stopping.set()
        for kinds in order:
            await asyncio.gather(*(self._stop_child(c) for c in self.children if c.kind in kinds))
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _stop_child(self, child: Child) -> None:
        child.stopping = True
        proc = child.process
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        grace = self.stop_grace.get(child.kind, DEFAULT_STOP_GRACE)
        try:
            await asyncio.wait_for(proc.wait(), timeout=grace)
        except TimeoutError:
            self.say(f"{child.name} did not stop within {grace:.0f}s; killing it")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
