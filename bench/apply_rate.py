"""Server-side applies per second beside updates per second of the same objects.

Why: ``kubectl apply --server-side``, Helm 4, Argo CD and Flux write with apply patches; each
apply builds the field set of the applied configuration, merges it with the live object by the
schema's list and map semantics, checks it against the other managers' fields and rewrites
``managedFields`` (``api/managed_fields.py``, ``services/apiserver/apply.py``). An update
(``PUT``) also records its manager's fields. The ratio of the two, against the same process in
the same run, is the price of apply:

* ``update``: ``PUT`` of a whole ConfigMap (no ``resourceVersion``: an unconditional update), its
  ``data`` changed each time;
* ``apply``: ``PATCH`` with ``application/apply-patch+yaml``, ``fieldManager=bench``, ``force``,
  the same ``data`` change.

Load: ``--concurrency`` (32) workers, each writing its own ConfigMap over and over (so writes
never conflict), one keep-alive ``aiohttp`` session, ``--seconds`` (3) per figure, against one
real apiserver process (memory store) on loopback.

Limits: a ConfigMap is a flat map; applies of objects with long lists or deep maps cost more.

``python -m bench.apply_rate [--seconds S] [--concurrency C]``.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import aiohttp

from bench.harness import Context, Figure, figure
from bench.writes import compare_main, suite_rounds, writes_per_second
from kubelite.testing import Processes

SCENARIO = "apply-rate"

Obj = dict[str, Any]

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def _configmap(n: int, *, objects: int) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"cm-{n % objects}"},
        "data": {"round": str(n), "fixed": "value"},
    }


async def _create(url: str, objects: int) -> None:
    async with aiohttp.ClientSession() as session:
        for n in range(objects):
            async with session.post(f"{url}{CONFIGMAPS}", json=_configmap(n, objects=objects)) as r:
                if r.status != 201:
                    raise RuntimeError(f"create answered {r.status}: {await r.text()}")


async def measure(*, seconds: float, concurrency: int, workdir: Path) -> dict[str, float]:
    """Updates/s, then applies/s, of ``concurrency`` ConfigMaps against one apiserver."""

    def update(n: int) -> tuple[str, str, Obj, str]:
        body = _configmap(n, objects=concurrency)
        return "PUT", f"{CONFIGMAPS}/{body['metadata']['name']}", body, "application/json"

    def apply(n: int) -> tuple[str, str, Obj, str]:
        body = _configmap(n, objects=concurrency)
        path = f"{CONFIGMAPS}/{body['metadata']['name']}?fieldManager=bench&force=true"
        return "PATCH", path, body, "application/apply-patch+yaml"

    processes = Processes(workdir)
    try:
        api = await asyncio.to_thread(processes.apiserver, store="memory://")
        await _create(api.url, concurrency)
        rates: dict[str, float] = {}
        for name, request in (("update", update), ("apply", apply)):
            rates[name] = await writes_per_second(
                api.url, request, seconds=seconds, concurrency=concurrency, expect=200
            )
        return rates
    finally:
        await asyncio.to_thread(processes.stop_all)


async def run(ctx: Context) -> list[Figure]:
    """The suite's scenario: applies with updates of the same objects as the ceiling."""
    rounds, seconds = await suite_rounds(ctx, SCENARIO, measure)
    note = f"32 ConfigMaps, one writer each, keep-alive, {seconds:g} s per figure"
    return [
        figure(SCENARIO, "update", unit="writes/s", samples=rounds["update"], note=note),
        figure(SCENARIO, "apply", unit="writes/s", samples=rounds["apply"],
               ceiling=f"{SCENARIO}/update", note=note),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    return compare_main(
        argv, prog="python -m bench.apply_rate", description=__doc__, measure=measure,
        unit="writes/s",
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
