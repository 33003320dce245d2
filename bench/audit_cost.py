"""ConfigMap creates per second with the audit log on, beside the same apiserver without one.

Why: an audit policy makes the apiserver build an audit.k8s.io/v1 Event for every request and
append it to a file, at each stage the policy keeps; with ``RequestResponse`` it also serialises
the request and response bodies. The cost depends on the machine; the ratio to an apiserver
without a policy, measured in the same run, is what this shows.

* ``no audit``: an apiserver without ``--audit-policy-file`` (the ceiling);
* ``audit Metadata``: every request logged at ``Metadata`` (who, what, when, the code);
* ``audit RequestResponse``: every request logged with its request and response bodies.

Load: ``--concurrency`` (32) creates in flight on the plain loopback port, one keep-alive
``aiohttp`` session, for ``--seconds`` (3) per figure; each figure against its own apiserver
process (memory store), one after the other, so they never share the cores.

Limits: the log goes to a local file on the same disk as everything else; log rotation is off.

``python -m bench.audit_cost [--seconds S] [--concurrency C]``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from bench.harness import Context, Figure, figure
from bench.writes import compare_main, configmap_creates, suite_rounds, writes_per_second
from kubelite.testing import Processes

SCENARIO = "audit-cost"
LEVELS = ("Metadata", "RequestResponse")


def _policy(level: str) -> dict[str, object]:
    return {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": level}]}


async def _measure_one(
    level: str | None, *, seconds: float, concurrency: int, workdir: Path
) -> tuple[float, int]:
    """Creates/s against one apiserver audited at ``level`` (None: no policy), and the audit
    log's size in bytes afterwards."""
    args: list[str] = []
    log = workdir / f"audit-{level}.log"
    if level is not None:
        policy = workdir / f"policy-{level}.json"
        policy.write_text(json.dumps(_policy(level)))
        args = [f"--audit-policy-file={policy}", f"--audit-log-path={log}"]
    processes = Processes(workdir / (level or "none"))
    try:
        api = await asyncio.to_thread(processes.apiserver, store="memory://", args=args)
        rate = await writes_per_second(
            api.url, configmap_creates("cm"), seconds=seconds, concurrency=concurrency, expect=201
        )
    finally:
        await asyncio.to_thread(processes.stop_all)
    written = log.stat().st_size if log.exists() else 0
    if level is not None and written == 0:
        raise RuntimeError(f"the audit log at level {level} stayed empty: nothing was measured")
    return rate, written


async def measure(*, seconds: float, concurrency: int, workdir: Path) -> dict[str, float]:
    """Creates/s without an audit policy and at each level in ``LEVELS``."""
    rates: dict[str, float] = {}
    for level in (None, *LEVELS):
        rate, _ = await _measure_one(
            level, seconds=seconds, concurrency=concurrency, workdir=workdir
        )
        rates["no audit" if level is None else f"audit {level}"] = rate
    return rates


async def run(ctx: Context) -> list[Figure]:
    """The suite's scenario: audited creates with the unaudited apiserver as ceiling."""
    rounds, seconds = await suite_rounds(ctx, SCENARIO, measure)
    note = f"32 ConfigMap creates in flight, keep-alive, {seconds:g} s per figure"
    return [
        figure(SCENARIO, "no audit", unit="creates/s", samples=rounds["no audit"],
               note="an apiserver without --audit-policy-file"),
        *(
            figure(SCENARIO, f"audit {level}", unit="creates/s",
                   samples=rounds[f"audit {level}"], ceiling=f"{SCENARIO}/no audit", note=note)
            for level in LEVELS
        ),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    return compare_main(
        argv, prog="python -m bench.audit_cost", description=__doc__, measure=measure,
        unit="creates/s",
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
