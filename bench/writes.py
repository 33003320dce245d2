"""Writes per second against one apiserver, and the scaffolding of the "X beside Y" benches.

Why a module of its own: ``tls_create``, ``audit_cost``, ``cr_create`` and ``apply_rate`` each
measure two or more kinds of write in the same run and print each as a share of the first; the
load loop, the suite's rounds and the command line were the same in all four. Each bench keeps
what it is about — its requests, its apiserver(s) and its figures' names — and calls these:

* ``writes_per_second(url, request, ...)``: ``request(n)`` (method, path, JSON body, content type)
  with ``concurrency`` in flight on one keep-alive session for ``seconds``; every answer must be
  ``expect`` (anything else stops the measure: it would not be a write);
* ``configmap_creates(prefix)``: the request of a small ConfigMap create, numbered;
* ``suite_rounds(ctx, scenario, measure)``: the bench's ``measure`` run ``ctx.rounds`` times in
  fresh work directories, figures by name (``--quick``: 1 s per figure, else 3 s);
* ``compare_main(argv, ...)``: ``python -m bench.<name> [--seconds S] [--concurrency C]`` — one
  ``measure`` in a temporary directory, each figure printed beside the first.

Limits: the load generator shares the cores with the server, as every bench here does.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import ssl
import tempfile
import time
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import uvloop

from bench.harness import Context, collect_rounds

__all__ = [
    "CONCURRENCY",
    "Measure",
    "Request",
    "compare_main",
    "configmap_creates",
    "suite_rounds",
    "writes_per_second",
]

Obj = dict[str, Any]
Request = Callable[[int], tuple[str, str, Obj, str]]
"""The ``n``-th request of a load: method, path, JSON body and content type."""

CONCURRENCY = 32
"""Writes in flight unless ``--concurrency`` says otherwise."""


class Measure(Protocol):
    def __call__(
        self, *, seconds: float, concurrency: int, workdir: Path
    ) -> Coroutine[Any, Any, dict[str, float]]: ...


async def writes_per_second(
    url: str,
    request: Request,
    *,
    seconds: float,
    concurrency: int,
    expect: int,
    tls: ssl.SSLContext | None = None,
) -> float:
    """Requests/s of ``request(n)`` at ``url`` (``tls``: the client context for https)."""
    numbers = itertools.count()
    done = 0
    connector = aiohttp.TCPConnector(limit=0, ssl=tls if tls is not None else False)
    async with aiohttp.ClientSession(connector=connector) as session:
        deadline = time.monotonic() + seconds

        async def worker() -> None:
            nonlocal done
            while time.monotonic() < deadline:
                method, path, body, content_type = request(next(numbers))
                async with session.request(
                    method, f"{url}{path}", json=body, headers={"Content-Type": content_type}
                ) as resp:
                    answer = await resp.read()
                    if resp.status != expect:
                        raise RuntimeError(f"{method} {path} answered {resp.status}: {answer!r}")
                done += 1

        started = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return done / (time.monotonic() - started)


def configmap_creates(prefix: str) -> Request:
    """Creates of small ConfigMaps in ``default`` named ``<prefix>-<n>``."""

    def request(n: int) -> tuple[str, str, Obj, str]:
        body = {"metadata": {"name": f"{prefix}-{n}"}, "data": {"k": "v"}}
        return "POST", "/api/v1/namespaces/default/configmaps", body, "application/json"

    return request


async def suite_rounds(
    ctx: Context, scenario: str, measure: Measure
) -> tuple[dict[str, list[float]], float]:
    """``measure`` once per round (its own work directory each), the samples by figure name,
    and the seconds each figure was measured for."""
    seconds = 1.0 if ctx.quick else 3.0

    async def once(index: int) -> dict[str, float]:
        workdir = ctx.workdir / f"{scenario}-{index}"
        workdir.mkdir(parents=True, exist_ok=True)
        return await measure(seconds=seconds, concurrency=CONCURRENCY, workdir=workdir)

    return await collect_rounds(once, rounds=ctx.rounds), seconds


def compare_main(
    argv: Sequence[str] | None, *, prog: str, description: str | None, measure: Measure, unit: str
) -> int:
    """Run ``measure`` once and print every figure as a share of the first."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--concurrency", type=int, default=CONCURRENCY)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix=f"kubelite-{prog.rsplit('.', 1)[-1]}-") as tmp:
        rates = uvloop.run(
            measure(seconds=args.seconds, concurrency=args.concurrency, workdir=Path(tmp))
        )
    first, ceiling = next(iter(rates.items()))
    width = max(len(name) for name in rates)
    print(f"{unit} ({args.concurrency} in flight, {args.seconds:g} s each, loopback)")
    for name, rate in rates.items():
        print(f"  {name:{width}} {rate:8.0f}/s   {rate / ceiling:6.1%} of {first}")
    return 0
