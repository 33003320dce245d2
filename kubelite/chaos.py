"""``kubelite up --chaos``: SIGKILL a random component on an interval, and watch it come back.

Why: every component of kubelite promises to resync after a crash — the scheduler and the
controller-manager re-list and re-queue, a kubelet re-adopts its pods' processes, the
apiserver reloads its watch cache and every watcher resumes. ``--chaos`` makes that promise a
one-flag demo (the card's "kill-and-restart components to watch resync"): the supervision
(``kubelite.supervision``) restarts what was killed, and the cluster heals while you use it.

``Chaos`` owns one loop: every ``interval`` seconds it picks one child at random (a
``random.Random(seed)``: a seed gives the same choices for the same candidates) among those
that may die now, SIGKILLs its process — the process only, not its group, as a crash would:
a kubelet's pods keep running — and says so on the supervisor's output; a named task per kill
says when the victim is back (its next process printed its ready line), and how long that took.

Who may die now: a child whose process runs and is ready (one still restarting is left alone),
and not one of ``spare`` (``up`` spares the apiserver over ``memory://``: its store would die
with it). An etcd member only if the members still ready after the kill are a quorum
(members // 2 + 1): a single member is never killed, and of three, one at a time.

What it does not do: kill pods, the supervisor, or several components at once; wait for the
cluster to converge (only for the victim's ready line); or check what a kill broke — that is
what the person watching (or a test) does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
from collections.abc import Callable
from dataclasses import dataclass

from kubelite.supervision import Child, Supervision

__all__ = ["Chaos", "ChaosOptions"]


@dataclass(frozen=True, slots=True)
class ChaosOptions:
    interval: float
    """Seconds between two kills (the first one interval after the cluster is up)."""
    seed: int | None = None
    """Seeds the choice of victims; None: a different sequence each run."""


class Chaos:
    """Kills one of ``supervision``'s children every ``options.interval`` seconds."""

    def __init__(
        self,
        supervision: Supervision,
        options: ChaosOptions,
        *,
        spare: Callable[[Child], bool] = lambda _child: False,
    ) -> None:
        self.supervision = supervision
        self.options = options
        self.spare = spare
        self.random = random.Random(options.seed)
        self.kills = 0
        self._returns: set[asyncio.Task[None]] = set()

    def candidates(self) -> list[Child]:
        """The children that may be killed now, by name."""
        children = self.supervision.children
        members = [c for c in children if c.kind == "etcd"]
        ready_members = sum(1 for c in members if _up(c))
        quorum = len(members) // 2 + 1
        return sorted(
            (
                c
                for c in children
                if _up(c)
                and not self.spare(c)
                and (c.kind != "etcd" or ready_members - 1 >= quorum)
            ),
            key=lambda c: c.name,
        )

    async def run(self) -> None:
        """Kill on every tick until cancelled (or the supervisor stops)."""
        try:
            while not self.supervision.stopping:
                await asyncio.sleep(self.options.interval)
                if self.supervision.stopping:
                    return
                victims = self.candidates()
                if not victims:
                    self.supervision.say("chaos: nothing may be killed right now; next try later")
                    continue
                self._kill(self.random.choice(victims))
        except Exception as exc:  # a bug here must not stop the kills unnoticed
            self.supervision.say(f"chaos: stopped by {exc!r}; no more kills")
            raise
        finally:
            for task in self._returns:
                task.cancel()
            await asyncio.gather(*self._returns, return_exceptions=True)

    def _kill(self, child: Child) -> None:
        proc = child.process
        assert proc is not None  # a candidate runs
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        self.kills += 1
        self.supervision.say(
            f"chaos: killed {child.name} (pid {proc.pid}) with SIGKILL (kill #{self.kills}); "
            "the supervisor will restart it"
        )
        task = asyncio.create_task(self._back(child), name=f"chaos: {child.name} back")
        self._returns.add(task)
        task.add_done_callback(self._returns.discard)

    async def _back(self, child: Child) -> None:
        """Say when ``child``'s next process printed its ready line."""
        loop = asyncio.get_running_loop()
        killed = loop.time()
        await child.exited.wait()
        await child.ready.wait()
        self.supervision.say(
            f"chaos: {child.name} is back: ready {loop.time() - killed:.1f}s after the kill"
        )


def _up(child: Child) -> bool:
    proc = child.process
    return proc is not None and proc.returncode is None and child.ready.is_set()
