"""A pod's volumes on the node: set up before its containers start, torn down when it goes.

Why: this is the kubelet's volume manager (``WaitForAttachAndMount`` and the volume plugins'
``SetUp``/``TearDown``) cut down to what one node without attachable disks needs. Each volume
of the pod spec becomes a directory on the node, and each ``volumeMount`` a ``runtime.Mount``
of that directory (plus ``subPath``) at the container's ``mountPath``, which the runtime's
sandbox bind-mounts. Layout, as Kubernetes' ``/var/lib/kubelet``::

    <state-dir>/pods/<uid>/volumes/kubernetes.io~empty-dir/<name>     emptyDir (0777)
    <state-dir>/pods/<uid>/volumes/kubernetes.io~configmap/<name>     atomic-writer dirs
    <state-dir>/pods/<uid>/volumes/kubernetes.io~secret/<name>        (``atomic_writer.py``)
    <state-dir>/pods/<uid>/volumes/kubernetes.io~downward-api/<name>
    <state-dir>/pods/<uid>/volumes/kubernetes.io~projected/<name>

* **emptyDir**: a directory; ``medium: Memory`` mounts a tmpfs on it (``mount -t tmpfs -o
  size=<bytes>``: ``sizeLimit``, else the pod's memory limit, else the node's allocatable memory,
  whichever is smallest, as ``calculateEmptyDirMemorySize``). A ``sizeLimit`` is enforced by
  eviction: ``emptydir_over_limit`` measures usage (allocated blocks, as ``du``) and names the
  first volume over its limit with Kubernetes' message.
* **hostPath**: the host's path, after its ``type`` check ("", ``DirectoryOrCreate`` (made 0755),
  ``Directory``, ``FileOrCreate`` (made 0644), ``File``, ``Socket``, ``CharDevice``,
  ``BlockDevice``) with Kubernetes' messages ("hostPath type check failed: /x is not a
  directory").
* **configMap, secret, downwardAPI, projected**: their files (``volume_sources.py``) written by
  the atomic writer on every set-up, which writes only when something changed — that is how a
  changed ConfigMap reaches a running pod: its watch wakes the pod, whose sync sets up again.
  A projected ``serviceAccountToken`` source's token comes from the ``TokenSource`` (the
  node's token manager), which renews it when due. Always mounted read-only.
* **persistentVolumeClaim**: the claim must exist and be Bound; its PV's ``hostPath`` (with its
  type check: the local-path provisioner's ``DirectoryOrCreate`` creates it) or ``local.path``
  is the directory. ``readOnly`` on the claim makes every mount of it read-only.

What it owns: ``VolumeHost`` (where volumes live, or nowhere), ``TokenSource``, ``pod_references``,
``set_up``, ``container_mounts``, ``tear_down`` and ``emptydir_over_limit``.

What it does not guarantee: with no ``VolumeHost.root`` (the sim runtime) nothing is written:
references are still resolved and their errors reported, no tokens are requested, hostPath and
emptyDir are not touched, and no mounts are passed to the runtime. Volume types other than the above fail with
FailedMount. ``fsGroup``, SELinux labels and mount propagation are not applied.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from api.quantity import canonical_quantity, parse_quantity
from services.kubelet.atomic_writer import PayloadError, write_payload
from services.kubelet.container_env import Objects, env_references
from services.kubelet.object_cache import ObjectRef
from services.kubelet.runtime.base import Mount
from services.kubelet.runtime.process import expand_vars
from services.kubelet.volume_sources import (
    VolumeError,
    payload,
    projection_kind,
    volume_references,
)

__all__ = [
    "MountedVolume",
    "TokenSource",
    "VolumeHost",
    "container_mounts",
    "emptydir_over_limit",
    "pod_references",
    "pv_references",
    "set_up",
    "tear_down",
]

log = logging.getLogger("kubelet.volumes")

PLUGIN_DIRS = {
    "emptyDir": "kubernetes.io~empty-dir",
    "configMap": "kubernetes.io~configmap",
    "secret": "kubernetes.io~secret",
    "downwardAPI": "kubernetes.io~downward-api",
    "projected": "kubernetes.io~projected",
}
"""The plugin directory of each volume kind the kubelet keeps under the pod."""
_MOUNT_TIMEOUT = 30.0
"""Seconds a ``mount``/``umount`` of a tmpfs may take before it counts as failed."""


@dataclass(frozen=True, slots=True)
class VolumeHost:
    """Where a node keeps its pods' volumes."""

    root: Path | None
    """The kubelet's ``--state-dir``; None: volumes are resolved but nothing is written."""
    allocatable: Mapping[str, str]
    """The node's allocatable ``cpu``/``memory``: the downward API's defaults, tmpfs sizes."""

    def volume_dir(self, uid: str, kind: str, name: str) -> Path:
        assert self.root is not None
        return self.root / "pods" / uid / "volumes" / PLUGIN_DIRS[kind] / name


class TokenSource(Protocol):
    """Where a projected volume's service-account tokens come from (``TokenManager``)."""

    async def token(self, pod: Mapping[str, Any], projection: Mapping[str, Any]) -> str:
        """A valid token for the ``serviceAccountToken`` source ``projection``; raises a
        ``VolumeError`` (its text the FailedMount cause) when there is none."""
        ...


@dataclass(frozen=True, slots=True)
class MountedVolume:
    path: Path
    read_only: bool = False


def _containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = pod.get("spec") or {}
    return [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]


def pod_references(pod: Mapping[str, Any]) -> set[ObjectRef]:
    """Every ConfigMap, Secret and PVC the pod's volumes and env read."""
    refs: set[ObjectRef] = set()
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        refs |= volume_references(pod, volume)
    for container in _containers(pod):
        refs |= env_references(pod, container)
    return refs


def pv_references(objects: Objects) -> set[ObjectRef]:
    """The PVs that the (bound) claims in ``objects`` name."""
    return {
        ObjectRef("persistentvolumes", "", str(claim["spec"]["volumeName"]))
        for ref, claim in objects.items()
        if ref.resource == "persistentvolumeclaims"
        and claim is not None
        and (claim.get("spec") or {}).get("volumeName")
    }


# -- hostPath ----------------------------------------------------------------------------------

_TYPE_CHECKS = {
    "Directory": (stat.S_ISDIR, "is not a directory"),
    "File": (stat.S_ISREG, "is not a file"),
    "Socket": (stat.S_ISSOCK, "is not a socket file"),
    "CharDevice": (stat.S_ISCHR, "is not a character device"),
    "BlockDevice": (stat.S_ISBLK, "is not a block device"),
}


def _check_host_path(path: str, type_: str) -> None:
    """``hostPathTypeChecker``: create what ``*OrCreate`` asks for, then check the type."""
    if type_ == "":
        return
    p = Path(path)
    if type_ == "DirectoryOrCreate" and not p.exists():
        p.mkdir(mode=0o755, parents=True, exist_ok=True)
        return
    if type_ == "FileOrCreate" and not p.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.touch(mode=0o644)
        return
    check = _TYPE_CHECKS.get(type_.removesuffix("OrCreate"))
    if check is None:
        raise VolumeError(f"{type_} is an invalid volume type")
    is_type, what = check
    try:
        ok = is_type(p.stat().st_mode)
    except OSError:
        ok = False
    if not ok:
        raise VolumeError(f"hostPath type check failed: {path} {what}")


# -- emptyDir ----------------------------------------------------------------------------------


def _tmpfs_size(pod: Mapping[str, Any], source: Mapping[str, Any], host: VolumeHost) -> int:
    size = math.ceil(parse_quantity(host.allocatable.get("memory") or "0"))
    limits = [
        ((c.get("resources") or {}).get("limits") or {}).get("memory")
        for c in (pod.get("spec") or {}).get("containers") or ()
    ]
    if limits and all(limits):
        pod_limit = sum(math.ceil(parse_quantity(str(m))) for m in limits)
        if 0 < pod_limit <= size or not size:
            size = pod_limit
    if source.get("sizeLimit"):
        wanted = math.ceil(parse_quantity(str(source["sizeLimit"])))
        if 0 < wanted and (wanted <= size or not size):
            size = wanted
    return size


async def _run(*argv: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    async with asyncio.timeout(_MOUNT_TIMEOUT):
        out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise VolumeError(f"{' '.join(argv)} failed: {out.decode(errors='replace').strip()}")


async def _empty_dir(
    pod: Mapping[str, Any], volume: Mapping[str, Any], *, host: VolumeHost, uid: str
) -> Path:
    path = host.volume_dir(uid, "emptyDir", volume["name"])
    path.mkdir(parents=True, exist_ok=True)
    source = volume["emptyDir"]
    if source.get("medium") == "Memory" and not await asyncio.to_thread(os.path.ismount, path):
        size = _tmpfs_size(pod, source, host)
        await _run("mount", "-t", "tmpfs", "-o", f"size={size},mode=0777", "tmpfs", str(path))
    path.chmod(0o777)
    return path


def _usage_bytes(path: Path) -> int:
    """Bytes allocated under ``path`` (``du``), not following symlinks or other mounts."""
    total = 0
    device = path.stat().st_dev
    for dirpath, dirnames, filenames in os.walk(path):
        for name in (*dirnames, *filenames):
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if st.st_dev == device:
                total += st.st_blocks * 512
    return total


def emptydir_over_limit(pod: Mapping[str, Any], volumes: Mapping[str, MountedVolume]) -> str | None:
    """Kubernetes' eviction message for the first emptyDir whose usage exceeds its
    ``sizeLimit`` ("Usage of EmptyDir volume "x" exceeds the limit "1Mi". "), else None."""
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        limit = (volume.get("emptyDir") or {}).get("sizeLimit")
        mounted = volumes.get(volume["name"])
        if not limit or mounted is None or not mounted.path.is_dir():
            continue
        if _usage_bytes(mounted.path) > parse_quantity(str(limit)):
            return (
                f'Usage of EmptyDir volume "{volume["name"]}" exceeds the limit '
                f'"{canonical_quantity(str(limit))}". '
            )
    return None


# -- persistentVolumeClaim ----------------------------------------------------------------------


def _claim_path(
    pod: Mapping[str, Any], source: Mapping[str, Any], objects: Objects
) -> tuple[str, str | None]:
    """A bound claim's PV: its directory and, for a hostPath PV, the path's ``type``."""
    ns = str((pod.get("metadata") or {}).get("namespace") or "default")
    name = str(source.get("claimName") or "")
    prefix = f"error processing PVC {ns}/{name}"
    claim = objects.get(ObjectRef("persistentvolumeclaims", ns, name))
    if claim is None:
        raise VolumeError(
            f'{prefix}: failed to fetch PVC from API server: persistentvolumeclaims "{name}" '
            "not found"
        )
    pv_name = (claim.get("spec") or {}).get("volumeName")
    if (claim.get("status") or {}).get("phase") != "Bound" or not pv_name:
        raise VolumeError(f"{prefix}: PVC is not bound")
    pv = objects.get(ObjectRef("persistentvolumes", "", str(pv_name)))
    if pv is None:
        raise VolumeError(
            f"{prefix}: failed to fetch PV {pv_name} from API server: "
            f'persistentvolumes "{pv_name}" not found'
        )
    spec = pv.get("spec") or {}
    if spec.get("hostPath"):
        return str(spec["hostPath"]["path"]), str(spec["hostPath"].get("type") or "")
    if spec.get("local"):
        return str(spec["local"]["path"]), None
    raise VolumeError(f"{prefix}: volume {pv_name} has no hostPath or local source")


# -- set up ------------------------------------------------------------------------------------


def _failure(volume: Mapping[str, Any], exc: Exception) -> str:
    """The FailedMount event message, as the kubelet words it for this kind of failure."""
    name = volume["name"]
    if volume.get("persistentVolumeClaim") is not None:
        return (
            f"Unable to attach or mount volumes: unmounted volumes=[{name}], "
            f"unattached volumes=[{name}], failed to process volumes=[{name}]: {exc}"
        )
    return f'MountVolume.SetUp failed for volume "{name}" : {exc}'


async def _tokens(
    pod: Mapping[str, Any], volume: Mapping[str, Any], *, source: TokenSource
) -> dict[int, str]:
    """A projected volume's tokens, by the index of their ``serviceAccountToken`` source."""
    tokens = {}
    for index, projection in enumerate((volume.get("projected") or {}).get("sources") or ()):
        if projection.get("serviceAccountToken") is not None:
            tokens[index] = await source.token(pod, projection["serviceAccountToken"])
    return tokens


async def _set_up_one(
    pod: Mapping[str, Any],
    volume: Mapping[str, Any],
    *,
    host: VolumeHost,
    objects: Objects,
    tokens: TokenSource | None,
) -> MountedVolume | None:
    """One volume; its directory (None without a root); ``VolumeError`` when it cannot be."""
    uid = str(pod["metadata"]["uid"])
    name = str(volume["name"])
    kind = projection_kind(volume)
    if kind is not None:
        issued = (
            await _tokens(pod, volume, source=tokens)
            if kind == "projected" and tokens is not None and host.root is not None
            else None
        )
        files = payload(pod, volume, objects=objects, allocatable=host.allocatable, tokens=issued)
        if host.root is None:
            return None
        path = host.volume_dir(uid, kind, name)
        try:
            write_payload(path, files)
        except PayloadError as exc:
            raise VolumeError(str(exc)) from None
        return MountedVolume(path, read_only=True)
    if volume.get("persistentVolumeClaim") is not None:
        source = volume["persistentVolumeClaim"]
        claim_dir, type_ = _claim_path(pod, source, objects)
        if host.root is None:
            return None
        if type_ is not None:
            _check_host_path(claim_dir, type_)
        return MountedVolume(Path(claim_dir), read_only=bool(source.get("readOnly")))
    if host.root is None:
        return None
    if volume.get("emptyDir") is not None:
        return MountedVolume(await _empty_dir(pod, volume, host=host, uid=uid))
    if volume.get("hostPath") is not None:
        source = volume["hostPath"]
        _check_host_path(str(source["path"]), str(source.get("type") or ""))
        return MountedVolume(Path(source["path"]))
    raise VolumeError("this volume type is not supported by kubelite's kubelet")


async def set_up(
    pod: Mapping[str, Any],
    *,
    host: VolumeHost,
    objects: Objects,
    tokens: TokenSource | None = None,
) -> tuple[dict[str, MountedVolume], list[str]]:
    """Set up every volume of the pod: those that are ready, and FailedMount messages."""
    ready: dict[str, MountedVolume] = {}
    failures: list[str] = []
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        try:
            mounted = await _set_up_one(pod, volume, host=host, objects=objects, tokens=tokens)
        except (VolumeError, OSError, TimeoutError) as exc:
            failures.append(_failure(volume, exc))
            continue
        if mounted is not None:
            ready[volume["name"]] = mounted
    return ready, failures


def container_mounts(
    container: Mapping[str, Any],
    *,
    volumes: Mapping[str, MountedVolume],
    env: Mapping[str, str],
) -> tuple[Mount, ...]:
    """The container's ``volumeMounts`` as runtime mounts (``subPath``/``subPathExpr``
    appended; a missing sub-directory of a writable volume is created, as the kubelet does)."""
    mounts = []
    for vm in container.get("volumeMounts") or ():
        volume = volumes.get(vm.get("name") or "")
        if volume is None:
            continue
        sub = vm.get("subPath") or expand_vars(str(vm.get("subPathExpr") or ""), dict(env))
        path = volume.path / sub if sub else volume.path
        read_only = bool(vm.get("readOnly")) or volume.read_only
        if sub and not read_only and not path.exists():
            path.mkdir(parents=True, exist_ok=True)
        mounts.append(Mount(str(path), str(vm["mountPath"]), read_only))
    return tuple(mounts)


async def tear_down(root: Path | None, uid: str) -> None:
    """Remove the pod's volume dirs (unmounting tmpfs first); hostPath and PV data stay."""
    if root is None:
        return
    volumes = root / "pods" / uid / "volumes"
    empty_dirs = volumes / PLUGIN_DIRS["emptyDir"]
    for path in sorted(empty_dirs.iterdir()) if empty_dirs.is_dir() else ():
        if await asyncio.to_thread(os.path.ismount, path):
            try:
                await _run("umount", str(path))
            except (VolumeError, TimeoutError) as exc:
                log.warning("pod %s: %s; leaving its volumes in place", uid, exc)
                return
    shutil.rmtree(volumes, ignore_errors=True)
