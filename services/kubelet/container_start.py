"""Starting one container: pull (with back-off), create, start, watch for its exit.

Why a module of its own: a start is where users read what went wrong — the events Pulling,
Pulled ("already present on machine"), Created, Started, Failed; the waiting reasons
``ErrImagePull`` then ``ImagePullBackOff``; ``CreateContainerConfigError`` when the env names a
ConfigMap, Secret or key that does not exist (event Failed "Error: configmap "x" not found");
``StartError`` for a command that cannot start — so the sequence and its messages live together,
as in ``kuberuntime_container.go`` ``startContainer``.

What it owns: ``start_container`` (the pull back-off gate, the pull by ``imagePullPolicy``, the
container's config — env resolved from the objects the pod's sync read and the Services the
kubelet's informer holds, mounts from its volumes
— the runtime call, the probes of the new instance) and ``watch_exit`` (one named task per
container that wakes the worker when the current instance exits).

What it does not guarantee: a pull is not shared between pods of the node; a pull back-off is
per container, not per image.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from client.backoff import Backoff
from services.kubelet.container_config import container_config
from services.kubelet.container_env import ContainerConfigError, container_env
from services.kubelet.container_probes import start_probes
from services.kubelet.pod_memory import ContainerState, PodMemory
from services.kubelet.restart_backoff import ERR_IMAGE_PULL_SHOWN, PULL_BACKOFF, go_duration
from services.kubelet.runtime.base import (
    ContainerConfig,
    ContainerRecord,
    ContainerStartError,
    ImagePullError,
    ImageRef,
)
from services.kubelet.runtime.images import default_pull_policy
from services.kubelet.service_env import service_env
from services.kubelet.volumes import container_mounts

__all__ = ["start_container", "watch_exit"]


def watch_exit(mem: PodMemory, record: ContainerRecord) -> None:
    """Wake the worker when ``record`` exits (replacing the watch of its container's last one)."""

    async def watch() -> None:
        await mem.ctx.runtime.wait_container(record.container_id)
        st = mem.container(record.name)
        if st is not None and st.current is record:
            st.stop_probes()
        mem.wake.set()

    old = mem.exit_watches.pop(record.name, None)
    if old is not None:
        old.cancel()
    mem.exit_watches[record.name] = asyncio.create_task(
        watch(), name=f"exit watch {mem.namespace}/{mem.name}/{record.name}"
    )


def _pull_backing_off(
    mem: PodMemory, st: ContainerState, *, image_name: str, deadlines: list[float]
) -> bool:
    """While the pull back-off runs: say ``ImagePullBackOff`` (after ``ErrImagePull`` showed for
    a moment) and note when to try again. False once a pull may be tried."""
    now = asyncio.get_running_loop().time()
    if now >= st.pull_not_before:
        return False
    assert st.pull_failed_at is not None
    if now - st.pull_failed_at >= ERR_IMAGE_PULL_SHOWN or st.waiting is None:
        if st.waiting is None or st.waiting[0] != "ImagePullBackOff":
            mem.event("Normal", "BackOff", f'Back-off pulling image "{image_name}"')
            mem.event("Warning", "Failed", "Error: ImagePullBackOff")
        st.waiting = ("ImagePullBackOff", f'Back-off pulling image "{image_name}"')
        deadlines.append(st.pull_not_before)
    else:
        deadlines.append(st.pull_failed_at + ERR_IMAGE_PULL_SHOWN)
    return True


def _pull_failed(
    mem: PodMemory, st: ContainerState, exc: ImagePullError, *, image_name: str
) -> float:
    """Report a failed pull and arm its back-off; the loop time to look again."""
    now = asyncio.get_running_loop().time()
    if exc.reason == "ErrImageNeverPull":
        mem.event("Warning", "ErrImageNeverPull", exc.message)
    else:
        mem.event("Normal", "Pulling", f'Pulling image "{image_name}"')
        mem.event("Warning", "Failed", f'Failed to pull image "{image_name}": {exc.message}')
    mem.event("Warning", "Failed", f"Error: {exc.reason}")
    if st.pull_backoff is None:
        st.pull_backoff = Backoff(PULL_BACKOFF)
    st.pull_not_before = now + st.pull_backoff.next_delay()
    st.pull_failed_at = now
    st.waiting = (exc.reason, exc.message)
    return now + ERR_IMAGE_PULL_SHOWN


async def _pull(
    mem: PodMemory, st: ContainerState, *, spec: Mapping[str, Any], deadlines: list[float]
) -> ImageRef | None:
    image_name = spec.get("image") or ""
    policy = spec.get("imagePullPolicy") or default_pull_policy(image_name)
    started = time.monotonic()
    try:
        image, present = await mem.ctx.runtime.pull_image(image_name, policy=policy)
    except ImagePullError as exc:
        deadlines.append(_pull_failed(mem, st, exc, image_name=image_name))
        return None
    st.pull_backoff = None
    st.pull_not_before = 0.0
    st.pull_failed_at = None
    if present:
        mem.event("Normal", "Pulled", f'Container image "{image_name}" already present on machine')
    else:
        took = go_duration(time.monotonic() - started, precise=True)
        mem.event("Normal", "Pulling", f'Pulling image "{image_name}"')
        mem.event(
            "Normal",
            "Pulled",
            f'Successfully pulled image "{image_name}" in {took} ({took} including waiting). '
            f"Image size: {image.size_bytes} bytes.",
        )
    return image


def _service_variables(mem: PodMemory) -> dict[str, str]:
    """The Service variables of ``mem``'s containers; until the Services informer has listed
    once, ``ContainerConfigError`` (the kubelet refuses to start a container without them)."""
    services = mem.ctx.services
    if services is None:
        return {}
    if not services.has_synced:
        raise ContainerConfigError(
            "services have not yet been read at least once, cannot construct envvars"
        )
    links = (mem.pod.get("spec") or {}).get("enableServiceLinks")
    return service_env(
        services.list(), namespace=mem.namespace, enable_service_links=links is not False
    )


def _config(
    mem: PodMemory, spec: Mapping[str, Any], *, attempt: int
) -> tuple[ContainerConfig, tuple[str, ...]]:
    """The config to start ``spec`` with now, and the env warnings to report; raises
    ``ContainerConfigError`` when a reference it needs is missing."""
    assert mem.pod_ip is not None
    env = container_env(
        mem.pod,
        spec,
        objects=mem.objects,
        pod_ip=mem.pod_ip,
        host_ip=mem.ctx.host_ip,
        allocatable=mem.ctx.volumes.allocatable,
        services=_service_variables(mem),
    )
    mounts = container_mounts(spec, volumes=mem.volumes, env=env.values)
    return container_config(spec, attempt=attempt, env=env.values, mounts=mounts), env.warnings


async def start_container(
    mem: PodMemory,
    st: ContainerState,
    *,
    spec: Mapping[str, Any],
    attempt: int,
    deadlines: list[float],
) -> None:
    """Pull and start a new instance of ``st``; back-off deadlines are added to ``deadlines``."""
    image_name = spec.get("image") or ""
    if _pull_backing_off(mem, st, image_name=image_name, deadlines=deadlines):
        return
    image = await _pull(mem, st, spec=spec, deadlines=deadlines)
    if image is None:
        return
    try:
        config, warnings = _config(mem, spec, attempt=attempt)
    except ContainerConfigError as exc:
        mem.event("Warning", "Failed", f"Error: {exc.message}")
        st.waiting = ("CreateContainerConfigError", exc.message)
        deadlines.append(mem.retry_references_at())
        return
    for warning in warnings:
        mem.event("Warning", "InvalidEnvironmentVariableNames", warning)
    mem.event("Normal", "Created", f"Created container: {st.name}")
    try:
        record = await mem.ctx.runtime.start_container(mem.sandbox, config, image=image)
    except ContainerStartError as exc:
        mem.event("Warning", "Failed", f"Error: {exc.message}")
        st.instances.append(exc.record)
        st.waiting = None
        return
    mem.event("Normal", "Started", f"Started container {st.name}")
    st.instances.append(record)
    st.waiting = None
    watch_exit(mem, record)
    start_probes(mem, st, spec=spec, record=record)
    # never silently unsandboxed: one Warning per pod (the recorder aggregates the repeats)
    if reason := mem.ctx.runtime.sandbox_unavailable_reason:
        mem.event("Warning", "Unsandboxed", f"containers run as plain host processes: {reason}")
