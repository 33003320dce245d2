"""Kubernetes' atomic writer: a volume's files replaced all at once, never half-updated.

Why: configMap, secret, downwardAPI and projected volumes change while containers read them.
A reader must see either the old set of files or the new one, never a mix, so the kubelet's
``pkg/volume/util/atomic_writer.go`` lays a volume out as::

    <dir>/..2026_12_01_15_00_00.k2j8_x1q/a      the files of one version (a timestamped dir)
    <dir>/..data -> ..2026_12_01_15_00_00.k2j8_x1q
    <dir>/a -> ..data/a                           each visible top-level name, a symlink

and an update writes a new timestamped dir, points a temporary ``..data_tmp`` symlink at it,
renames that over ``..data`` (``rename(2)`` is atomic), adds or removes the visible symlinks,
then deletes the old dir. Nothing is written when the payload is unchanged.

What it owns: ``write_payload`` and ``Payload`` (relative path -> bytes and mode).

What it does not guarantee: a reader holding an old file open keeps the old content (the old
dir is removed, the open file lives on); ``fsGroup`` ownership is not applied.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DATA_DIR", "FileProjection", "Payload", "PayloadError", "write_payload"]

DATA_DIR = "..data"
_DATA_TMP = "..data_tmp"


@dataclass(frozen=True, slots=True)
class FileProjection:
    data: bytes
    mode: int


Payload = Mapping[str, FileProjection]
"""Relative file path -> its content and mode."""


class PayloadError(Exception):
    """A path the writer refuses (absolute, with ``..``, or starting with ``..``)."""


def _validate(path: str) -> None:
    """``validatePath``: relative, no ``..`` element, not starting with ``..``."""
    if not path or path.startswith("/"):
        raise PayloadError(f"invalid path: {path!r} must be relative")
    if path.startswith(".."):
        raise PayloadError(f"invalid path: {path!r} must not start with '..'")
    if ".." in path.split("/"):
        raise PayloadError(f"invalid path: {path!r} must not contain '..'")


def _unchanged(old: Path, payload: Payload) -> bool:
    current = {
        str(f.relative_to(old)) for f in old.rglob("*") if f.is_file() and not f.is_symlink()
    }
    if current != set(payload):
        return False
    for rel, proj in payload.items():
        f = old / rel
        if f.read_bytes() != proj.data or (f.stat().st_mode & 0o7777) != proj.mode:
            return False
    return True


def _new_version(target: Path, payload: Payload) -> Path:
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime())
    version = Path(tempfile.mkdtemp(prefix=stamp, dir=target))
    version.chmod(0o755)
    for rel, proj in payload.items():
        f = version / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(proj.data)
        f.chmod(proj.mode)
    return version


def write_payload(target: Path, payload: Payload) -> bool:
    """Make ``target`` show exactly ``payload``; True when something was written."""
    for rel in payload:
        _validate(rel)
    target.mkdir(parents=True, exist_ok=True)
    data_link = target / DATA_DIR
    old = target / os.readlink(data_link) if data_link.is_symlink() else None
    if old is not None and old.is_dir() and _unchanged(old, payload):
        return False
    version = _new_version(target, payload)
    tmp_link = target / _DATA_TMP
    tmp_link.unlink(missing_ok=True)
    tmp_link.symlink_to(version.name)
    tmp_link.replace(data_link)
    visible = {rel.split("/", 1)[0] for rel in payload}
    for name in visible:
        link = target / name
        if not link.is_symlink():
            link.symlink_to(f"{DATA_DIR}/{name}")
    for entry in target.iterdir():
        if not entry.name.startswith("..") and entry.name not in visible and entry.is_symlink():
            entry.unlink()
    if old is not None and old.is_dir() and old != version:
        shutil.rmtree(old, ignore_errors=True)
    return True
