"""Sampling profiles of kubelite processes while a scenario runs (py-spy), and their summary.

Why: a slow figure says *that* something is slow; a profile of the process that burnt the CPU
says *what*. ``python -m bench --profile apiserver,scheduler`` attaches ``py-spy record`` to
those components of every cluster a scenario starts, for as long as the cluster runs, and
writes collapsed stacks (``profile-<component>.txt``, one ``frame;frame;... count`` line per
distinct stack — flamegraph.pl and speedscope read it) into the scenario's work directory.
``summarize`` turns one into the two lists worth reading first: where samples *end* (self
time) and which frames they *pass through* (inclusive time), both as shares of all samples.

``--profile-gil`` samples only the thread holding the GIL (py-spy's ``--gil``): the Python CPU
the process spent, without threads that run outside the GIL (the apiserver's SQLite commits) or
wait for it — the view to read when the question is "what does this process compute".

py-spy is an optional, bench-only dependency (``pip install -e '.[bench]'``); without it,
``--profile`` fails the scenario with a message saying so. Sampling at 100 Hz costs the
profiled process little (py-spy reads its memory from outside), but it is one more process on
the same cores, so figures from a profiled run are not comparable to unprofiled ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

__all__ = ["profiling", "sample_gil_only", "summarize"]

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^():]*?)(?::\d+)?\)$")


def _py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).exists():
        raise RuntimeError("--profile needs py-spy: pip install -e '.[bench]'")
    return found


_gil_only = False


def sample_gil_only(on: bool = True) -> None:
    """Make every later ``profiling`` sample only the thread holding the GIL (``--profile-gil``:
    set once by ``python -m bench`` before any scenario runs)."""
    global _gil_only
    _gil_only = on


@contextlib.asynccontextmanager
async def profiling(*, pid: int, out: Path, rate: int = 100) -> AsyncIterator[Path]:
    """Record ``pid`` into ``out`` (collapsed stacks) until the block ends."""
    proc = await asyncio.create_subprocess_exec(
        _py_spy(), "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw",
        "--output", str(out), "--nonblocking", *(["--gil"] if _gil_only else []),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield out
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)  # py-spy writes its output on Ctrl-C
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()


def _name(frame: str) -> str:
    """``func (path/to/file.py:12)`` -> ``func (file.py)``: lines merged, paths shortened."""
    match = _FRAME.match(frame.strip())
    if not match:
        return frame.strip()
    file = match.group("file")
    for marker in ("/site-packages/", "/main/", "/lib/python3"):
        if marker in file:
            file = file.split(marker, 1)[1]
            break
    return f"{match.group('func')} ({file})"


def summarize(path: Path, *, top: int = 15) -> str:
    """The ``top`` frames by self and by inclusive share of samples in a collapsed-stack file."""
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_name(f) for f in stack.split(";")]
        if not frames:
            continue
        total += count
        self_time[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    if not total:
        return f"{path.name}: no samples"
    lines = [f"{path.name}: {total} samples", "  self:"]
    lines += [f"    {n / total:6.1%}  {f}" for f, n in self_time.most_common(top)]
    lines.append("  inclusive:")
    lines += [f"    {n / total:6.1%}  {f}" for f, n in inclusive.most_common(top)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.profile FILE [--top N]``: print a summary of a collapsed-stack file."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=main.__doc__)
    parser.add_argument("file", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    print(summarize(args.file, top=args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
