"""How one container of a pod spec is flattened for the runtime: ``container_config``.

Why a module of its own: the runtime knows nothing of pods; it gets a ``ContainerConfig`` with
the command, the environment already resolved, ports, the memory limit and the volume mounts
resolved to paths on the node. That translation is the kubelet's ``kuberuntime_container.go``
``generateContainerConfig`` and is pure.

What it owns: the flattening itself. The environment comes from ``container_env.py`` (``env``,
``envFrom``, ``valueFrom`` of every kind, with Kubernetes' errors for missing references); the
mounts from ``volumes.py`` (``container_mounts``).

What it does not guarantee: ``resources.limits.cpu`` is not passed on (nothing enforces it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.quantity import to_bytes
from services.kubelet.runtime.base import ContainerConfig, Mount

__all__ = ["container_config"]


def container_config(
    spec: Mapping[str, Any],
    *,
    attempt: int,
    env: Mapping[str, str],
    mounts: tuple[Mount, ...] = (),
) -> ContainerConfig:
    """Flatten one container of the pod spec for the runtime, with its resolved env and mounts."""
    limit = ((spec.get("resources") or {}).get("limits") or {}).get("memory")
    return ContainerConfig(
        name=spec["name"],
        image=spec.get("image") or "",
        command=tuple(spec.get("command") or ()),
        args=tuple(spec.get("args") or ()),
        env=dict(env),
        working_dir=spec.get("workingDir"),
        ports=tuple(
            int(p["containerPort"]) for p in spec.get("ports") or [] if p.get("containerPort")
        ),
        memory_limit_bytes=to_bytes(limit) if limit else None,
        mounts=mounts,
        attempt=attempt,
    )
