"""Wiring a container's probes to its worker: ``start_probes``.

Why a module of its own: ``probes.py`` knows how to run a probe and when it counts as failed;
what the results *mean* for the pod is the worker's business, as in the kubelet's
``prober_manager.go``: a startup probe gates ``started`` and the other probes, readiness sets
``ready``, and a failed liveness (or startup) probe asks for the container to be restarted
by its restart policy. This module connects the two.

What it owns: one named task per probe of the current instance, results that wake the worker,
``Unhealthy`` events.

What it does not guarantee: results of an instance that has since been replaced are ignored;
a simulated runtime runs no probes (nothing listens in a simulated container) and counts its
containers started and ready.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from services.kubelet.pod_memory import ContainerState, PodMemory
from services.kubelet.probes import ProbeLoop, run_probe
from services.kubelet.runtime.base import ContainerRecord

__all__ = ["start_probes"]


def _on_result(
    mem: PodMemory, st: ContainerState, *, kind: str, record: ContainerRecord
) -> Callable[[bool, str, bool | None], None]:
    def on_result(ok: bool, message: str, state: bool | None) -> None:
        if st.current is not record:
            return
        if not ok:
            mem.event("Warning", "Unhealthy", f"{kind} probe failed: {message}")
        if kind == "Startup" and state is True and not st.started:
            st.started = True
            mem.wake.set()
        elif kind == "Readiness" and (state is True) != st.ready:
            st.ready = state is True
            mem.wake.set()
        elif kind in ("Startup", "Liveness") and state is False and st.probe_kill is None:
            st.probe_kill = f"Container {st.name} failed {kind.lower()} probe, will be restarted"
            mem.wake.set()

    return on_result


def start_probes(
    mem: PodMemory, st: ContainerState, *, spec: Mapping[str, Any], record: ContainerRecord
) -> None:
    """(Re)start the probes of ``record``, the current instance of container ``st``."""
    st.stop_probes()
    st.probe_kill = None
    startup = spec.get("startupProbe")
    readiness = spec.get("readinessProbe")
    liveness = spec.get("livenessProbe")
    simulated = mem.ctx.runtime.name == "sim"  # nothing listens in a simulated container
    st.started = startup is None or simulated
    st.ready = readiness is None or simulated
    if simulated:
        return

    def attempt(probe: Mapping[str, Any]) -> Callable[[], Any]:
        return lambda: run_probe(
            probe,
            runtime=mem.ctx.runtime,
            container_id=record.container_id,
            container=spec,
            pod_ip=mem.pod_ip or "127.0.0.1",
        )

    gate: asyncio.Event | None = None
    loops: list[tuple[str, ProbeLoop]] = []
    if startup:
        first = ProbeLoop(
            probe=startup,
            attempt=attempt(startup),
            on_result=_on_result(mem, st, kind="Startup", record=record),
        )
        gate = first.succeeded
        loops.append(("startup", first))
    for kind, probe in (("Readiness", readiness), ("Liveness", liveness)):
        if probe:
            on_result = _on_result(mem, st, kind=kind, record=record)
            loop = ProbeLoop(probe=probe, attempt=attempt(probe), on_result=on_result, after=gate)
            loops.append((kind.lower(), loop))
    for kind, loop in loops:
        st.probes.append(
            asyncio.create_task(
                loop.run(), name=f"{kind} probe {mem.namespace}/{mem.name}/{st.name}"
            )
        )
