"""The benchmark harness: scenarios, repeated timings, anchors, ratios, a table and a JSON file.

Why: a figure alone says as much about the machine as about kubelite. Every figure here is
judged two ways, side by side, in the same run: against a *ceiling* (what a plain aiohttp
handler, a plain ``sqlite3`` commit loop or a plain chunked push does on this machine, minutes
apart) and against an *anchor* (Kubernetes' published floors and SLOs: kube-scheduler's 270
pods/s, kwok's 20 pods/s, API call latency p99 <= 1 s, pod startup p99 <= 5 s).

What it owns:

* ``Scenario`` (a name, a section, an ``async run(ctx) -> list[Figure]``, whether ``--quick``
  runs it) and ``Registry``, the ordered set of scenarios ``python -m bench`` knows;
* ``Figure``: the samples of one measurement (one per round) reported as median, min and max,
  optionally naming the ceiling figure it is a ratio to (``ceiling="ceilings/aiohttp GET"``) and
  the ``Anchor`` it is judged by;
* ``collect_rounds``: run a measurement several times, gathering each named value's samples;
* ``run_scenarios``: run the selected scenarios in order; a scenario that fails is recorded
  (its error in the report and the JSON) and the run goes on — one broken component must not
  hide every other figure;
* ``run_alone``: one scenario as its own ``python -m bench.<module>`` (``--quick``, ``--rounds``,
  a temporary working directory);
* ``render`` (the table) and ``write_json`` (``bench/results/<date>.json``).

What it does not do: judge pass/fail (nothing is asserted — figures, not tests), or isolate
scenarios from one another beyond running them one at a time; on a shared machine a noisy
neighbour shows up in the min/max spread, which is why both are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import (
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "ANCHORS",
    "Anchor",
    "Context",
    "Figure",
    "Registry",
    "Report",
    "Scenario",
    "ScenarioRun",
    "collect_rounds",
    "percentile",
    "render",
    "run_alone",
    "run_scenarios",
    "write_json",
]

RESULTS_DIR = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True, slots=True)
class Anchor:
    """A published figure a measurement is judged by.

    ``better="higher"``: a floor to reach (ratio = measured / anchor, >= 1 meets it);
    ``better="lower"``: a limit not to exceed (ratio = measured / anchor, <= 1 meets it).
    """

    name: str
    value: float
    unit: str
    better: Literal["higher", "lower"]

    def ratio(self, measured: float) -> float:
        return measured / self.value if self.value else float("inf")

    def met(self, measured: float) -> bool:
        return measured >= self.value if self.better == "higher" else measured <= self.value


ANCHORS: Mapping[str, Anchor] = {
    "scheduler": Anchor("kube-scheduler CI floor", 270.0, "pods/s", "higher"),
    "kwok": Anchor("kwok pod creation", 20.0, "pods/s", "higher"),
    "api-slo": Anchor("API call p99 SLO", 1000.0, "ms", "lower"),
    "startup-slo": Anchor("pod startup p99 SLO", 5.0, "s", "lower"),
    "list-namespace-slo": Anchor("namespaced LIST p99 SLO", 5.0, "s", "lower"),
    "list-cluster-slo": Anchor("cluster-wide LIST p99 SLO", 30.0, "s", "lower"),
}
"""The anchors the issue names. Kubernetes' SLOs: mutating and read-only API calls p99 <= 1 s
for a single object, 5 s for a namespaced LIST and 30 s for a cluster-wide one), pod startup p99 <= 5 s at a churn of 20 pods/s;
kube-scheduler's scheduler_perf floor is 270 pods/s; kwok creates 20 pods/s by default."""


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured quantity: a sample per round, reported as median with min and max."""

    scenario: str
    name: str
    unit: str
    samples: tuple[float, ...]
    anchor: Anchor | None = None
    ceiling: str | None = None
    """``key`` of the figure (in the same run) this one is a ratio to."""
    note: str = ""

    def __post_init__(self) -> None:
        if not self.samples:
            raise ValueError(f"figure {self.key}: no samples")

    @property
    def key(self) -> str:
        return f"{self.scenario}/{self.name}"

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def max(self) -> float:
        return max(self.samples)


def figure(
    scenario: str,
    name: str,
    *,
    unit: str,
    samples: Iterable[float],
    anchor: Anchor | None = None,
    ceiling: str | None = None,
    note: str = "",
) -> Figure:
    """``Figure`` from any iterable of samples (keyword-only, as scenarios build many)."""
    return Figure(scenario, name, unit, tuple(samples), anchor, ceiling, note)


def percentile(samples: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` percentile (0 < q <= 1) of ``samples``."""
    if not samples:
        raise ValueError("percentile of no samples")
    ordered = sorted(samples)
    rank = max(1, -(-len(ordered) * q // 1))  # ceil(n * q), at least 1
    return ordered[min(len(ordered), int(rank)) - 1]


async def collect_rounds(
    measure: Callable[[int], Awaitable[Mapping[str, float]]], *, rounds: int
) -> dict[str, list[float]]:
    """Run ``measure(round_index)`` ``rounds`` times; each value's samples, by name."""
    samples: dict[str, list[float]] = {}
    for index in range(rounds):
        for name, value in (await measure(index)).items():
            samples.setdefault(name, []).append(value)
    return samples


@dataclass(frozen=True, slots=True)
class Context:
    """What every scenario is given: how hard to try and where to put files."""

    quick: bool
    rounds: int
    workdir: Path
    store: str = "sqlite"
    """``sqlite`` (the default store, durable) or ``memory`` for the cluster scenarios."""
    profile: tuple[str, ...] = ()
    """Components to record with py-spy in cluster scenarios (``bench.profile``)."""


ScenarioRun = Callable[[Context], Awaitable[list[Figure]]]


def run_alone(
    run: Callable[[Context], Coroutine[Any, Any, list[Figure]]],
    argv: list[str] | None,
    *,
    prog: str,
    description: str,
    quick_help: str,
) -> list[Figure]:
    """Parse ``--quick`` / ``--rounds`` (default 3, 1 with ``--quick``) from ``argv`` and run one
    scenario in a temporary directory, as ``python -m bench`` would run it among the others."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default 3)")
    args = parser.parse_args(argv)
    rounds = args.rounds or (1 if args.quick else 3)
    with tempfile.TemporaryDirectory(prefix=f"bench-{prog.rsplit('.', 1)[-1]}-") as tmp:
        ctx = Context(quick=args.quick, rounds=rounds, workdir=Path(tmp))
        return asyncio.run(run(ctx))


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    section: str
    run: ScenarioRun
    summary: str
    quick: bool = True
    """Whether ``--quick`` runs it (the 10,000- and 30,000-pod runs do not)."""


class Registry:
    """The scenarios, in the order they run (ceilings first: ratios refer to them)."""

    def __init__(self, scenarios: Iterable[Scenario] = ()) -> None:
        self._scenarios: dict[str, Scenario] = {}
        for scenario in scenarios:
            self.add(scenario)

    def add(self, scenario: Scenario) -> Scenario:
        if scenario.name in self._scenarios:
            raise ValueError(f"scenario {scenario.name!r} registered twice")
        self._scenarios[scenario.name] = scenario
        return scenario

    def __iter__(self) -> Iterator[Scenario]:
        return iter(self._scenarios.values())

    def names(self) -> list[str]:
        return list(self._scenarios)

    def select(self, *, only: Sequence[str] | None = None, quick: bool = False) -> list[Scenario]:
        """``only`` names scenarios or sections (unknown names are an error); ``quick`` drops
        the scenarios marked as too long for it, unless ``only`` names them explicitly."""
        if not only:
            return [s for s in self if s.quick or not quick]
        known = set(self._scenarios) | {s.section for s in self}
        unknown = [name for name in only if name not in known]
        if unknown:
            raise KeyError(f"unknown scenario(s) {', '.join(unknown)}; known: {sorted(known)}")
        return [s for s in self if s.name in only or (s.section in only and (s.quick or not quick))]


@dataclass(slots=True)
class Report:
    command: str
    started: datetime
    quick: bool
    rounds: int
    store: str | None = None
    """The store of every kubelite apiserver in the run (None: no kubelite ran, only ceilings)."""
    figures: list[Figure] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    """Wall time each scenario took."""

    def by_key(self) -> dict[str, Figure]:
        return {f.key: f for f in self.figures}

    def ceiling_of(self, fig: Figure) -> Figure | None:
        return self.by_key().get(fig.ceiling) if fig.ceiling else None


async def run_scenarios(
    scenarios: Sequence[Scenario],
    ctx: Context,
    *,
    command: str,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Run each scenario in order; a failing one is recorded in ``Report.errors``."""
    say = progress or (lambda _line: None)
    report = Report(command=command, started=datetime.now(UTC), quick=ctx.quick, rounds=ctx.rounds,
                    store=ctx.store)  # fmt: skip
    for scenario in scenarios:
        say(f"[bench] {scenario.name}: {scenario.summary}")
        start = time.perf_counter()
        try:
            figures = await scenario.run(ctx)
        except Exception as exc:
            report.errors[scenario.name] = f"{type(exc).__name__}: {exc}"
            say(f"[bench] {scenario.name} FAILED; going on with the next scenario\n"
                + "".join(traceback.format_exception(exc)))  # fmt: skip
            continue
        finally:
            report.seconds[scenario.name] = time.perf_counter() - start
        report.figures += figures
        say(f"[bench] {scenario.name}: {len(figures)} figure(s) in "
            f"{report.seconds[scenario.name]:.1f}s")  # fmt: skip
    return report


# -- output ----------------------------------------------------------------------------------


def _num(value: float) -> str:
    if value != value or value in (float("inf"), float("-inf")):
        return str(value)
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def _row(report: Report, fig: Figure) -> dict[str, str]:
    spread = f"{_num(fig.min)}–{_num(fig.max)}" if len(fig.samples) > 1 else ""
    ceiling = report.ceiling_of(fig)
    row = {
        "figure": fig.key,
        "median": _num(fig.median),
        "min–max": spread,
        "unit": fig.unit,
        "x ceiling": f"{fig.median / ceiling.median:.3f}" if ceiling and ceiling.median else "",
        "anchor": "",
        "x anchor": "",
    }
    if fig.anchor is not None:
        a = fig.anchor
        sign = ">=" if a.better == "higher" else "<="
        row["anchor"] = f"{a.name} {sign} {_num(a.value)} {a.unit}"
        row["x anchor"] = f"{a.ratio(fig.median):.2f} {'ok' if a.met(fig.median) else 'MISS'}"
    return row


def render(report: Report) -> str:
    """The table: one line per figure with its ceiling ratio and its anchor."""
    rows = [_row(report, f) for f in report.figures]
    columns = ["figure", "median", "min–max", "unit", "x ceiling", "anchor", "x anchor"]
    right = {"median", "min–max", "x ceiling"}
    widths = {c: max([len(c)] + [len(r[c]) for r in rows]) for c in columns}

    def line(cells: Mapping[str, str]) -> str:
        return "  ".join(
            cells[c].rjust(widths[c]) if c in right else cells[c].ljust(widths[c]) for c in columns
        ).rstrip()

    header = line({c: c for c in columns})
    out = [
        f"kubelite bench — {report.started:%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cpu(s), "
        f"{'quick, ' if report.quick else ''}median of {report.rounds} round(s) [min–max]"
        + (f", kubelite store: {report.store}" if report.store else ""),
        f"command: {report.command}",
        header,
        "-" * len(header),
    ]
    out += [line(r) for r in rows]
    for name, error in report.errors.items():
        out.append(f"FAILED {name}: {error}")
    notes = [f"{f.key}: {f.note}" for f in report.figures if f.note]
    if notes:
        out.append("notes:")
        out += [f"  {n}" for n in notes]
    return "\n".join(out)


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }


def as_json(report: Report) -> dict[str, Any]:
    figures = []
    for fig in report.figures:
        ceiling = report.ceiling_of(fig)
        entry: dict[str, Any] = {
            "key": fig.key,
            "scenario": fig.scenario,
            "name": fig.name,
            "unit": fig.unit,
            "median": fig.median,
            "min": fig.min,
            "max": fig.max,
            "samples": list(fig.samples),
            "note": fig.note,
            "ceiling": None,
            "anchor": None,
        }
        if ceiling is not None:
            entry["ceiling"] = {
                "key": ceiling.key,
                "median": ceiling.median,
                "ratio": fig.median / ceiling.median if ceiling.median else None,
            }
        if fig.anchor is not None:
            entry["anchor"] = {
                "name": fig.anchor.name,
                "value": fig.anchor.value,
                "unit": fig.anchor.unit,
                "better": fig.anchor.better,
                "ratio": fig.anchor.ratio(fig.median),
                "met": fig.anchor.met(fig.median),
            }
        figures.append(entry)
    return {
        "command": report.command,
        "started": report.started.isoformat(),
        "quick": report.quick,
        "rounds": report.rounds,
        "store": report.store,
        "machine": machine(),
        "scenario_seconds": report.seconds,
        "figures": figures,
        "errors": report.errors,
    }


def default_path(report: Report) -> Path:
    return RESULTS_DIR / f"{report.started:%Y-%m-%dT%H%M%S}.json"


def write_json(report: Report, path: Path | None = None) -> Path:
    """Write the report (``bench/results/<date>.json`` unless ``path``); returns the path."""
    target = path or default_path(report)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(as_json(report), indent=2) + "\n")
    return target
