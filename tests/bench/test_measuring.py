"""What the bench measures and how it labels it: watch fan-out counts the events each watcher
really received (a watcher closed early delivers fewer), the ceiling servers do their JSON work
with the apiserver's codec, and every scheduler and pod-startup row names its store or runtime.
No timing is asserted — only counts, labels and command lines."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from bench import api, ceilings, e2e, scheduler
from bench.cluster import kubelet_argv
from bench.harness import Context, Report, figure, render
from bench.suite import _watch_figure
from services.kubelet.main import build_parser as build_kubelet_parser


def _line(kind: str, name: str) -> bytes:
    return (
        json.dumps({"type": kind, "object": {"metadata": {"name": name}}})
        .replace(", ", ",")
        .replace(": ", ":")
        .encode()
        + b"\n"
    )


def test_event_counter_counts_added_lines_across_chunk_boundaries() -> None:
    stream = _line("ADDED", "a") + _line("ADDED", "b") + _line("ERROR", "gone")
    counter = api.EventCounter()
    # one byte at a time: a line is counted once, when its newline arrives
    counts = [counter.feed(stream[i : i + 1], now=float(i)) for i in range(len(stream))]
    assert counter.count == 2
    assert counts.count(1) == len(_line("ADDED", "b"))  # 1 from the end of "a" to that of "b"
    assert counter.last_at == float(len(_line("ADDED", "a")) * 2 - 1)  # not moved by ERROR


Watchers = list[tuple[web.StreamResponse, asyncio.Event]]


async def _fanout_server(*, close_first_after: int) -> tuple[TestServer, Watchers]:
    """A watch server whose first watcher is closed after ``close_first_after`` events, as the
    apiserver closes one that falls behind; the others get every event."""
    watchers: Watchers = []
    sent: dict[int, int] = {}

    async def pods(request: web.Request) -> web.StreamResponse:
        if "watch" not in request.query:
            return web.json_response({"metadata": {"resourceVersion": "1"}, "items": []})
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        done = asyncio.Event()
        watchers.append((resp, done))
        await done.wait()
        return resp

    async def create(request: web.Request) -> web.Response:
        name = (await request.json())["metadata"]["name"]
        for index, (resp, done) in enumerate(watchers):
            if done.is_set():
                continue
            if index == 0 and sent.get(index, 0) == close_first_after:
                await resp.write(_line("ERROR", "too slow"))
                done.set()  # the handler returns: the stream ends
                continue
            await resp.write(_line("ADDED", name))
            sent[index] = sent.get(index, 0) + 1
        return web.json_response({}, status=201)

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/default/pods", pods)
    app.router.add_post("/api/v1/namespaces/default/pods", create)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server, watchers


async def test_fanout_counts_the_events_watchers_really_received() -> None:
    server, watchers = await _fanout_server(close_first_after=2)
    try:
        url = str(server.make_url("")).rstrip("/")
        fan = await api.measure_fanout(
            url, watchers=3, events=5, in_flight=1, default_account=False
        )  # the stub serves pods alone, as the ceiling does
    finally:
        for _resp, done in watchers:
            done.set()
        await server.close()
    assert fan.delivered == 2 + 5 + 5  # not 3 x 5: the first watcher was closed after 2
    assert fan.closed == 1
    assert fan.deliveries_per_s == pytest.approx(fan.delivered / fan.seconds)
    assert fan.keeping_up == pytest.approx(fan.deliveries_per_s / (3 * fan.creates_per_s))


def test_watch_rows_have_units_ceilings_and_say_what_is_counted() -> None:
    fan = _watch_figure("fan-out to 10 watchers", [1.0], store="sqlite")
    assert (fan.unit, fan.ceiling) == ("events/s", "ceilings/fan-out to 10 watchers")
    assert "really received" in fan.note and "sqlite store" in fan.note
    closed = _watch_figure("closed early, 100 watchers", [3.0], store="sqlite")
    assert (closed.unit, closed.ceiling, closed.note) == ("watchers", None, "")
    assert _watch_figure("keeping up, 1000 watchers", [0.5], store="memory").unit == "share"


@contextlib.asynccontextmanager
async def _posted(argv: list[str], body: dict[str, Any]) -> AsyncIterator[tuple[bytes, bytes]]:
    """Start a ceiling server, POST ``body`` (the fan-out server: with a watch open first):
    (response body, first watch line or b"")."""
    async with api.server_process(argv) as url, aiohttp.ClientSession(url) as session:
        watch = None
        if "--serve-fanout" in argv:
            watch = await session.get("/api/v1/namespaces/default/pods", params={"watch": "1"})
        async with session.post("/api/v1/namespaces/default/pods", data=json.dumps(body),
                                headers={"Content-Type": "application/json"}) as resp:  # fmt: skip
            assert resp.status == 201
            created = await resp.read()
        line = await watch.content.readline() if watch is not None else b""
        if watch is not None:
            watch.close()
        yield created, line


@pytest.mark.e2e
@pytest.mark.parametrize(
    "argv", [api.baseline_argv(), ceilings.fanout_argv()], ids=["api", "fan-out"]
)
async def test_ceiling_servers_encode_as_the_apiserver_does(argv: list[str]) -> None:
    """orjson, compact, UTF-8 as is (stdlib ``json`` would write ``\\u00fc``)."""
    from services.apiserver.codec import dumps, loads

    body = api.pod_body(1)
    body["metadata"]["annotations"] = {"note": "grün"}
    async with _posted(argv, body) as (created, line):
        assert "grün".encode() in created and b'": ' not in created and b", " not in created
        assert created == dumps(loads(created))
        if line:
            assert line.startswith(b'{"type":"ADDED","object":' + created)


async def test_scheduler_rows_report_both_phases_on_the_store_they_ran_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, str]] = []

    async def run_case(pods: int, nodes: int, phase: str, **kw: Any) -> scheduler.Result:
        calls.append((phase, kw["store"]))
        seconds = 2.0 if phase == "backlog" else 4.0
        return scheduler.Result(pods, nodes, phase, seconds, 0.5, 1.0, 1.0)

    monkeypatch.setattr(scheduler, "run_case", run_case)
    ctx = Context(quick=True, rounds=1, workdir=tmp_path, store="sqlite")
    figures = await e2e.scheduler_scenario(pods=1000, nodes=100)(ctx)

    assert calls == [("backlog", "sqlite"), ("stream", "sqlite")]
    by_key = {f.key: f for f in figures}
    assert set(by_key) == {
        "scheduler 1000x100 sqlite/backlog pods/s",
        "scheduler 1000x100 sqlite/stream pods/s",
    }
    backlog, stream = by_key.values()
    assert (backlog.median, stream.median) == (500.0, 250.0)
    assert backlog.anchor is not None and stream.anchor is not None
    assert backlog.anchor.name == stream.anchor.name == "kube-scheduler CI floor"
    assert (backlog.ceiling, stream.ceiling) == (None, "ceilings/aiohttp POST")
    assert "while the scheduler runs" in stream.note


def test_scheduler_bench_puts_its_store_in_a_file_per_case(tmp_path: Path) -> None:
    url = scheduler.store_url("sqlite", workdir=tmp_path, case="store-1x1-stream")
    assert url == f"sqlite:///{tmp_path}/store-1x1-stream.db"
    assert scheduler.store_url("memory", workdir=tmp_path, case="x") == "memory://"
    with pytest.raises(ValueError):
        scheduler.store_url("etcd", workdir=tmp_path, case="x")


def test_startup_rows_name_their_runtime() -> None:
    assert (
        e2e.startup_label(rate=20, runtime="sim") == "startup at 20/s, sim runtime, 0 s start delay"
    )
    assert e2e.startup_label(rate=20, runtime="process") == "startup at 20/s, process runtime"


async def test_process_startup_runs_busybox_sleep_on_a_process_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def running_cluster(**kw: Any) -> AsyncIterator[object]:
        seen.update(kw)
        yield object()

    async def measure(cluster: object, **kw: Any) -> dict[str, float]:
        seen["pod"] = kw["body"]("p-0")
        seen["count"] = int(kw["rate"] * kw["seconds"])
        return {"startup p50": 0.5, "startup p99": 1.0}

    monkeypatch.setattr(e2e, "running_cluster", running_cluster)
    monkeypatch.setattr(e2e, "measure_startup_churn", measure)
    ctx = Context(quick=True, rounds=1, workdir=tmp_path)
    figures = await e2e.startup_scenario(nodes=1, runtime="process")(ctx)

    assert (seen["runtime"], seen["nodes"], seen["count"]) == ("process", 1, 200)
    assert seen["max_pods"] >= seen["count"]
    (container,) = seen["pod"]["spec"]["containers"]
    assert container["image"].startswith("busybox") and container["command"] == ["sleep", "3600"]
    assert [f.key for f in figures] == [
        "startup at 20/s, process runtime/startup p50",
        "startup at 20/s, process runtime/startup p99",
    ]
    assert figures[1].anchor is not None and figures[1].anchor.name == "pod startup p99 SLO"
    assert "200 busybox pods" in figures[1].note and "process node" in figures[1].note


def test_process_kubelets_get_a_loopback_pod_range_and_stop_their_pods(tmp_path: Path) -> None:
    def parse(argv: list[str]) -> argparse.Namespace:
        assert argv[1:3] == ["-m", "services.kubelet"], argv
        return build_kubelet_parser().parse_args(argv[3:])

    proc = parse(kubelet_argv(server="http://127.0.0.1:1", runtime="process", index=3, nodes=1,
                              workdir=tmp_path, max_pods=210))  # fmt: skip
    assert proc.runtime == "process" and proc.stop_pods_on_exit and proc.nodes == 1
    cidr = ipaddress.ip_network(proc.pod_cidr)
    assert cidr.subnet_of(ipaddress.ip_network("127.0.0.0/8"))
    assert proc.state_dir == tmp_path / "kubelet-3"
    with pytest.raises(ValueError):
        kubelet_argv(server="x", runtime="process", index=0, nodes=2, workdir=tmp_path, max_pods=1)
    sim = parse(kubelet_argv(server="http://127.0.0.1:1", runtime="sim", index=0, nodes=100,
                             workdir=tmp_path, max_pods=110))  # fmt: skip
    assert (sim.runtime, sim.nodes, sim.sim_start_delay) == ("sim", 100, 0.0)


def test_the_table_header_names_the_store() -> None:
    started = datetime(2026, 1, 1, tzinfo=UTC)
    report = Report(command="c", started=started, quick=True, rounds=1, store="sqlite")
    report.figures.append(figure("x", "y", unit="s", samples=[1.0]))
    assert render(report).splitlines()[0].endswith("kubelite store: sqlite")
    ceilings_only = Report(command="c", started=started, quick=True, rounds=1)
    assert "store" not in render(ceilings_only).splitlines()[0]
