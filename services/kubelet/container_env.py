"""A container's environment, resolved from its spec and the objects it references.

Why a module of its own: this is the kubelet's ``makeEnvironmentVariables`` — the rules users
debug with ``kubectl describe pod`` when a container will not start:

* ``envFrom`` first, in order (``configMapRef``/``secretRef``, each key with ``prefix``), then
  ``env`` (later names win, so ``env`` overrides ``envFrom``);
* a key that is not a valid variable name (``IsEnvVarName``) is skipped and reported as an
  ``InvalidEnvironmentVariableNames`` warning ("Keys [1x] from the EnvFrom configMap default/cm
  were skipped since they are considered invalid environment variable names.");
* ``valueFrom``: ``configMapKeyRef``, ``secretKeyRef`` (Secret values base64-decoded),
  ``fieldRef`` and ``resourceFieldRef`` (``downward_api.py``);
* a missing object or key fails the container with ``ContainerConfigError`` carrying
  Kubernetes' message — ``configmap "x" not found``, ``couldn't find key k in ConfigMap
  default/x``, ``secret "s" not found`` — unless the reference is ``optional``, when the
  variable (or the whole ``envFrom`` source) is left out.

Service variables (``service_env.py``) come first, so ``envFrom`` and ``env`` override them.
``$(VAR)`` references inside values are expanded by the runtime, over this result.

What it owns: ``env_references`` (which objects a container's env reads) and
``container_env`` (pure over a snapshot of those objects, fetched by the pod's sync).

What it does not guarantee: ``fileKeyRef`` is not served (the variable reads empty).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.kubelet.downward_api import DownwardAPIError, field_value, resource_value
from services.kubelet.object_cache import ObjectRef

__all__ = [
    "ContainerConfigError",
    "ContainerEnv",
    "Objects",
    "container_env",
    "env_references",
    "secret_data",
]

Obj = dict[str, Any]
Objects = Mapping[ObjectRef, Obj | None]
"""A snapshot of referenced objects (None: not found)."""

_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
"""``validation.IsEnvVarName``."""
_KINDS = {"configmaps": ("configMap", "ConfigMap"), "secrets": ("secret", "Secret")}
"""How the kubelet names each kind in its messages: (lower, Title)."""


class ContainerConfigError(Exception):
    """The container cannot be configured; ``message`` is what ``CreateContainerConfigError``
    shows."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class ContainerEnv:
    values: dict[str, str]
    warnings: tuple[str, ...] = ()
    """``InvalidEnvironmentVariableNames`` messages, one per ``envFrom`` source with skipped keys."""


def secret_data(secret: Mapping[str, Any]) -> dict[str, bytes]:
    """A Secret's ``data``, decoded (the wire carries base64)."""
    out = {}
    for key, value in (secret.get("data") or {}).items():
        try:
            out[key] = base64.b64decode(value or "", validate=True)
        except (binascii.Error, ValueError):
            out[key] = str(value).encode()
    return out


def _data(obj: Mapping[str, Any], resource: str) -> dict[str, str]:
    if resource == "secrets":
        return {k: v.decode(errors="replace") for k, v in secret_data(obj).items()}
    return {k: str(v) for k, v in (obj.get("data") or {}).items()}


def env_references(pod: Mapping[str, Any], container: Mapping[str, Any]) -> set[ObjectRef]:
    """The ConfigMaps and Secrets a container's ``env``/``envFrom`` read."""
    ns = str((pod.get("metadata") or {}).get("namespace") or "default")
    refs = set()
    for source in container.get("envFrom") or ():
        for field, resource in (("configMapRef", "configmaps"), ("secretRef", "secrets")):
            if (source.get(field) or {}).get("name"):
                refs.add(ObjectRef(resource, ns, source[field]["name"]))
    for var in container.get("env") or ():
        value_from = var.get("valueFrom") or {}
        for field, resource in (("configMapKeyRef", "configmaps"), ("secretKeyRef", "secrets")):
            if (value_from.get(field) or {}).get("name"):
                refs.add(ObjectRef(resource, ns, value_from[field]["name"]))
    return refs


def _referenced(objects: Objects, ref: ObjectRef, *, optional: bool) -> Mapping[str, Any] | None:
    """The object; None when it is missing and optional; ``ContainerConfigError`` otherwise."""
    obj = objects.get(ref)
    if obj is None and not optional:
        raise ContainerConfigError(f'{_KINDS[ref.resource][0].lower()} "{ref.name}" not found')
    return obj


def _env_from(
    container: Mapping[str, Any], *, ns: str, objects: Objects, env: dict[str, str]
) -> list[str]:
    warnings = []
    for source in container.get("envFrom") or ():
        prefix = str(source.get("prefix") or "")
        for field, resource in (("configMapRef", "configmaps"), ("secretRef", "secrets")):
            ref_spec = source.get(field)
            if not ref_spec:
                continue
            ref = ObjectRef(resource, ns, str(ref_spec.get("name") or ""))
            obj = _referenced(objects, ref, optional=bool(ref_spec.get("optional")))
            if obj is None:
                continue
            invalid = []
            for key, value in _data(obj, resource).items():
                name = prefix + key
                if _ENV_NAME.match(name):
                    env[name] = value
                else:
                    invalid.append(name)
            if invalid:
                warnings.append(
                    f"Keys [{', '.join(sorted(invalid))}] from the EnvFrom "
                    f"{_KINDS[resource][0]} {ns}/{ref.name} were skipped since they are "
                    "considered invalid environment variable names."
                )
    return warnings


def _key_ref(value_from: Mapping[str, Any], *, ns: str, objects: Objects) -> str | None:
    """A ``configMapKeyRef``/``secretKeyRef`` value; None when optional and missing."""
    for field, resource in (("configMapKeyRef", "configmaps"), ("secretKeyRef", "secrets")):
        selector = value_from.get(field)
        if not selector:
            continue
        optional = bool(selector.get("optional"))
        ref = ObjectRef(resource, ns, str(selector.get("name") or ""))
        obj = _referenced(objects, ref, optional=optional)
        if obj is None:
            return None
        key = str(selector.get("key") or "")
        data = _data(obj, resource)
        if key not in data:
            if optional:
                return None
            raise ContainerConfigError(
                f"couldn't find key {key} in {_KINDS[resource][1]} {ns}/{ref.name}"
            )
        return data[key]
    return ""


def container_env(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    *,
    objects: Objects,
    pod_ip: str,
    host_ip: str,
    allocatable: Mapping[str, str],
    services: Mapping[str, str] | None = None,
) -> ContainerEnv:
    """The container's environment; ``ContainerConfigError`` when a reference fails.
    ``services``: the Service variables (``service_env``), the layer everything else
    overrides."""
    ns = str((pod.get("metadata") or {}).get("namespace") or "default")
    env: dict[str, str] = dict(services or {})
    warnings = _env_from(container, ns=ns, objects=objects, env=env)
    for var in container.get("env") or ():
        name = var["name"]
        value_from = var.get("valueFrom") or {}
        try:
            if var.get("value") is not None:
                env[name] = str(var["value"])
            elif value_from.get("fieldRef"):
                path = str(value_from["fieldRef"].get("fieldPath") or "")
                env[name] = field_value(pod, path, pod_ip=pod_ip, host_ip=host_ip, env=True)
            elif value_from.get("resourceFieldRef"):
                env[name] = resource_value(
                    pod,
                    value_from["resourceFieldRef"],
                    container=container["name"],
                    allocatable=allocatable,
                )
            else:
                value = _key_ref(value_from, ns=ns, objects=objects)
                if value is not None:
                    env[name] = value
        except DownwardAPIError as exc:
            raise ContainerConfigError(str(exc)) from None
    return ContainerEnv(values=env, warnings=tuple(warnings))
