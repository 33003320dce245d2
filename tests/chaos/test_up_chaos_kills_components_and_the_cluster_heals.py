"""``kubelite up --chaos``: components SIGKILLed at random for two minutes, and the cluster heals.

The real command as a person runs it, on 3 nodes with the sim runtime: ``--chaos-interval 5s``
so that two minutes bring 24 kills, each one announced (``chaos: killed NAME (pid N)``) and,
once the supervisor restarted it and the new process printed its ready line, followed by
``chaos: NAME is back`` (later for a victim killed often: its restart back-off grows). Meanwhile a Deployment of 20 pods is created; at the end exactly 20
of its pods are Running (none more, none terminating), and after Ctrl-C no process that ever
ran under this ``up`` — every killed pid, every component alive at the end — is left.

The choice of victims is seeded (``--chaos-seed``), and which kills matter (the apiserver, a
kubelet in the middle of a sync, the controller-manager while it creates pods) depends on the
machine's speed; what must hold whatever was killed is the end state.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from api.registry import REGISTRY
from tests.e2e.cluster import (
    ClusterView,
    UpProcess,
    banner_api_url,
    leftover_processes,
    running,
)
from tests.factories import deployment

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(480)]

DEPLOYMENTS = REGISTRY.require("apps", "Deployment")
KILLS = 24
"""Two minutes at one kill every 5 s."""
KILLED = re.compile(r"chaos: killed (\S+) \(pid (\d+)\)")
BACK = re.compile(r"chaos: (\S+) is back")


def kills(lines: list[str]) -> list[re.Match[str]]:
    return [m for line in lines if (m := KILLED.search(line))]


def first_kills_answered(lines: list[str]) -> bool:
    """Whether ``KILLS`` kills were printed, each followed by its victim being back (a victim
    is not killed again before it is back: only ready components are)."""
    waiting: list[str] = []
    seen = 0
    for line in lines:
        if (killed := KILLED.search(line)) and seen < KILLS:
            seen += 1
            waiting.append(killed[1])
        elif (back := BACK.search(line)) and back[1] in waiting:
            waiting.remove(back[1])
    return seen == KILLS and not waiting


def alive(pids: set[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            continue
    return out


async def test_two_minutes_of_chaos_leave_twenty_running_pods_and_no_orphan(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    up = UpProcess(
        [
            sys.executable, "-m", "kubelite", "up", "--state-dir", str(state),
            "--nodes", "3", "--runtime", "sim", "--port", "0", "--secure-port", "0",
            "--kubelet-port", "0", "--scheduler-port", "0", "--controller-manager-port", "0",
            "--proxy-port", "0", "--dns-health-port", "0", "--no-color",
            "--chaos", "--chaos-interval", "5s", "--chaos-seed", "22",
        ],
        tmp_path / "up.log",
    )  # fmt: skip
    await up.start()
    ever: set[int] = set()
    try:
        await up.until(
            lambda lines: any("kubelite is up: " in line for line in lines),
            within=120,
            what="its banner",
        )
        assert up.proc is not None
        view = ClusterView(banner_api_url(up.lines))
        await view.watch()
        try:
            await view.client.create(
                DEPLOYMENTS, deployment("web", replicas=20), namespace="default"
            )
            await up.until(
                lambda lines: len(kills(lines)) >= KILLS,
                within=KILLS * 5 + 120,
                what=f"{KILLS} kills",
            )

            def healed() -> bool:
                """20 web pods Running, and no other web pod (none terminating)."""
                web = [p for p in view.pods.list() if _web(p)]
                live = view.live_pods(label="app=web")
                return len(web) == len(live) == 20 and all(running(p) for p in live)

            await view.until(healed, within=180, what="exactly 20 web pods Running")
        finally:
            await view.close()
        # a victim killed often restarts after a longer back-off, but each one comes back
        await up.until(first_kills_answered, within=120, what="every victim back")
        assert len({m[1] for m in kills(up.lines)}) > 3, "the seed picks varied victims"
        ever = {p.pid for p in psutil.Process(up.proc.pid).children(recursive=True)}
        ever |= {int(m[2]) for m in kills(up.lines)}
        assert await up.interrupt() == 0
    finally:
        await up.kill()
    assert alive(ever) == []
    assert leftover_processes(marker=str(state)) == {}


def _web(pod: dict[str, Any]) -> bool:
    return bool(((pod.get("metadata") or {}).get("labels") or {}).get("app") == "web")
