"""The downward API: what a pod may read about itself, as env values and as volume files.

Why a module of its own: environment variables (``valueFrom.fieldRef`` / ``resourceFieldRef``)
and ``downwardAPI`` volume files (and ``projected`` downwardAPI sources) expose the same facts
with the same rules, as the kubelet's ``pkg/api/v1/resource`` and ``pkg/fieldpath`` do. Pure
functions over the pod object; no I/O.

What it owns:

* ``field_value``: ``metadata.name|namespace|uid``, ``metadata.labels['k']`` and
  ``metadata.annotations['k']``, the whole ``metadata.labels`` / ``metadata.annotations`` as
  ``k="v"`` lines (volumes only, sorted, as ``fieldpath.FormatMap``), and for env also
  ``spec.nodeName``, ``spec.serviceAccountName``, ``status.podIP(s)``, ``status.hostIP(s)``;
* ``resource_value``: ``limits|requests.cpu|memory|ephemeral-storage`` divided by ``divisor``
  (default 1) and **rounded up** (cpu in millicores first, as ``MilliValue`` does); a missing
  limit reads as the node's allocatable amount (the kubelet's
  ``defaultPodLimitsForDownwardAPI``); a missing request reads as the limit the apiserver
  would have defaulted it to, else 0.

What it does not guarantee: hugepages resources are not served; ``status.podIP`` in a volume
is refused (as Kubernetes' validation refuses it).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from api.quantity import parse_quantity

__all__ = ["DownwardAPIError", "field_value", "resource_value"]

_VOLUME_FIELDS = ("metadata.name", "metadata.namespace", "metadata.uid")
_RESOURCES = ("cpu", "memory", "ephemeral-storage")


class DownwardAPIError(Exception):
    """A field or resource the downward API does not serve; ``str()`` is Kubernetes' message."""


def _format_map(values: Mapping[str, Any]) -> str:
    """``fieldpath.FormatMap``: ``key="value"`` lines in key order (Go's %q, JSON-quoted here)."""
    return "\n".join(f"{k}={json.dumps(str(values[k]))}" for k in sorted(values))


def field_value(
    pod: Mapping[str, Any], path: str, *, pod_ip: str = "", host_ip: str = "", env: bool
) -> str:
    """The value of ``fieldRef.fieldPath`` for this pod (``env``: as an environment variable)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    for prefix, source in (("metadata.labels", "labels"), ("metadata.annotations", "annotations")):
        if path.startswith(prefix + "['") and path.endswith("']"):
            return str((meta.get(source) or {}).get(path[len(prefix) + 2 : -2], ""))
        if path == prefix and not env:
            return _format_map(meta.get(source) or {})
    if path in _VOLUME_FIELDS:
        return str(meta.get(path.split(".", 1)[1]) or "")
    if env:
        simple = {
            "spec.nodeName": spec.get("nodeName"),
            "spec.serviceAccountName": spec.get("serviceAccountName"),
            "status.podIP": pod_ip,
            "status.podIPs": pod_ip,
            "status.hostIP": host_ip,
            "status.hostIPs": host_ip,
        }
        if path in simple:
            return str(simple[path] or "")
    raise DownwardAPIError(f"unsupported fieldPath: {path}")


def _amount(container: Mapping[str, Any], resource: str, allocatable: Mapping[str, str]) -> str:
    kind, _, name = resource.partition(".")
    resources = container.get("resources") or {}
    limits = resources.get("limits") or {}
    if kind == "limits":
        return str(limits.get(name) or allocatable.get(name) or 0)
    return str((resources.get("requests") or {}).get(name) or limits.get(name) or 0)


def resource_value(
    pod: Mapping[str, Any],
    ref: Mapping[str, Any],
    *,
    container: str,
    allocatable: Mapping[str, str],
) -> str:
    """``resourceFieldRef`` of ``ref["containerName"]`` (else ``container``), as a string."""
    resource = str(ref.get("resource") or "")
    kind, _, name = resource.partition(".")
    if kind not in ("limits", "requests") or name not in _RESOURCES:
        raise DownwardAPIError(f"unsupported container resource : {resource}")
    wanted = ref.get("containerName") or container
    spec = pod.get("spec") or {}
    found = [
        c
        for c in (*(spec.get("containers") or ()), *(spec.get("initContainers") or ()))
        if c.get("name") == wanted
    ]
    if not found:
        raise DownwardAPIError(f"container {wanted} not found")
    value = parse_quantity(_amount(found[0], resource, allocatable))
    divisor = parse_quantity(str(ref.get("divisor") or "1")) or Fraction(1)
    if name == "cpu":
        return str(math.ceil(Fraction(math.ceil(value * 1000)) / math.ceil(divisor * 1000)))
    return str(math.ceil(Fraction(math.ceil(value)) / math.ceil(divisor)))
