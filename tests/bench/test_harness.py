"""The bench harness runs scenarios, survives a failing one, and reports the table and JSON
shape the README and the lead's tooling read: medians with min/max, ceiling ratios from the
same run, anchors with a met/missed verdict. Timing values are not checked, only shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.__main__ import main
from bench.harness import (
    ANCHORS,
    Context,
    Figure,
    Registry,
    Scenario,
    collect_rounds,
    figure,
    percentile,
    render,
    run_scenarios,
    write_json,
)
from bench.suite import build_registry


async def _ceilings(ctx: Context) -> list[Figure]:
    return [figure("ceilings", "plain POST", unit="req/s", samples=[1000.0, 800.0, 1200.0])]


async def _api(ctx: Context) -> list[Figure]:
    calls = iter([300.0, 100.0, 200.0])

    async def measure(index: int) -> dict[str, float]:
        return {"creates/s": next(calls), "create p99": 50.0 + index}

    samples = await collect_rounds(measure, rounds=ctx.rounds)
    return [
        figure("api", "creates/s", unit="req/s", samples=samples["creates/s"],
               ceiling="ceilings/plain POST", anchor=ANCHORS["kwok"], note="tiny"),
        figure("api", "create p99", unit="ms", samples=samples["create p99"],
               anchor=ANCHORS["api-slo"]),
    ]  # fmt: skip


async def _broken(ctx: Context) -> list[Figure]:
    raise RuntimeError("component fell over")


def _registry() -> Registry:
    return Registry([
        Scenario("ceilings", "ceilings", _ceilings, "fixed ceiling"),
        Scenario("api", "api", _api, "fixed api figures"),
        Scenario("broken", "api", _broken, "always fails"),
        Scenario("huge", "scale", _api, "too long for --quick", quick=False),
    ])  # fmt: skip


async def test_report_has_medians_ratios_anchors_and_the_failure(tmp_path: Path) -> None:
    ctx = Context(quick=False, rounds=3, workdir=tmp_path)
    scenarios = _registry().select(only=["ceilings", "api"])
    report = await run_scenarios(scenarios, ctx, command="python -m bench --test")

    assert [s.name for s in scenarios] == ["ceilings", "api", "broken"]
    assert report.errors == {"broken": "RuntimeError: component fell over"}
    by_key = report.by_key()
    creates = by_key["api/creates/s"]
    assert (creates.median, creates.min, creates.max) == (200.0, 100.0, 300.0)
    assert report.ceiling_of(creates) is by_key["ceilings/plain POST"]

    table = render(report)
    lines = table.splitlines()
    assert "figure" in lines[2] and "x ceiling" in lines[2] and "x anchor" in lines[2]
    creates_line = next(line for line in lines if line.startswith("api/creates/s"))
    assert "100–300" in creates_line and "0.200" in creates_line  # 200 / 1000
    assert "10.00 ok" in creates_line  # 200 pods/s against kwok's 20
    assert "0.05 ok" in next(line for line in lines if line.startswith("api/create p99"))
    assert "FAILED broken: RuntimeError: component fell over" in table
    assert "api/creates/s: tiny" in table

    path = write_json(report, tmp_path / "out" / "result.json")
    doc = json.loads(path.read_text())
    assert set(doc) >= {"command", "started", "machine", "figures", "errors", "rounds", "store"}
    assert doc["store"] == "sqlite" and lines[0].endswith("kubelite store: sqlite")
    entry = next(f for f in doc["figures"] if f["key"] == "api/creates/s")
    assert entry["samples"] == [300.0, 100.0, 200.0]
    assert entry["ceiling"] == {"key": "ceilings/plain POST", "median": 1000.0, "ratio": 0.2}
    assert entry["anchor"]["met"] is True and entry["anchor"]["ratio"] == pytest.approx(10.0)
    assert doc["errors"] == {"broken": "RuntimeError: component fell over"}


def test_quick_drops_long_scenarios_unless_named() -> None:
    registry = _registry()
    assert "huge" not in [s.name for s in registry.select(quick=True)]
    assert "huge" in [s.name for s in registry.select(quick=False)]
    assert [s.name for s in registry.select(only=["huge"], quick=True)] == ["huge"]
    assert [s.name for s in registry.select(only=["scale"], quick=True)] == []
    with pytest.raises(KeyError):
        registry.select(only=["nope"])


def test_percentile_is_nearest_rank() -> None:
    samples = [float(i) for i in range(1, 101)]
    assert percentile(samples, 0.5) == 50.0
    assert percentile(samples, 0.99) == 99.0
    assert percentile([7.0], 0.99) == 7.0


def test_the_real_suite_starts_with_ceilings_and_keeps_big_runs_out_of_quick() -> None:
    registry = build_registry()
    names = registry.names()
    assert names[0] == "ceilings"
    quick = [s.name for s in registry.select(quick=True)]
    assert "scale-1000x30000" not in quick and "e2e-10000x1000" not in quick
    assert {"api", "watch", "e2e-1000x100", "startup-churn", "startup-churn-process"} <= set(quick)
    assert "scheduler-1000x100" in quick


def test_cli_rejects_an_unknown_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--only", "no-such-thing"]) == 2
    assert "unknown scenario" in capsys.readouterr().err


def test_the_benches_the_suite_plugs_in_still_take_its_arguments() -> None:
    """bench.api and bench.scheduler belong to other engineers: a changed signature must fail
    here, not an hour into ``make bench``."""
    import inspect

    from bench import api, scheduler

    inspect.signature(api.measure_requests).bind("url", "target", count=1, in_flight=1)
    inspect.signature(api.measure_fanout).bind("url", watchers=1, events=1, in_flight=1)
    inspect.signature(api.apiserver_argv).bind("memory://")
    inspect.signature(api.server_process).bind(["argv"])
    inspect.signature(scheduler.run_case).bind(
        1, 1, "backlog", concurrency=1, workdir=Path(), store="sqlite"
    )
    assert {"op", "per_s", "p50_ms", "p99_ms"} <= set(api.Figure.__dataclass_fields__)
    assert {"delivered", "seconds", "closed"} <= set(api.FanOut.__dataclass_fields__)
    assert {"deliveries_per_s", "keeping_up"} <= set(dir(api.FanOut))
    assert "pods_per_s" in dir(scheduler.Result)
