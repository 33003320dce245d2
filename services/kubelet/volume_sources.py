"""What the files of a configMap, secret, downwardAPI or projected volume should hold.

Why a module of its own: these four volume kinds are *projections* of API objects into files,
written by the atomic writer (``atomic_writer.py``). Deciding their content is pure and carries
all of Kubernetes' rules, as ``pkg/volume/configmap``, ``secret``, ``downwardapi`` and
``projected`` do in their ``MakePayload``/``CollectData``:

* without ``items`` every key becomes a file (ConfigMap ``data`` and ``binaryData``, Secret
  ``data`` decoded); with ``items`` only those keys, at their ``path``, with their ``mode``;
* files get ``mode``, else the volume's ``defaultMode``, else 0644;
* a missing object fails the volume (``configmap "x" not found``, ``secret "s" not found``)
  unless ``optional``, when it is empty; a missing item key fails it too ("configmap references
  non-existent config key: k", "references non-existent secret key: k") unless ``optional``;
* downwardAPI files hold ``fieldRef`` / ``resourceFieldRef`` values (``downward_api.py``);
* projected merges its sources (configMap, secret, downwardAPI, serviceAccountToken) under one
  ``defaultMode``; errors of several sources are reported together, ``[a, b]``, as an
  aggregate. A token source's file holds the token the caller fetched for it (``tokens``, by
  the source's index; ``token_manager.py`` fetches them) and is left out when none was.

What it owns: ``volume_references`` (objects a volume reads), ``payload`` and ``VolumeError``.

What it does not guarantee: projected ``clusterTrustBundle`` and ``podCertificate`` sources
are skipped; a token file gets the volume's mode (the kubelet's 0600 under ``fsGroup`` is not
applied).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from services.kubelet.atomic_writer import FileProjection
from services.kubelet.container_env import Objects, secret_data
from services.kubelet.downward_api import DownwardAPIError, field_value, resource_value
from services.kubelet.object_cache import ObjectRef

__all__ = ["DEFAULT_MODE", "VolumeError", "payload", "projection_kind", "volume_references"]

DEFAULT_MODE = 0o644
"""``ConfigMapVolumeSourceDefaultMode`` = ``SecretVolumeSourceDefaultMode`` = ... = 0644."""
PROJECTIONS = ("configMap", "secret", "downwardAPI", "projected")
"""Volume kinds whose files are API data, written atomically and always mounted read-only."""


class VolumeError(Exception):
    """The volume cannot be set up; ``str()`` is Kubernetes' ``MountVolume.SetUp`` cause."""


def projection_kind(volume: Mapping[str, Any]) -> str | None:
    """``configMap``, ``secret``, ``downwardAPI`` or ``projected``; None for other kinds."""
    return next((kind for kind in PROJECTIONS if volume.get(kind) is not None), None)


def _namespace(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("namespace") or "default")


def volume_references(pod: Mapping[str, Any], volume: Mapping[str, Any]) -> set[ObjectRef]:
    """The ConfigMaps, Secrets and PVCs one volume reads (a PVC's PV is found through it)."""
    ns = _namespace(pod)
    sources: list[tuple[str, Mapping[str, Any]]] = []
    if volume.get("configMap") is not None:
        sources.append(("configMap", volume["configMap"]))
    if volume.get("secret") is not None:
        sources.append(("secret", volume["secret"]))
    for source in (volume.get("projected") or {}).get("sources") or ():
        sources.extend((k, v) for k, v in source.items() if k in ("configMap", "secret") and v)
    refs = set()
    for kind, src in sources:
        name = (
            src.get("secretName") if kind == "secret" and "secretName" in src else src.get("name")
        )
        if name:
            refs.add(ObjectRef("configmaps" if kind == "configMap" else "secrets", ns, str(name)))
    claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
    if claim:
        refs.add(ObjectRef("persistentvolumeclaims", ns, str(claim)))
    return refs


def _config_map_data(cm: Mapping[str, Any]) -> dict[str, bytes]:
    data = {k: str(v).encode() for k, v in (cm.get("data") or {}).items()}
    for key, value in (cm.get("binaryData") or {}).items():
        try:
            data[key] = base64.b64decode(value or "", validate=True)
        except (binascii.Error, ValueError):
            data[key] = str(value).encode()
    return data


def _keys_payload(
    source: Mapping[str, Any],
    *,
    kind: str,
    ns: str,
    objects: Objects,
    default_mode: int,
) -> dict[str, FileProjection]:
    """A configMap or secret source's files."""
    optional = bool(source.get("optional"))
    if kind == "configMap":
        ref = ObjectRef("configmaps", ns, str(source.get("name") or ""))
    else:
        ref = ObjectRef("secrets", ns, str(source.get("secretName") or source.get("name") or ""))
    obj = objects.get(ref)
    if obj is None and not optional:
        raise VolumeError(f'{kind.lower()} "{ref.name}" not found')
    if obj is None:
        data: dict[str, bytes] = {}
    else:
        data = _config_map_data(obj) if kind == "configMap" else secret_data(obj)
    items = source.get("items") or ()
    if not items:
        return {key: FileProjection(value, default_mode) for key, value in data.items()}
    out = {}
    for item in items:
        key = str(item.get("key") or "")
        if key not in data:
            if optional:
                continue
            if kind == "configMap":
                raise VolumeError(f"configmap references non-existent config key: {key}")
            raise VolumeError(f"references non-existent secret key: {key}")
        mode = item.get("mode")
        out[str(item["path"])] = FileProjection(data[key], default_mode if mode is None else mode)
    return out


def _downward_payload(
    pod: Mapping[str, Any],
    source: Mapping[str, Any],
    *,
    default_mode: int,
    allocatable: Mapping[str, str],
) -> dict[str, FileProjection]:
    out = {}
    for item in source.get("items") or ():
        try:
            if item.get("fieldRef"):
                path = str(item["fieldRef"].get("fieldPath") or "")
                value = field_value(pod, path, env=False)
            else:
                ref = item.get("resourceFieldRef") or {}
                value = resource_value(pod, ref, container="", allocatable=allocatable)
        except DownwardAPIError as exc:
            raise VolumeError(str(exc)) from None
        mode = item.get("mode")
        out[str(item["path"])] = FileProjection(
            value.encode(), default_mode if mode is None else mode
        )
    return out


def _projected_payload(
    pod: Mapping[str, Any],
    source: Mapping[str, Any],
    *,
    objects: Objects,
    default_mode: int,
    allocatable: Mapping[str, str],
    tokens: Mapping[int, str],
) -> dict[str, FileProjection]:
    out: dict[str, FileProjection] = {}
    errors: list[str] = []
    for index, projection in enumerate(source.get("sources") or ()):
        token = (projection.get("serviceAccountToken") or {}).get("path")
        if token and index in tokens:
            out[str(token)] = FileProjection(tokens[index].encode(), default_mode)
            continue
        try:
            if projection.get("configMap") is not None or projection.get("secret") is not None:
                kind = "configMap" if projection.get("configMap") is not None else "secret"
                out.update(
                    _keys_payload(
                        projection[kind],
                        kind=kind,
                        ns=_namespace(pod),
                        objects=objects,
                        default_mode=default_mode,
                    )
                )
            elif projection.get("downwardAPI") is not None:
                out.update(
                    _downward_payload(
                        pod,
                        projection["downwardAPI"],
                        default_mode=default_mode,
                        allocatable=allocatable,
                    )
                )
        except VolumeError as exc:
            errors.append(str(exc))
    if errors:
        raise VolumeError(errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]")
    return out


def payload(
    pod: Mapping[str, Any],
    volume: Mapping[str, Any],
    *,
    objects: Objects,
    allocatable: Mapping[str, str],
    tokens: Mapping[int, str] | None = None,
) -> dict[str, FileProjection]:
    """The files of a projection volume (``projection_kind`` not None); ``VolumeError`` else.
    ``tokens``: a projected volume's service-account tokens, by the index of their source."""
    kind = projection_kind(volume)
    if kind is None:
        raise VolumeError(f"volume {volume.get('name')} is not a projection")
    source = volume[kind]
    mode = source.get("defaultMode")
    default_mode = DEFAULT_MODE if mode is None else int(mode)
    if kind in ("configMap", "secret"):
        return _keys_payload(
            source, kind=kind, ns=_namespace(pod), objects=objects, default_mode=default_mode
        )
    if kind == "downwardAPI":
        return _downward_payload(pod, source, default_mode=default_mode, allocatable=allocatable)
    return _projected_payload(
        pod,
        source,
        objects=objects,
        default_mode=default_mode,
        allocatable=allocatable,
        tokens=tokens or {},
    )
