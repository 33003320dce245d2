"""API and watch latency at a steady churn: what Kubernetes' API SLO is stated at.

Why: Kubernetes' API call latency SLO (p99 <= 1 s for single-object mutating and read calls)
is judged under a steady load, not at saturation; at saturation latency is queueing and says
little. This module offers the apiserver an *open-loop* load at a fixed rate — every request
is its own task, sent at its scheduled time whether or not earlier ones have answered, so a
slow answer cannot hide later ones (no coordinated omission):

* ``rate`` pod creates per second (mutating calls) and, interleaved, ``rate`` gets of pods
  created earlier (read calls), each latency measured from send to complete answer;
* one watch of the namespace open throughout: **watch latency** = the moment this process
  reads a pod's ``ADDED`` line minus the moment its create was acknowledged. The event may be
  read before the acknowledgement (both leave the apiserver at nearly the same time); such
  negative latencies are counted as 0.

Limits: client and apiserver share the machine's cores; the pacing timer's own jitter (a few
ms under load) is inside the figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

import aiohttp

from bench.harness import percentile
from client.watch import split_lines

__all__ = ["measure_churn"]


def _pod(name: str) -> bytes:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "churn"}},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "nginx:1.27",
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                    }
                ]
            },
        }
    ).encode()


async def measure_churn(
    url: str, *, rate: float = 20.0, seconds: float = 10.0, namespace: str = "default",
    prefix: str = "churn",
) -> dict[str, float]:  # fmt: skip
    """Drive ``rate`` creates/s and ``rate`` gets/s for ``seconds``: ``create p50/p99``,
    ``get p50/p99``, ``watch p50/p99`` (ms) and the create rate achieved (``creates/s sent``)."""
    count = max(2, int(rate * seconds))
    path = f"/api/v1/namespaces/{namespace}/pods"
    acked: dict[str, float] = {}
    seen: dict[str, float] = {}
    create_ms: list[float] = []
    get_ms: list[float] = []
    all_seen = asyncio.Event()
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
    async with aiohttp.ClientSession(
        url, connector=aiohttp.TCPConnector(limit=0), timeout=timeout
    ) as session:
        async with session.get(path, params={"limit": "1"}) as resp:
            rv = (await resp.json())["metadata"]["resourceVersion"]
        watch = await session.get(
            path, params={"watch": "1", "resourceVersion": rv, "timeoutSeconds": "3600"}
        )

        async def read_watch() -> None:
            async for line in split_lines(watch.content.iter_any()):
                now = time.perf_counter()
                event: dict[str, Any] = json.loads(line)
                if event.get("type") != "ADDED":
                    continue
                name = event["object"]["metadata"]["name"]
                if name.startswith(prefix):
                    seen.setdefault(name, now)
                    if len(seen) >= count:
                        all_seen.set()

        reader = asyncio.create_task(read_watch(), name="churn watch reader")

        async def create(name: str) -> None:
            start = time.perf_counter()
            async with session.post(
                path, data=_pod(name), headers={"Content-Type": "application/json"}
            ) as resp:
                await resp.read()
                if resp.status != 201:
                    raise RuntimeError(f"create {name} answered {resp.status}")
            end = time.perf_counter()
            acked[name] = end
            create_ms.append((end - start) * 1e3)

        async def get(name: str) -> None:
            start = time.perf_counter()
            async with session.get(f"{path}/{name}") as resp:
                await resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"get {name} answered {resp.status}")
            get_ms.append((time.perf_counter() - start) * 1e3)

        tasks: list[asyncio.Task[None]] = []
        interval = 1.0 / rate
        began = time.perf_counter()
        try:
            for i in range(count):
                # sleep until this request's slot: the pacing of an open-loop load
                await asyncio.sleep(max(0.0, began + i * interval - time.perf_counter()))
                tasks.append(asyncio.create_task(create(f"{prefix}-{i:06d}")))
                if acked:  # read a pod already acknowledged, half an interval later
                    await asyncio.sleep(
                        max(0.0, began + (i + 0.5) * interval - time.perf_counter())
                    )
                    tasks.append(asyncio.create_task(get(next(reversed(acked)))))
            await asyncio.gather(*tasks)
            sent_per_s = count / (time.perf_counter() - began)
            await asyncio.wait_for(all_seen.wait(), timeout=60)
        finally:
            for task in tasks:
                task.cancel()
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
                await reader
            watch.close()
    watch_ms = [max(0.0, (seen[name] - acked[name]) * 1e3) for name in acked]
    return {
        "create p50": percentile(create_ms, 0.5),
        "create p99": percentile(create_ms, 0.99),
        "get p50": percentile(get_ms, 0.5),
        "get p99": percentile(get_ms, 0.99),
        "watch p50": percentile(watch_ms, 0.5),
        "watch p99": percentile(watch_ms, 0.99),
        "creates/s sent": sent_per_s,
    }
