"""Whom ``kubelite up --chaos`` may kill (``kubelite.chaos.Chaos.candidates``), over real child
processes: any running, ready component — but an etcd member only while the others that stay
ready are still a quorum (of three, one at a time; a single member never), never one that is
still restarting (not ready yet), and never one ``up`` spares (the apiserver over memory://).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from kubelite.chaos import Chaos, ChaosOptions
from kubelite.supervision import Child, Supervision


@pytest.fixture
async def sleepers() -> AsyncIterator[list[asyncio.subprocess.Process]]:
    procs = [await asyncio.create_subprocess_exec("sleep", "600") for _ in range(6)]
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
            await proc.wait()


def running(name: str, kind: str, proc: asyncio.subprocess.Process) -> Child:
    child = Child(name=name, kind=kind, argv=["sleep", "600"], colour="36", process=proc)
    child.ready.set()
    return child


def chaos_over(*children: Child) -> Chaos:
    supervision = Supervision(list(children), own_name="up", whole="the cluster", colour=False)
    return Chaos(
        supervision,
        ChaosOptions(interval=5.0, seed=1),
        spare=lambda child: child.kind == "apiserver",
    )


def names(chaos: Chaos) -> list[str]:
    return [child.name for child in chaos.candidates()]


async def test_of_three_members_one_may_die_at_a_time(
    sleepers: list[asyncio.subprocess.Process],
) -> None:
    members = [running(f"etcd-{k}", "etcd", sleepers[k - 1]) for k in (1, 2, 3)]
    scheduler = running("scheduler", "scheduler", sleepers[3])
    apiserver = running("apiserver", "apiserver", sleepers[4])
    chaos = chaos_over(*members, scheduler, apiserver)
    assert names(chaos) == ["etcd-1", "etcd-2", "etcd-3", "scheduler"]

    sleepers[0].kill()
    await sleepers[0].wait()
    assert names(chaos) == ["scheduler"]  # two members left: exactly a quorum


async def test_a_single_member_and_a_restarting_child_are_never_killed(
    sleepers: list[asyncio.subprocess.Process],
) -> None:
    member = running("etcd", "etcd", sleepers[0])
    scheduler = running("scheduler", "scheduler", sleepers[1])
    kubelet = running("node1", "kubelet", sleepers[2])
    kubelet.ready.clear()  # started again, its ready line not printed yet
    assert names(chaos_over(member, scheduler, kubelet)) == ["scheduler"]


@pytest.mark.looptime
async def test_a_failing_pick_is_said_not_swallowed(
    sleepers: list[asyncio.subprocess.Process], capsys: pytest.CaptureFixture[str]
) -> None:
    chaos = chaos_over(running("scheduler", "scheduler", sleepers[0]))

    def broken() -> list[Child]:
        raise RuntimeError("no candidates today")

    chaos.candidates = broken  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        await chaos.run()  # its first pick comes one interval (virtual time) in
    assert "chaos: stopped by RuntimeError('no candidates today'); no more kills" in (
        capsys.readouterr().out
    )
