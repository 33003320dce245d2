"""From a pod worker's memory to the pod status it reports.

Why a module of its own: ``pod_status.py`` builds a status from views of containers and knows
Kubernetes' rules (phase, conditions, container states); the worker's memory knows instances,
waiting reasons and probe results. This is the seam between them: a ``ContainerView`` per
container of the spec, rendered and handed to the status manager.

What it owns: ``render_status`` (pure over the memory; an evicted pod renders Failed with
reason ``Evicted``) and ``publish_status`` (hand it to the
status manager, which coalesces and writes it).

What it does not guarantee: a published status is not written yet; the status manager writes
it when it can (``StatusManager.write_now`` is the synchronous path termination uses).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.kubelet.pod_memory import ContainerState, PodMemory
from services.kubelet.pod_status import ContainerView, build_pod_status

__all__ = ["publish_status", "render_status"]

Obj = dict[str, Any]


def _views(
    table: Mapping[str, ContainerState], specs: list[Mapping[str, Any]]
) -> list[ContainerView]:
    views = []
    for c in specs:
        st = table.get(c["name"])
        cur = st.current if st else None
        running = cur is not None and cur.running and st is not None
        views.append(
            ContainerView(
                name=c["name"],
                image=c.get("image") or "",
                current=cur,
                previous=st.previous if st else None,
                waiting=st.waiting if st else None,
                ready=running and st is not None and st.ready and st.started,
                started=running and st is not None and st.started,
            )
        )
    return views


def render_status(mem: PodMemory, *, policy: str, terminal: bool = False) -> Obj:
    """The status of the pod as its worker knows it; ``terminal`` once all containers stopped."""
    spec = mem.pod.get("spec") or {}
    terminal = terminal or mem.evicted is not None  # an evicted pod's containers are stopped
    return build_pod_status(
        old=mem.pod.get("status") or {},
        views=_views(mem.containers, spec.get("containers") or []),
        init_views=_views(mem.init, spec.get("initContainers") or []),
        restart_policy=policy,
        pod_ip=mem.pod_ip,
        host_ip=mem.ctx.host_ip,
        sandbox_ready=mem.pod_ip is not None and not terminal,
        terminal=terminal,
        start_time=mem.start_time,
        failed=("Evicted", mem.evicted) if mem.evicted is not None else None,
    )


def publish_status(mem: PodMemory, *, policy: str) -> None:
    mem.ctx.status.set_status(mem.pod, render_status(mem, policy=policy))
