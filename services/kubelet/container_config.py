"""How one container of a pod spec is flattened for the runtime: ``container_config``.

Why a module of its own: the runtime knows nothing of pods; it gets a ``ContainerConfig`` with
the command, the environment already resolved (``value`` and the downward API's
``valueFrom.fieldRef``), ports and the memory limit. That translation is the kubelet's
``kuberuntime_container.go`` ``generateContainerConfig`` and is pure.

What it owns: the ``fieldRef`` paths Kubernetes serves for environment variables
(``metadata.name|namespace|uid``, labels and annotations by key, ``spec.nodeName``,
``spec.serviceAccountName``, ``status.podIP(s)``, ``status.hostIP(s)``).

What it does not guarantee: ``resourceFieldRef``, ``configMapKeyRef`` and ``secretKeyRef`` read
as empty strings; ``envFrom`` is ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.quantity import to_bytes
from services.kubelet.runtime.base import ContainerConfig

__all__ = ["container_config"]


def _field_ref(pod: Mapping[str, Any], path: str, *, pod_ip: str, host_ip: str) -> str:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
        "status.hostIP": host_ip,
        "status.hostIPs": host_ip,
    }
    if path in simple:
        return str(simple[path] or "")
    for prefix, source in (("metadata.labels", "labels"), ("metadata.annotations", "annotations")):
        if path.startswith(prefix + "['") and path.endswith("']"):
            return str((meta.get(source) or {}).get(path[len(prefix) + 2 : -2], ""))
    return ""


def container_config(
    pod: Mapping[str, Any], spec: Mapping[str, Any], *, attempt: int, pod_ip: str, host_ip: str
) -> ContainerConfig:
    """Flatten one container of the pod spec for the runtime."""
    env: dict[str, str] = {}
    for var in spec.get("env") or []:
        if "value" in var and var["value"] is not None:
            env[var["name"]] = str(var["value"])
        elif (var.get("valueFrom") or {}).get("fieldRef"):
            path = var["valueFrom"]["fieldRef"].get("fieldPath", "")
            env[var["name"]] = _field_ref(pod, path, pod_ip=pod_ip, host_ip=host_ip)
        else:
            env[var["name"]] = ""
    limit = ((spec.get("resources") or {}).get("limits") or {}).get("memory")
    return ContainerConfig(
        name=spec["name"],
        image=spec.get("image") or "",
        command=tuple(spec.get("command") or ()),
        args=tuple(spec.get("args") or ()),
        env=env,
        working_dir=spec.get("workingDir"),
        ports=tuple(
            int(p["containerPort"]) for p in spec.get("ports") or [] if p.get("containerPort")
        ),
        memory_limit_bytes=to_bytes(limit) if limit else None,
        attempt=attempt,
    )
