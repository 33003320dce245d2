"""``component.run``: ready line after start, SIGTERM -> graceful stop (exit 0), one-line fatal
errors with their exit codes, a hard stop on the deadline or a second signal, and the garbage
collector tuned for a server once started."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SERVICE = """
import asyncio, gc, sys
import component

mode, deadline = sys.argv[1], float(sys.argv[2])

class Service:
    async def start(self):
        if mode == "cannot-listen":
            raise component.CannotListen("cannot listen on 127.0.0.1:1 (--port): in use")

    async def wait(self):
        if mode == "fatal":
            raise component.Fatal("lost the lease kube-system/x")
        if mode == "crash":
            raise RuntimeError("a bug")
        if mode == "exit-7":
            return 7
        if mode == "collector":
            print("collector", gc.get_threshold()[0], gc.get_freeze_count() > 0, file=sys.stderr)
            return 0
        await asyncio.Event().wait()

    async def stop(self):
        print("stopping", file=sys.stderr, flush=True)
        if mode == "slow-stop":
            await asyncio.Event().wait()

sys.exit(component.run(Service, component="scheduler", stop_deadline=deadline))
"""


class Run:
    def __init__(self, mode: str, *, deadline: float = 8.0) -> None:
        self.argv = [sys.executable, "-c", SERVICE, mode, str(deadline)]
        self.lines: list[str] = []
        self.proc: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> Run:
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv, cwd=ROOT, stderr=asyncio.subprocess.PIPE
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()

    async def until(self, text: str) -> None:
        """Read stderr until a line equal to ``text`` (the process says it, an event)."""
        assert self.proc is not None and self.proc.stderr is not None
        async with asyncio.timeout(30):
            while True:
                line = (await self.proc.stderr.readline()).decode()
                assert line, f"exited before {text!r}: {self.lines}"
                self.lines.append(line.rstrip("\n"))
                if self.lines[-1] == text:
                    return

    async def exit_code(self) -> int:
        assert self.proc is not None and self.proc.stderr is not None
        rest = await asyncio.wait_for(self.proc.stderr.read(), 30)
        self.lines += rest.decode().splitlines()
        return await asyncio.wait_for(self.proc.wait(), 30)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_stops_it_gracefully(sig: signal.Signals) -> None:
    async with Run("serve") as run:
        await run.until("kubelite: scheduler ready")
        assert run.proc is not None
        run.proc.send_signal(sig)
        assert await run.exit_code() == 0
        assert "stopping" in run.lines


@pytest.mark.parametrize(
    ("mode", "code", "line"),
    [
        ("fatal", 1, "kubelite scheduler: lost the lease kube-system/x"),
        ("cannot-listen", 3, "kubelite scheduler: cannot listen on 127.0.0.1:1 (--port): in use"),
    ],
)
async def test_a_fatal_ending_is_one_line_and_its_exit_code(
    mode: str, code: int, line: str
) -> None:
    async with Run(mode) as run:
        assert await run.exit_code() == code
        assert run.lines[-1] == line
        assert "stopping" in run.lines  # stop() ran first
        assert not any("Traceback" in x for x in run.lines)


async def test_a_crash_is_logged_with_its_traceback_and_exits_1() -> None:
    async with Run("crash") as run:
        assert await run.exit_code() == 1
        assert any("RuntimeError: a bug" in x for x in run.lines)


async def test_wait_may_choose_the_exit_code() -> None:
    async with Run("exit-7") as run:
        assert await run.exit_code() == 7


async def test_a_stop_past_its_deadline_exits_1() -> None:
    async with Run("slow-stop", deadline=0.5) as run:
        await run.until("kubelite: scheduler ready")
        assert run.proc is not None
        run.proc.send_signal(signal.SIGTERM)
        assert await run.exit_code() == 1
        assert run.lines[-1] == "kubelite scheduler: did not stop within 0.5s; exiting now"


async def test_a_second_signal_exits_at_once() -> None:
    async with Run("slow-stop", deadline=600) as run:
        await run.until("kubelite: scheduler ready")
        assert run.proc is not None
        run.proc.send_signal(signal.SIGTERM)
        await run.until("stopping")
        run.proc.send_signal(signal.SIGINT)
        assert await run.exit_code() == 128 + signal.SIGINT
        assert run.lines[-1] == "kubelite scheduler: second SIGINT: exiting now"


async def test_a_started_component_collects_less_often_and_froze_its_start() -> None:
    from component.lifecycle import GC_YOUNG_THRESHOLD

    async with Run("collector") as run:
        assert await run.exit_code() == 0
    assert f"collector {GC_YOUNG_THRESHOLD} True" in run.lines
