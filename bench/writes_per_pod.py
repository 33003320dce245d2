"""Writes per pod, counted from the audit log: what one pod of an RC costs the store.

Why: issue 23 asks where one pod's CPU goes, and most of an apiserver's CPU is spent per write
(decode, admission, validation, store commit, watch fan-out). A rate says how fast; a count
says how much work each pod is, independent of the machine's load — so this bench counts,
it does not time.

What it runs: ``bench.e2e``'s RC flow (one RC of N pods on M sim nodes, every component its own
process, ``bench.cluster``) with the apiserver's audit log on: every mutating request at
``Metadata`` level, events at ``Request`` level (so their ``reason`` is known), reads not at
all. Once all N pods are Running it waits until the pod-related writes stop growing (events
and the RC's status trail the pods' phase) — it polls the log: two reads a second apart agree,
30 s at most, said on stderr if reached — stops the cluster (a clean stop flushes the log) and
counts each successful write by (component, verb, resource[/subresource], event reason). The
component is the request's ``User-Agent`` (``kubelite-<component>``); the bench's own client is
``bench``.

Printed: a per-pod table beside Kubernetes' minimum for the same flow (``KUBERNETES``) — that
minimum is the "ceiling" of writes: 1 create, 1 binding, the kubelet's status write(s), and the
events Kubernetes' components would record. Node leases and node status are per node and per
second, not per pod: they are shown apart, as totals over the run. Suite figures: writes per pod
in all and per row, each anchored on Kubernetes' minimum (lower is better).

``python -m bench.writes_per_pod [--pods N] [--nodes M]`` (defaults 1,000 and 100).

Limits: only successful writes (2xx) make the per-pod figures; refused ones (409 conflicts,
422s) are counted in their own row, since they cost the apiserver too. The audit log itself
costs apiserver CPU, so run this apart from the timed benches (its figures are counts only).
Kubernetes' figures are read from its source (client-go's event correlator, the kubelet's
status manager, the scheduler), not measured here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bench.cluster import running_cluster
from bench.e2e import measure_rc
from bench.harness import Anchor, Context, Figure, ScenarioRun, figure

__all__ = ["KUBERNETES", "WriteKey", "count_writes", "measure", "render_table", "run"]

SCENARIO = "writes-per-pod"

POLICY: Mapping[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "None", "verbs": ["get", "list", "watch"]},
        {"level": "Request", "resources": [
            {"group": "", "resources": ["events"]},
            {"group": "events.k8s.io", "resources": ["events"]},
        ]},
        {"level": "Metadata"},
    ],
}  # fmt: skip
"""Every write audited (events with their body, for the reason), no read."""

POD_RESOURCES = frozenset({"pods", "pods/binding", "pods/status", "events",
                           "replicationcontrollers/status"})  # fmt: skip
"""What a pod of the RC costs; every other write (node leases and status, the RC's create, the
controller-manager's start-up writes) is per node, per second or once, and is shown apart."""


@dataclass(frozen=True, slots=True, order=True)
class WriteKey:
    """One row: who wrote what, how; ``reason`` for events only."""

    resource: str
    verb: str
    component: str
    reason: str = ""

    def label(self) -> str:
        what = f"{self.resource} {self.reason}".strip()
        return f"{what} {self.verb} ({self.component})"


Per = Literal["pod", "node", "rc"]

KUBERNETES: Mapping[tuple[str, str], tuple[float, Per, str]] = {
    ("pods", ""): (1, "pod", "the ReplicationManager's create"),
    ("pods/binding", ""): (1, "pod", "kube-scheduler's bind"),
    ("pods/status", ""): (
        1, "pod",
        "kubelet status manager: one patch per status change it sees; a pod started within "
        "one sync is Pending -> Running in 1 (usually 2: ContainerCreating, then Running)",
    ),
    ("events", "Scheduled"): (1, "pod", "kube-scheduler (distinct objects: no aggregation)"),
    ("events", "Pulled"): (1, "pod", "kubelet: 'Successfully pulled' or 'already present'"),
    ("events", "Created"): (1, "pod", "kubelet"),
    ("events", "Started"): (1, "pod", "kubelet"),
    ("events", "Pulling"): (1, "node", "kubelet, IfNotPresent: for a node's first pod only"),
    ("events", "SuccessfulCreate"): (
        25, "rc",
        "client-go's recorder: the spam filter lets 25 events per source and involved object "
        "(the RC) through, then 1 per 5 min; the aggregator folds > 10 similar ones into one "
        "patched event",
    ),
}  # fmt: skip
"""Kubernetes' writes for this flow by (resource, event reason): how many, per pod, per node or
per RC, and where from. The RC's status updates have no entry: Kubernetes writes one per sync
that changes the counts, and how many syncs a run takes depends on its pace."""


def _component(user_agent: str) -> str:
    name = user_agent.split("/", 1)[0].split(" ", 1)[0]
    if name.startswith("kubelite-"):
        return name.removeprefix("kubelite-")
    return "bench" if name == "kubelite" else name or "?"


def count_writes(log: Path) -> tuple[Counter[WriteKey], Counter[WriteKey]]:
    """Successful and refused writes in an audit log, by ``WriteKey``."""
    done: Counter[WriteKey] = Counter()
    refused: Counter[WriteKey] = Counter()
    for line in log.read_text().splitlines():
        event = json.loads(line)
        if event.get("stage") != "ResponseComplete":
            continue
        ref = event.get("objectRef") or {}
        resource = ref.get("resource", event.get("requestURI", "?"))
        if ref.get("subresource"):
            resource = f"{resource}/{ref['subresource']}"
        reason = ""
        if ref.get("resource") == "events":
            reason = (event.get("requestObject") or {}).get("reason", "")
        key = WriteKey(resource, event.get("verb", "?"), _component(event.get("userAgent", "")),
                       reason)  # fmt: skip
        code = (event.get("responseStatus") or {}).get("code", 0)
        (done if 200 <= code < 300 else refused)[key] += 1
    return done, refused


def _per_pod_total(done: Counter[WriteKey]) -> int:
    return sum(n for k, n in done.items() if k.resource in POD_RESOURCES)


async def _settle(log: Path, *, within: float = 30.0) -> None:
    """Wait until the pod-related writes in ``log`` stop growing. This polls: it re-reads the
    log once a second and returns when two reads agree (nothing tells the bench that the last
    event or status write has been made). Past ``within`` seconds it says so on stderr and
    returns, and the counts are taken as they are."""
    deadline = time.monotonic() + within
    last = -1
    while time.monotonic() < deadline:
        done, _ = await asyncio.to_thread(count_writes, log)
        total = _per_pod_total(done)
        if total == last:
            return
        last = total
        await asyncio.sleep(1.0)
    print(f"writes-per-pod: writes still growing after {within:g} s; counting them as they are",
          file=sys.stderr)  # fmt: skip


def _write_policy(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(POLICY))


async def measure(
    workdir: Path, *, pods: int, nodes: int, store: str = "sqlite"
) -> tuple[Counter[WriteKey], Counter[WriteKey], dict[str, float]]:
    """Run the RC flow audited; the writes done and refused, and ``measure_rc``'s figures."""
    policy, log = workdir / "audit-policy.json", workdir / "audit.log"
    await asyncio.to_thread(_write_policy, policy)
    args = [f"--audit-policy-file={policy}", f"--audit-log-path={log}"]
    async with running_cluster(workdir=workdir / "cluster", nodes=nodes, store=store,
                               max_pods=max(110, 2 * pods // nodes),
                               extra_apiserver_args=args) as cluster:  # fmt: skip
        figures = await measure_rc(cluster, pods=pods, controllers=1)
        await _settle(log)
    done, refused = await asyncio.to_thread(count_writes, log)
    return done, refused, figures


def _per_pod(count: float, per: Per, *, pods: int, nodes: int) -> float:
    """Kubernetes' ``count`` writes ``per`` pod, node or RC (one RC here), as writes per pod."""
    times = {"pod": pods, "node": min(nodes, pods), "rc": 1}[per]
    return min(count * times, pods) / pods


def _kubernetes(key: WriteKey, *, pods: int, nodes: int) -> float | None:
    row = KUBERNETES.get((key.resource, key.reason))
    return None if row is None else _per_pod(row[0], row[1], pods=pods, nodes=nodes)


def _minimum(*, pods: int, nodes: int) -> float:
    return sum(_per_pod(n, per, pods=pods, nodes=nodes) for n, per, _ in KUBERNETES.values())


def render_table(
    done: Counter[WriteKey], refused: Counter[WriteKey], *, pods: int, nodes: int
) -> str:
    """The per-pod table beside Kubernetes' minimum, then the per-node writes and refusals."""
    lines = [f"writes per pod, {pods} pods (audit log, successful writes)",
             f"  {'write':<58} {'kubelite':>9} {'kubernetes':>10}"]  # fmt: skip
    for key in sorted(done, key=lambda k: (-done[k], k)):
        if key.resource not in POD_RESOURCES:
            continue
        k8s = _kubernetes(key, pods=pods, nodes=nodes)
        k8s_text = "-" if k8s is None else f"{k8s:.3f}"
        lines.append(f"  {key.label():<58} {done[key] / pods:>9.3f} {k8s_text:>10}")
    minimum = _minimum(pods=pods, nodes=nodes)
    lines.append(f"  {'all pod-related writes':<58} {_per_pod_total(done) / pods:>9.3f} "
                 f"{minimum:>10.2f}")  # fmt: skip
    lines.append("not per pod (per node, per second or once), whole run:")
    for key in sorted(k for k in done if k.resource not in POD_RESOURCES):
        lines.append(f"  {key.label():<58} {done[key]:>9}")
    if refused:
        lines.append("refused writes (not in the figures above):")
        for key, n in refused.most_common():
            lines.append(f"  {key.label():<58} {n:>9}")
    lines.append("kubernetes column, from its source:")
    for (resource, reason), (count, per, why) in KUBERNETES.items():
        lines.append(f"  {resource} {reason}".rstrip() + f" = {count:g} per {per}: {why}")
    return "\n".join(lines)


def _figures(done: Counter[WriteKey], *, pods: int, nodes: int) -> list[Figure]:
    name = f"{SCENARIO} {pods}x{nodes}"
    minimum = _minimum(pods=pods, nodes=nodes)
    figures = [figure(name, "all pod-related writes", unit="writes/pod",
                      samples=[_per_pod_total(done) / pods],
                      anchor=Anchor("Kubernetes' minimum", minimum, "writes/pod", "lower"),
                      note="counted from the audit log; leases and node status apart")]  # fmt: skip
    for key in sorted(done, key=lambda k: (-done[k], k)):
        if key.resource not in POD_RESOURCES:
            continue
        k8s = _kubernetes(key, pods=pods, nodes=nodes)
        anchor = None if k8s is None else Anchor("Kubernetes", k8s, "writes/pod", "lower")
        figures.append(figure(name, key.label(), unit="writes/pod",
                              samples=[done[key] / pods], anchor=anchor))  # fmt: skip
    return figures


def scenario(*, pods: int, nodes: int) -> ScenarioRun:
    """The suite's scenario: one counted run (a count does not vary by round)."""

    async def run(ctx: Context) -> list[Figure]:
        done, refused, _ = await measure(ctx.workdir / f"{SCENARIO}-{pods}x{nodes}", pods=pods,
                                         nodes=nodes, store=ctx.store)  # fmt: skip
        print(render_table(done, refused, pods=pods, nodes=nodes), file=sys.stderr)
        return _figures(done, pods=pods, nodes=nodes)

    return run


run = scenario(pods=1000, nodes=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.writes_per_pod",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--store", choices=("sqlite", "memory"), default="sqlite")
    parser.add_argument("--keep", type=Path, default=None, help="keep the logs in this dir")
    args = parser.parse_args(argv)
    import uvloop

    with tempfile.TemporaryDirectory(prefix="bench-writes-per-pod-") as tmp:
        workdir = args.keep or Path(tmp)
        done, refused, figures = uvloop.run(
            measure(workdir, pods=args.pods, nodes=args.nodes, store=args.store)
        )
    print(render_table(done, refused, pods=args.pods, nodes=args.nodes))
    print(f"pods/s {figures['pods/s']:.1f} (audited, not comparable to the e2e rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
