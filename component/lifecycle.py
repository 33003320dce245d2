"""Running a component: uvloop, start, ready, signals, a graceful stop with a deadline, exit codes.

Why: every component process lives the same life, so it is written once::

    def main(argv=None) -> int:
        options = parse_args(argv)                   # flags -> frozen options
        setup_logging(options.log.level)
        return component.run(lambda: MyService(options), component="scheduler")

``run`` builds the service on a uvloop event loop and drives its three methods (``Service``):

1. ``await service.start()`` binds every endpoint (each printing its ``listening`` line) and
   starts every task; then ``run`` prints ``kubelite: <component> ready`` (``component.ready``);
2. ``await service.wait()`` until the component ends by itself (a task crashed, the lease was
   lost) or SIGINT/SIGTERM arrives, which cancels it — a graceful stop;
3. ``await service.stop()`` always runs (also after a failed start) and releases what start
   took, in reverse order. It has ``stop_deadline`` seconds (8 s by default: below the 10 s
   ``kubelite up`` and most supervisors wait before SIGKILL); past it, or on a second signal,
   the process exits at once (a hard stop).

Exit codes (``component.errors``): 0 after a signal; ``wait()``'s return value if it returns;
``Fatal.exit_code`` with its one-line message (``kubelite <component>: <message>``) on stderr,
no traceback — 3 (``CannotListen``) when a port cannot be bound; 1 with a logged traceback for
any other exception; 1 when the stop deadline passes; 128 + signal number on a second signal.

Also: ``kill -USR2 <pid>`` dumps every thread's stack to stderr (``faulthandler``), for a
component that seems stuck. Once started, a component's cyclic garbage collector is tuned for a
server (``tune_collector``): what start built is frozen out of every later collection, and the
young generation is collected every ``GC_YOUNG_THRESHOLD`` allocations instead of 700 — a
request decodes hundreds of containers, almost all freed by reference counting, and at
CPython's default the collector ran about once per request (11% of the apiserver's CPU on
status writes, bench/README.md). Every collection is timed (``component.gcpauses``): a pause of
a second or more is logged, and ``/metrics`` counts them per generation.

Not here: restarting (the supervisor's job), reloading configuration on SIGHUP.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import gc
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import Any, Protocol

import uvloop

from component.errors import EXIT_FAILED, EXIT_OK, Fatal
from component.gcpauses import watch_pauses
from component.ready import announce_ready

__all__ = ["GC_YOUNG_THRESHOLD", "STOP_DEADLINE", "Service", "run", "tune_collector"]

log = logging.getLogger("kubelite.component")

STOP_DEADLINE = 8.0
"""Seconds a component gets to stop after SIGINT/SIGTERM before it exits anyway; below the
10 s ``kubelite up`` (and ``docker stop``) wait before SIGKILL, so the exit is its own."""

_SIGNALS = (signal.SIGINT, signal.SIGTERM)

GC_YOUNG_THRESHOLD = 50_000
"""Allocations (less deallocations) of container objects between two collections of the
youngest generation; CPython's default is 700. The older generations keep their ratios (one
collection per 10 younger ones, each), and a full collection still waits until a quarter of
the long-lived objects are new."""


def tune_collector() -> None:
    """Freeze what exists now (modules, registries, what ``start`` loaded: none of it is
    garbage) out of later collections, and collect the youngest generation less often."""
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)
    watch_pauses()


class Service(Protocol):
    """What a component hands to ``run``: its parts, composed."""

    async def start(self) -> None:
        """Bind every endpoint and start every task; return once started."""

    async def wait(self) -> int | None:
        """Until the component ends by itself: its exit code (None: 0), or raise.
        Cancelled on SIGINT/SIGTERM."""

    async def stop(self) -> None:
        """Release everything ``start`` took, in reverse order (also after a failed start)."""


class _Stopper:
    """Turns the first signal into a graceful stop and the second (or the deadline) into exit."""

    def __init__(self, *, component: str, task: asyncio.Task[Any], deadline: float) -> None:
        self.component = component
        self.task = task
        self.deadline = deadline
        self.signalled = False
        self.stopping = False
        self._timer: asyncio.TimerHandle | None = None

    def on_signal(self, sig: signal.Signals) -> None:
        if self.signalled:
            self._exit(f"second {sig.name}: exiting now", 128 + sig.value)
        self.signalled = True
        if self.stopping:
            log.info("%s received; already stopping", sig.name)
            return
        log.info(
            "%s received; stopping (a second signal, or %gs without stopping, exits at once)",
            sig.name, self.deadline,
        )  # fmt: skip
        self.task.cancel()
        self.arm()

    def arm(self) -> None:
        """Start the stop deadline (once)."""
        self.stopping = True
        if self._timer is None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self.deadline, self._late)

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _late(self) -> None:
        self._exit(f"did not stop within {self.deadline:g}s; exiting now", EXIT_FAILED)

    def _exit(self, why: str, code: int) -> None:
        log.error("%s", why)
        print(f"kubelite {self.component}: {why}", file=sys.stderr, flush=True)
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        os._exit(code)


async def _lifecycle(service: Service, *, component: str, stopper: _Stopper) -> int:
    try:
        await service.start()
        tune_collector()
        announce_ready(component)
        code = await service.wait()
    finally:
        stopper.arm()
        try:
            await service.stop()
        except Exception:
            log.exception("stopping failed; exiting anyway")
    return EXIT_OK if code is None else code


async def _main(build: Callable[[], Service], *, component: str, stop_deadline: float) -> int:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    stopper = _Stopper(component=component, task=task, deadline=stop_deadline)
    for sig in _SIGNALS:
        loop.add_signal_handler(sig, stopper.on_signal, sig)
    try:
        service = build()
        return await _lifecycle(service, component=component, stopper=stopper)
    except asyncio.CancelledError:
        if not stopper.signalled:
            raise
        log.info("stopped")
        return EXIT_OK
    except Fatal as exc:
        print(f"kubelite {component}: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    except Exception:
        log.exception("%s failed", component)
        return EXIT_FAILED
    finally:
        stopper.disarm()
        for sig in _SIGNALS:
            loop.remove_signal_handler(sig)


def run(
    build: Callable[[], Service], *, component: str, stop_deadline: float = STOP_DEADLINE
) -> int:
    """Run the service ``build()`` returns (built on the event loop) to its end; the exit code.

    ``component`` names it on the ready lines and in the one-line errors.
    """
    if hasattr(signal, "SIGUSR2"):
        faulthandler.register(signal.SIGUSR2, all_threads=True)
    try:
        return uvloop.run(_main(build, component=component, stop_deadline=stop_deadline))
    except KeyboardInterrupt:  # SIGINT before the loop installed its handler
        return 128 + signal.SIGINT.value
