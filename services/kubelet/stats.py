"""What each pod on a node uses: the kubelet's ``/stats/summary``, in Kubernetes' Summary shape.

Why: metrics-server (here: the apiserver's ``metrics.k8s.io``, which ``kubectl top`` and the
HPA read) learns CPU and memory from the kubelets. A Kubernetes kubelet reads them from the
cgroups of its containers through cAdvisor; kubelite's ``process`` runtime has no cgroups of its
own, so the kubelet reads ``/proc`` instead.

How a figure is measured (``ProcessUsage``): a container is its process tree — the instance's
pid and every process descending from it, found by one scan of the host's ``/proc`` per
summary. The scan reads two files of every process on the host (9 ms for 112 processes where
it was timed, growing with the host), so it runs in a worker thread, off the kubelet's event
loop. Its CPU is the sum of ``utime + stime`` of the live processes plus ``cutime + cstime``
(the children they reaped, which are no longer in the tree), so the cumulative counter
does not fall back when a child exits; its working set is the sum of their resident sets
(``statm``), shared pages counted once per process as RSS counts them. ``usageNanoCores`` is
the counter's rate between two summaries at least ``MIN_RATE_WINDOW`` apart (a summary asked
sooner repeats the last rate, as cAdvisor answers from its last housekeeping); the first summary
of an instance averages over its life so far.

The ``sim`` runtime runs nothing, so its figures are synthetic and deterministic
(``simulated_usage``): each container uses what it requests — ``resources.requests.cpu`` and
``.memory``, zero when it requests nothing — unless the pod's ``kubelite.io/simulated-cpu`` /
``kubelite.io/simulated-memory`` annotations (quantities, per container) say otherwise, which is
how a test or a demo puts a simulated Deployment "under load".

The node's figures are the sum of its pods': several kubelite nodes share one host, so the
host's own counters would say nothing about one node.

The same figures are also served as the kubelet's ``/metrics/resource`` (``resource_metrics``):
Prometheus text with Kubernetes' names — ``container_cpu_usage_seconds_total``,
``container_memory_working_set_bytes``, ``container_start_time_seconds``, their ``pod_`` and
``node_`` sums and ``resource_scrape_error`` — each sample stamped with when it was measured, as
metrics-server scrapes them.

Not guaranteed: a process that leaves its container's tree (double-forks and is re-parented
to init) is no longer counted; a figure is a snapshot, not a cgroup's exact accounting;
``rssBytes`` equals ``workingSetBytes`` (no page-cache accounting).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from api.meta import format_time, parse_time
from api.quantity import parse_quantity
from services.kubelet.runtime.base import ContainerRecord

__all__ = [
    "MIN_RATE_WINDOW",
    "RESOURCE_METRICS_CONTENT_TYPE",
    "SIMULATED_CPU",
    "SIMULATED_MEMORY",
    "NodeStats",
    "ProcessUsage",
    "UsageSampler",
    "resource_metrics",
    "simulated_usage",
]

Obj = dict[str, Any]

MIN_RATE_WINDOW = 1.0
"""Seconds a CPU rate is measured over at least: shorter windows turn scheduler jitter into
noise (a busy loop can read 0 for 10 ms)."""
SIMULATED_CPU = "kubelite.io/simulated-cpu"
SIMULATED_MEMORY = "kubelite.io/simulated-memory"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True, slots=True)
class Usage:
    """One container's figures at one moment."""

    cpu_seconds: float
    """Cumulative CPU time (``usageCoreNanoSeconds`` / 1e9)."""
    memory_bytes: int
    """The working set."""


class ProcessUsage:
    """One scan of ``/proc``: every live process's parent, CPU time and resident set."""

    def __init__(self, proc: Path = Path("/proc")) -> None:
        self.children: dict[int, list[int]] = {}
        self.cpu: dict[int, float] = {}
        self.rss: dict[int, int] = {}
        for entry in proc.iterdir():
            if entry.name.isdigit():
                self._read(int(entry.name), entry)

    def _read(self, pid: int, path: Path) -> None:
        try:
            stat = (path / "stat").read_bytes()
            statm = (path / "statm").read_bytes()
        except OSError:
            return  # it exited meanwhile
        # the fields after the command name, which may itself hold spaces and parentheses
        fields = stat[stat.rfind(b")") + 2 :].split()
        ppid = int(fields[1])
        # utime, stime, cutime, cstime: fields 14-17 of proc(5), counted from the state (3)
        ticks = sum(int(f) for f in fields[11:15])
        self.children.setdefault(ppid, []).append(pid)
        self.cpu[pid] = ticks / CLOCK_TICKS
        self.rss[pid] = int(statm.split()[1]) * PAGE_SIZE

    def of_tree(self, root: int) -> Usage | None:
        """The figures of ``root`` and its descendants; None when ``root`` is gone."""
        if root not in self.cpu:
            return None
        cpu, rss, pending = 0.0, 0, [root]
        while pending:
            pid = pending.pop()
            cpu += self.cpu.get(pid, 0.0)
            rss += self.rss.get(pid, 0)
            pending.extend(self.children.get(pid, ()))
        return Usage(cpu_seconds=cpu, memory_bytes=rss)


def simulated_usage(pod: Mapping[str, Any], container: Mapping[str, Any]) -> tuple[int, int]:
    """A simulated container's ``(nanocores, bytes)``: the pod's simulated-usage annotations,
    else the container's requests, else zero."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    requests = (container.get("resources") or {}).get("requests") or {}
    cpu = annotations.get(SIMULATED_CPU, requests.get("cpu", 0))
    memory = annotations.get(SIMULATED_MEMORY, requests.get("memory", 0))
    return int(parse_quantity(cpu) * 1_000_000_000), int(parse_quantity(memory))


@dataclass(slots=True)
class _Sample:
    at: float
    cpu_seconds: float
    nanocores: int


class UsageSampler:
    """Turns cumulative CPU counters into rates, remembering one sample per instance."""

    def __init__(self) -> None:
        self._samples: dict[str, _Sample] = {}

    def nanocores(self, record: ContainerRecord, usage: Usage, *, now: float) -> int:
        last = self._samples.get(record.container_id)
        if last is None:
            # the first look: the average over the instance's life so far
            lifetime = max(now - record.started_at, MIN_RATE_WINDOW)
            rate = int(usage.cpu_seconds / lifetime * 1e9)
        elif now - last.at < MIN_RATE_WINDOW:
            return last.nanocores
        else:
            spent = max(usage.cpu_seconds - last.cpu_seconds, 0.0)
            rate = int(spent / (now - last.at) * 1e9)
        self._samples[record.container_id] = _Sample(now, usage.cpu_seconds, rate)
        return rate

    def forget_all_but(self, container_ids: Iterable[str]) -> None:
        """Drop the samples of instances no longer running."""
        keep = set(container_ids)
        for gone in [cid for cid in self._samples if cid not in keep]:
            del self._samples[gone]


def _timestamp(seconds: float) -> str:
    return format_time(datetime.fromtimestamp(seconds, UTC))


def _cpu(nanocores: int, core_nanoseconds: int, at: str) -> Obj:
    return {"time": at, "usageNanoCores": nanocores, "usageCoreNanoSeconds": core_nanoseconds}


def _memory(working_set: int, at: str) -> Obj:
    return {
        "time": at,
        "usageBytes": working_set,
        "workingSetBytes": working_set,
        "rssBytes": working_set,
    }


@dataclass(slots=True)
class _Totals:
    nanocores: int = 0
    core_nanoseconds: int = 0
    memory: int = 0

    def add(self, nanocores: int, core_nanoseconds: int, memory: int) -> None:
        self.nanocores += nanocores
        self.core_nanoseconds += core_nanoseconds
        self.memory += memory


class NodeStats:
    """The Summary of one node's pods, measured afresh on every call."""

    def __init__(self, *, node_name: str, started_at: float) -> None:
        self.node_name = node_name
        self.started_at = started_at
        self.sampler = UsageSampler()

    async def summary(
        self, pods: Iterable[tuple[Obj, list[ContainerRecord]]], *, simulated: bool
    ) -> Obj:
        """``pods``: each pod with its running instances (the newest of each container)."""
        processes = None if simulated else await asyncio.to_thread(ProcessUsage)
        wall = time.time()
        at = _timestamp(wall)
        node = _Totals()
        out_pods: list[Obj] = []
        seen: list[str] = []
        for pod, records in pods:
            pod_totals = _Totals()
            containers: list[Obj] = []
            specs = {c.get("name"): c for c in (pod.get("spec") or {}).get("containers") or []}
            for record in records:
                if processes is None:
                    nanocores, memory = simulated_usage(pod, specs.get(record.name) or {})
                    core_ns = int(nanocores * max(wall - record.started_at, 0.0))
                else:
                    usage = processes.of_tree(record.pid) if record.pid else None
                    if usage is None:
                        continue
                    nanocores = self.sampler.nanocores(record, usage, now=wall)
                    core_ns, memory = int(usage.cpu_seconds * 1e9), usage.memory_bytes
                seen.append(record.container_id)
                pod_totals.add(nanocores, core_ns, memory)
                containers.append(
                    {
                        "name": record.name,
                        "startTime": _timestamp(record.started_at),
                        "cpu": _cpu(nanocores, core_ns, at),
                        "memory": _memory(memory, at),
                    }
                )
            node.add(pod_totals.nanocores, pod_totals.core_nanoseconds, pod_totals.memory)
            out_pods.append(_pod_stats(pod, containers, pod_totals, at))
        self.sampler.forget_all_but(seen)
        return {
            "node": {
                "nodeName": self.node_name,
                "startTime": _timestamp(self.started_at),
                "cpu": _cpu(node.nanocores, node.core_nanoseconds, at),
                "memory": _memory(node.memory, at),
            },
            "pods": out_pods,
        }


def _pod_stats(pod: Obj, containers: list[Obj], totals: _Totals, at: str) -> Obj:
    meta = pod.get("metadata") or {}
    return {
        "podRef": {
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "uid": meta.get("uid", ""),
        },
        "startTime": (pod.get("status") or {}).get("startTime") or at,
        "containers": containers,
        "cpu": _cpu(totals.nanocores, totals.core_nanoseconds, at),
        "memory": _memory(totals.memory, at),
    }


RESOURCE_METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_RESOURCE_METRICS = (
    # name, type, help, which stats, the figure
    ("container_cpu_usage_seconds_total", "counter",
     "Cumulative cpu time consumed by the container in core-seconds", "container", "cpu"),
    ("container_memory_working_set_bytes", "gauge",
     "Current working set of the container in bytes", "container", "memory"),
    ("container_start_time_seconds", "gauge",
     "Start time of the container since unix epoch in seconds", "container", "start"),
    ("node_cpu_usage_seconds_total", "counter",
     "Cumulative cpu time consumed by the node in core-seconds", "node", "cpu"),
    ("node_memory_working_set_bytes", "gauge",
     "Current working set of the node in bytes", "node", "memory"),
    ("pod_cpu_usage_seconds_total", "counter",
     "Cumulative cpu time consumed by the pod in core-seconds", "pod", "cpu"),
    ("pod_memory_working_set_bytes", "gauge",
     "Current working set of the pod in bytes", "pod", "memory"),
)  # fmt: skip


def _figure(stats: Obj, figure: str) -> tuple[float, str]:
    """(value, the time it was measured) of one Summary entry."""
    if figure == "start":
        at = str(stats.get("startTime") or "")
        return parse_time(at).timestamp(), at
    if figure == "cpu":
        cpu = stats.get("cpu") or {}
        return int(cpu.get("usageCoreNanoSeconds") or 0) / 1e9, str(cpu.get("time") or "")
    memory = stats.get("memory") or {}
    return float(memory.get("workingSetBytes") or 0), str(memory.get("time") or "")


def _sample(name: str, labels: dict[str, str], stats: Obj, figure: str) -> str:
    value, at = _figure(stats, figure)
    stamp = int(parse_time(at).timestamp() * 1000)
    text = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"{name}{{{text}}} {value!r} {stamp}" if text else f"{name} {value!r} {stamp}"


def resource_metrics(summary: Obj) -> str:
    """A Summary as the kubelet's ``/metrics/resource`` (Prometheus text format)."""
    lines: list[str] = []
    for name, kind, help_text, scope, figure in _RESOURCE_METRICS:
        lines += [f"# HELP {name} [STABLE] {help_text}", f"# TYPE {name} {kind}"]
        if scope == "node":
            lines.append(_sample(name, {}, summary["node"], figure))
            continue
        for pod in summary["pods"]:
            ref = pod["podRef"]
            labels = {"namespace": ref["namespace"], "pod": ref["name"]}
            if scope == "pod":
                lines.append(_sample(name, labels, pod, figure))
                continue
            for container in pod["containers"]:
                lines.append(
                    _sample(name, {"container": container["name"], **labels}, container, figure)
                )
    lines += [
        "# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container "
        "metrics, 0 otherwise",
        "# TYPE resource_scrape_error gauge",
        "resource_scrape_error 0",
    ]
    return "\n".join(lines) + "\n"
