"""Custom-object creates per second beside Pod creates per second, against the same apiserver.

Why: an operator's tests and controllers write custom objects; a custom kind has no code of its
own — its CRD's schema is walked on every write (defaulting, pruning, structural validation, the
``x-kubernetes-validations`` CEL rules). The absolute figure depends on the machine; the ratio to
Pod creates (a built-in kind with hand-written validation) against the same process, in the same
run, is what this shows:

* ``pod``: creates of a one-container Pod (no scheduler runs: the apiserver alone);
* ``custom object``: creates of a ``Widget`` whose CRD schema has types, an enum, a pattern,
  defaults and two CEL rules (one on ``spec``, one on a scalar).

Load: ``--concurrency`` (32) creates in flight, one keep-alive ``aiohttp`` session, for
``--seconds`` (3) per figure, one after the other against one real apiserver process (memory
store) on loopback.

Limits: the load generator shares the cores with the server; the CRD's rules are few and cheap
(a CRD with many rules over long lists costs more per write).

``python -m bench.cr_create [--seconds S] [--concurrency C]``.
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
from kubelite.testing.waiting import apoll_until

SCENARIO = "cr-create"

Obj = dict[str, Any]

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/bench.kubelite.io/v1/namespaces/default/widgets"

WIDGET_CRD: Obj = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.bench.kubelite.io"},
    "spec": {
        "group": "bench.kubelite.io",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "x-kubernetes-validations": [
                                    {"rule": "self.minReplicas <= self.maxReplicas"}
                                ],
                                "properties": {
                                    "size": {"type": "string", "enum": ["small", "large"]},
                                    "color": {
                                        "type": "string",
                                        "pattern": "^[a-z]+$",
                                        "default": "blue",
                                    },
                                    "minReplicas": {"type": "integer", "default": 1},
                                    "maxReplicas": {
                                        "type": "integer",
                                        "default": 3,
                                        "x-kubernetes-validations": [{"rule": "self <= 100"}],
                                    },
                                },
                            },
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    }
                },
            }
        ],
    },
}
"""A CRD with the schema features a small operator's kind uses."""


def _pod(n: int) -> tuple[str, str, Obj, str]:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{n}"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    return "POST", "/api/v1/namespaces/default/pods", body, "application/json"


def _widget(n: int) -> tuple[str, str, Obj, str]:
    body = {
        "apiVersion": "bench.kubelite.io/v1",
        "kind": "Widget",
        "metadata": {"name": f"widget-{n}"},
        "spec": {"size": "small", "maxReplicas": 5},
    }
    return "POST", WIDGETS, body, "application/json"


async def serve_widgets(url: str) -> None:
    """Create the Widget CRD and wait until its kind is served."""
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{url}{CRDS}", json=WIDGET_CRD) as resp:
            if resp.status != 201:
                raise RuntimeError(f"the CRD was refused ({resp.status}): {await resp.text()}")

        async def served() -> bool:
            async with session.get(f"{url}{WIDGETS}") as resp:
                return resp.status == 200

        await apoll_until(served, what="the Widget kind to be served")


async def measure(*, seconds: float, concurrency: int, workdir: Path) -> dict[str, float]:
    """Pod creates/s, then custom-object creates/s, against one apiserver."""
    processes = Processes(workdir)
    try:
        api = await asyncio.to_thread(processes.apiserver, store="memory://")
        await serve_widgets(api.url)
        rates: dict[str, float] = {}
        for name, request in (("pod", _pod), ("custom object", _widget)):
            rates[name] = await writes_per_second(
                api.url, request, seconds=seconds, concurrency=concurrency, expect=201
            )
        return rates
    finally:
        await asyncio.to_thread(processes.stop_all)


async def run(ctx: Context) -> list[Figure]:
    """The suite's scenario: custom-object creates with Pod creates as the ceiling."""
    rounds, seconds = await suite_rounds(ctx, SCENARIO, measure)
    note = f"32 creates in flight, keep-alive, {seconds:g} s per figure, one apiserver"
    return [
        figure(SCENARIO, "pod", unit="creates/s", samples=rounds["pod"], note=note),
        figure(SCENARIO, "custom object", unit="creates/s", samples=rounds["custom object"],
               ceiling=f"{SCENARIO}/pod", note=note),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    return compare_main(
        argv, prog="python -m bench.cr_create", description=__doc__, measure=measure,
        unit="creates/s",
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
