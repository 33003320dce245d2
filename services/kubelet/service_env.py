"""Service environment variables: how a container found Services before cluster DNS.

Why a module of its own: the kubelet gives every container variables for the Services that
exist when it starts (``getServiceEnvVarMap`` and ``pkg/kubelet/envvars.FromServices``), and
programs still read them (``KUBERNETES_SERVICE_HOST`` above all: in-cluster clients find the
apiserver with it). The rules:

* the Services of the pod's namespace, when ``enableServiceLinks`` is true (the default), and
  always the ``kubernetes`` Service of ``default``; a Service without a ClusterIP (headless,
  ExternalName, not yet allocated) gives none;
* for a Service ``my-svc`` (name upper-cased, ``-`` -> ``_``): ``MY_SVC_SERVICE_HOST`` (the
  ClusterIP), ``MY_SVC_SERVICE_PORT`` (the first port), ``MY_SVC_SERVICE_PORT_<NAME>`` per
  named port, and Docker's link variables: ``MY_SVC_PORT=tcp://ip:port`` (the first port)
  and, per port, ``MY_SVC_PORT_<port>_<PROTO>`` with ``_PROTO``, ``_PORT``, ``_ADDR``.

They are the lowest layer of the environment: ``env`` and ``envFrom`` override them, and
``$(VAR)`` references may use them.

What it owns: ``service_env`` (pure, over the Services the kubelet's informer holds).

What it does not guarantee: the variables are fixed when the container starts — a Service made
later is not seen until the container restarts, as in Kubernetes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MASTER_SERVICES", "service_env"]

MASTER_SERVICES = ("kubernetes",)
"""Services of ``default`` every pod sees, whatever its ``enableServiceLinks``."""


def _env_name(name: str) -> str:
    return name.replace("-", "_").upper()


def _cluster_ip(service: Mapping[str, Any]) -> str:
    ip = str((service.get("spec") or {}).get("clusterIP") or "")
    return "" if ip == "None" else ip


def _join(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def _variables(service: Mapping[str, Any]) -> dict[str, str]:
    """``FromServices`` for one Service with a ClusterIP and at least one port."""
    spec = service.get("spec") or {}
    prefix = _env_name(str((service.get("metadata") or {}).get("name") or ""))
    ip = _cluster_ip(service)
    ports = list(spec.get("ports") or ())
    env = {
        f"{prefix}_SERVICE_HOST": ip,
        f"{prefix}_SERVICE_PORT": str(ports[0].get("port")),
    }
    for p in ports:
        if p.get("name"):
            env[f"{prefix}_SERVICE_PORT_{_env_name(str(p['name']))}"] = str(p.get("port"))
    for i, p in enumerate(ports):
        proto = str(p.get("protocol") or "TCP")
        url = f"{proto.lower()}://{_join(ip, int(p.get('port') or 0))}"
        if i == 0:
            env[f"{prefix}_PORT"] = url
        link = f"{prefix}_PORT_{p.get('port')}_{proto.upper()}"
        env[link] = url
        env[f"{link}_PROTO"] = proto.lower()
        env[f"{link}_PORT"] = str(p.get("port"))
        env[f"{link}_ADDR"] = ip
    return env


def service_env(
    services: Iterable[Mapping[str, Any]], *, namespace: str, enable_service_links: bool
) -> dict[str, str]:
    """The variables a container of a pod in ``namespace`` gets from ``services``."""
    chosen: dict[str, Mapping[str, Any]] = {}
    for service in services:
        if not _cluster_ip(service) or not (service.get("spec") or {}).get("ports"):
            continue
        meta = service.get("metadata") or {}
        name, ns = str(meta.get("name") or ""), meta.get("namespace")
        if ns == "default" and name in MASTER_SERVICES:
            chosen.setdefault(name, service)
        elif ns == namespace and enable_service_links:
            chosen[name] = service
    env: dict[str, str] = {}
    for service in chosen.values():
        env.update(_variables(service))
    return env
