"""``component.tasks.TaskGroup``: named tasks run until the first ends; it is logged loudly,
the others are cancelled, and why it ended is raised to the owner."""

from __future__ import annotations

import asyncio
import logging

import pytest

from component.errors import Fatal, TaskEnded
from component.tasks import TaskGroup


async def forever(cancelled: list[str], name: str) -> None:
    try:
        await asyncio.Event().wait()
    finally:
        cancelled.append(name)


async def test_a_crash_cancels_the_others_and_is_raised(caplog: pytest.LogCaptureFixture) -> None:
    cancelled: list[str] = []
    crash = asyncio.Event()

    async def crashes() -> None:
        await crash.wait()
        raise ValueError("boom")

    group = TaskGroup("owner")
    group.start("a", forever(cancelled, "a"))
    group.start("crasher", crashes())
    group.start("b", forever(cancelled, "b"))
    crash.set()
    with pytest.raises(ValueError, match="boom"):
        await group.wait()
    assert cancelled == ["b", "a"]  # newest first
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.getMessage() == "owner: task crasher failed; stopping the others"
    assert record.exc_info is not None


async def test_a_task_that_returns_is_an_error_too(caplog: pytest.LogCaptureFixture) -> None:
    cancelled: list[str] = []

    async def returns() -> None:
        return None

    group = TaskGroup("owner")
    group.start("a", forever(cancelled, "a"))
    group.adopt(asyncio.create_task(returns(), name="quitter"))
    with pytest.raises(TaskEnded, match="owner: task quitter returned"):
        await group.wait()
    assert cancelled == ["a"]
    assert "it was meant to run until cancelled" in caplog.text


async def test_a_fatal_ending_is_left_to_the_runtime_to_report(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def gives_up() -> None:
        raise Fatal("lost the lease")

    group = TaskGroup("owner")
    group.start("leader", gives_up())
    with pytest.raises(Fatal, match="lost the lease"):
        await group.wait()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_cancel_and_retire_are_not_errors(caplog: pytest.LogCaptureFixture) -> None:
    cancelled: list[str] = []
    async with TaskGroup("owner") as group:
        first = group.start("first", forever(cancelled, "first"))
        group.start("second", forever(cancelled, "second"))
        await asyncio.sleep(0)  # let both start
        await group.retire(first)
        assert cancelled == ["first"]
    assert cancelled == ["first", "second"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_tasks_added_while_waiting_are_supervised() -> None:
    group = TaskGroup("owner")
    waiting = asyncio.create_task(group.wait())
    await asyncio.sleep(0)
    assert not waiting.done()  # an empty group waits

    async def fails() -> None:
        raise RuntimeError("late")

    group.start("late", fails())
    with pytest.raises(RuntimeError, match="late"):
        await waiting


async def test_cancelling_the_waiter_is_never_swallowed() -> None:
    cancelled: list[str] = []
    group = TaskGroup("owner")
    group.start("a", forever(cancelled, "a"))
    waiting = asyncio.create_task(group.wait())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await group.cancel()
    assert cancelled == ["a"]
