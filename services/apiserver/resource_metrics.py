"""metrics.k8s.io/v1beta1: nodes' and pods' CPU and memory, scraped from the kubelets.

Why: ``kubectl top nodes|pods`` and the HorizontalPodAutoscaler read resource metrics from
``/apis/metrics.k8s.io/v1beta1``. In Kubernetes that group is metrics-server, an aggregated
API server that scrapes every kubelet; kubelite's apiserver does metrics-server's job itself,
so the group works with no extra component. It reaches the kubelets exactly as ``logs`` and
``exec`` do (``proxy.kubelet_url``: the node's preferred address and advertised port; the
same client session, ``proxy.KUBELET_SESSION``, so the same client certificate and CA) and
reads their ``/stats/summary`` (``services/kubelet/stats.py``).

Served (get and list only; ``labelSelector`` and ``fieldSelector`` as for nodes and pods):

* ``GET /apis/metrics.k8s.io/v1beta1/nodes[/{name}]``: ``NodeMetrics``;
* ``GET /apis/metrics.k8s.io/v1beta1[/namespaces/{ns}]/pods[/{name}]``: ``PodMetrics`` with one
  entry per running container.

The kinds join this apiserver's own registry (``serve_resource_metrics``), so discovery lists
the group as metrics-server's APIService makes it appear, and RBAC checks ``get``/``list`` on
``nodes.metrics.k8s.io`` and ``pods.metrics.k8s.io`` as usual; they are not in the shared
``api.registry`` because no other process stores or watches them.

Freshness: a node's summary is kept ``SUMMARY_TTL`` seconds, so ``kubectl top`` and the
autoscalers asking together cost each kubelet one scrape; a kubelet that cannot be reached
within ``SCRAPE_TIMEOUT`` is left out — its node and pods have no metrics (metrics-server's
answer too: ``kubectl top`` says "metrics not available yet"). One kubelet process may host
several simulated nodes behind one address; each is asked for by name (``?node=``).

Limits: the CPU rate is the kubelet's (its window is at least ``MIN_WINDOW``); no watch; no
``resourceVersion`` semantics — every read is a fresh measurement.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import Any

import aiohttp
from aiohttp import web

from api.errors import NotFound, StatusError
from api.registry import Registry, ResourceType
from api.resource_metrics import NodeMetrics, PodMetrics
from services.apiserver.codec import json_response
from services.apiserver.context import CONTEXT, ApiContext
from services.apiserver.predicate import Predicate
from services.apiserver.proxy import KUBELET_SESSION, kubelet_url

__all__ = ["GROUP", "SCRAPE_TIMEOUT", "SUMMARY_TTL", "serve_resource_metrics"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

GROUP = "metrics.k8s.io"
VERSION = "v1beta1"
SUMMARY_TTL = 5.0
"""Seconds a node's summary is reused: a third of the autoscaler's 15 s sync period, so each
sync sees figures at most that old."""
SCRAPE_TIMEOUT = 5.0
"""Seconds to wait for one kubelet's summary before leaving its node out."""
MAX_SCRAPES = 32
"""Kubelets scraped at once; a cluster of 1,000 simulated nodes is scraped in batches."""
MIN_WINDOW = "1s"
"""The window reported: the kubelet's least CPU-rate window (``stats.MIN_RATE_WINDOW``)."""

NODE_METRICS = ResourceType(
    group=GROUP,
    version=VERSION,
    kind="NodeMetrics",
    plural="nodes",
    singular="",
    namespaced=False,
    model=NodeMetrics,
    verbs=("get", "list"),
)
POD_METRICS = ResourceType(
    group=GROUP,
    version=VERSION,
    kind="PodMetrics",
    plural="pods",
    singular="",
    namespaced=True,
    model=PodMetrics,
    verbs=("get", "list"),
)

_SCRAPER: web.AppKey[Scraper] = web.AppKey("resource_metrics_scraper")


class Scraper:
    """Fetches and briefly keeps each node's ``/stats/summary``; reads ``app``'s options and
    its kubelet session (``setup_proxy``'s) when it scrapes."""

    def __init__(self, app: web.Application) -> None:
        self.app = app
        self._kept: dict[str, tuple[float, Obj]] = {}
        self._inflight: dict[str, asyncio.Task[Obj | None]] = {}
        self._gate = asyncio.Semaphore(MAX_SCRAPES)

    async def summaries(self, nodes: Iterable[Obj]) -> dict[str, Obj]:
        """The summaries of ``nodes`` that answered, by node name."""
        named = {str(n["metadata"]["name"]): n for n in nodes}
        self._forget_stale()
        results = await asyncio.gather(*(self.summary(node) for node in named.values()))
        return {name: s for name, s in zip(named, results, strict=True) if s is not None}

    def _forget_stale(self) -> None:
        """Drop summaries past their TTL, so a deleted node's last summary is not kept forever."""
        now = time.monotonic()
        for name in [n for n, (at, _) in self._kept.items() if now - at >= SUMMARY_TTL]:
            del self._kept[name]

    async def summary(self, node: Obj) -> Obj | None:
        name = str(node["metadata"]["name"])
        kept = self._kept.get(name)
        if kept is not None and time.monotonic() - kept[0] < SUMMARY_TTL:
            return kept[1]
        task = self._inflight.get(name)
        if task is None:  # one scrape per node however many requests want it
            task = asyncio.create_task(self._scrape(node), name=f"scrape kubelet of {name}")
            self._inflight[name] = task
            task.add_done_callback(lambda _: self._inflight.pop(name, None))
        return await asyncio.shield(task)

    async def _scrape(self, node: Obj) -> Obj | None:
        name = str(node["metadata"]["name"])
        options = self.app[CONTEXT].options
        try:
            base = kubelet_url(
                node,
                scheme="https" if options.kubelet_https else "http",
                preferred=options.kubelet_preferred_address_types,
            )
            url = base.with_path("/stats/summary").with_query(node=name)
            async with self._gate:
                async with self.app[KUBELET_SESSION].get(
                    url, timeout=aiohttp.ClientTimeout(total=SCRAPE_TIMEOUT)
                ) as response:
                    response.raise_for_status()
                    summary: Obj = await response.json()
        except (StatusError, aiohttp.ClientError, TimeoutError, ValueError) as exc:
            log.info("no resource metrics for node %s: its kubelet did not answer (%s)", name, exc)
            self._kept.pop(name, None)
            return None
        self._kept[name] = (time.monotonic(), summary)
        return summary


def _cpu(stats: Obj | None) -> str:
    return f"{int((stats or {}).get('usageNanoCores') or 0)}n"


def _memory(stats: Obj | None) -> str:
    value = int((stats or {}).get("workingSetBytes") or 0)
    return f"{value // 1024}Ki" if value % 1024 == 0 else str(value)


def _metadata(obj: Obj, *, at: str) -> Obj:
    meta = obj.get("metadata") or {}
    out: Obj = {"name": meta.get("name", ""), "creationTimestamp": at}
    if meta.get("namespace"):
        out["namespace"] = meta["namespace"]
    if meta.get("labels"):
        out["labels"] = dict(meta["labels"])
    return out


def node_metrics(node: Obj, summary: Obj) -> Obj:
    stats = summary.get("node") or {}
    at = str((stats.get("cpu") or {}).get("time") or "")
    return {
        "kind": "NodeMetrics",
        "apiVersion": f"{GROUP}/{VERSION}",
        "metadata": _metadata(node, at=at),
        "timestamp": at,
        "window": MIN_WINDOW,
        "usage": {"cpu": _cpu(stats.get("cpu")), "memory": _memory(stats.get("memory"))},
    }


def pod_metrics(pod: Obj, stats: Obj) -> Obj | None:
    """The pod's metrics, or None while it has no running container measured."""
    containers = stats.get("containers") or []
    if not containers:
        return None
    at = str((stats.get("cpu") or {}).get("time") or "")
    return {
        "kind": "PodMetrics",
        "apiVersion": f"{GROUP}/{VERSION}",
        "metadata": _metadata(pod, at=at),
        "timestamp": at,
        "window": MIN_WINDOW,
        "containers": [
            {
                "name": c["name"],
                "usage": {"cpu": _cpu(c.get("cpu")), "memory": _memory(c.get("memory"))},
            }
            for c in containers
        ],
    }


def _objects(ctx: ApiContext, plural: str, predicate: Predicate) -> list[Obj]:
    cache = ctx.cache(ctx.resource("", plural))
    assert cache is not None, f"the apiserver keeps a watch cache of {plural}"
    events, _ = cache.snapshot(predicate)
    return [event.obj for event in events]


def _predicate(request: web.Request, plural: str, namespace: str | None) -> Predicate:
    return Predicate.parse(
        request.app[CONTEXT].resource("", plural),
        namespace=namespace,
        label_selector=request.query.get("labelSelector", ""),
        field_selector=request.query.get("fieldSelector", ""),
    )


def _list(kind: str, items: list[Obj]) -> web.Response:
    return json_response(
        {"kind": kind, "apiVersion": f"{GROUP}/{VERSION}", "metadata": {}, "items": items}
    )


async def _nodes(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    name = request.match_info.get("name")
    predicate = _predicate(request, "nodes", None)
    nodes = [
        n
        for n in _objects(ctx, "nodes", predicate)
        if name is None or n["metadata"]["name"] == name
    ]
    summaries = await request.app[_SCRAPER].summaries(nodes)
    items = [
        node_metrics(n, summaries[n["metadata"]["name"]])
        for n in nodes
        if n["metadata"]["name"] in summaries
    ]
    if name is None:
        return _list("NodeMetricsList", items)
    if not items:
        raise NotFound.of("nodemetrics", name, group=GROUP)
    return json_response(items[0])


async def _pods(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    namespace = request.match_info.get("namespace")
    name = request.match_info.get("name")
    predicate = _predicate(request, "pods", namespace)
    pods = [
        p
        for p in _objects(ctx, "pods", predicate)
        if (p.get("spec") or {}).get("nodeName") and (name is None or p["metadata"]["name"] == name)
    ]
    nodes_rt = ctx.resource("", "nodes")
    found = [
        await ctx.cached_get(nodes_rt, None, node)
        for node in sorted({p["spec"]["nodeName"] for p in pods})
    ]
    nodes = [n for n in found if n is not None]
    summaries = await request.app[_SCRAPER].summaries(nodes)
    by_uid = {
        (stats.get("podRef") or {}).get("uid"): stats
        for summary in summaries.values()
        for stats in summary.get("pods") or []
    }
    items = []
    for pod in pods:
        stats = by_uid.get(pod["metadata"].get("uid"))
        measured = pod_metrics(pod, stats) if stats is not None else None
        if measured is not None:
            items.append(measured)
    if name is None:
        return _list("PodMetricsList", items)
    if not items:
        raise NotFound.of("podmetrics", name, group=GROUP)
    return json_response(items[0])


def serve_resource_metrics(app: web.Application, registry: Registry) -> None:
    """Add NodeMetrics and PodMetrics to this apiserver's ``registry`` (for discovery) and
    their routes to ``app``; call before ``setup_discovery`` and ``setup_rest``, with
    ``setup_proxy`` (whose kubelet session the scrapes use)."""
    registry.register(NODE_METRICS)
    registry.register(POD_METRICS)
    app[_SCRAPER] = Scraper(app)
    base = f"/apis/{GROUP}/{VERSION}"
    app.router.add_get(base + "/nodes", _nodes)
    app.router.add_get(base + "/nodes/{name}", _nodes)
    app.router.add_get(base + "/pods", _pods)
    app.router.add_get(base + "/namespaces/{namespace}/pods", _pods)
    app.router.add_get(base + "/namespaces/{namespace}/pods/{name}", _pods)
