"""The image catalog: how an image name becomes a host program, since no container engine runs here.

A YAML file (``images.yaml`` beside this module by default, ``--image-catalog`` to override) maps
image references to an entrypoint, a default cmd, env and a default port. ``resolve`` normalises a
reference the way a container engine would read it — registry host and ``library/`` dropped,
digest dropped, missing tag read as ``latest`` — and returns the first matching entry as an
``ImageRef``. An unknown image raises ``ImagePullError`` worded like a failed pull.

``ImageStore`` adds the node-local notion of "present" that ``imagePullPolicy`` talks about: an
image is present once pulled on this node (recorded in ``<state-dir>/images.json`` so it
survives restarts). Pulls are instantaneous; only the wording and events differ by policy.

The built-in catalog runs host programs, not images: ``nginx`` is kubelite's own static web
server (``webserver.py``, ``Server: kubelite-webserver/<version>``), ``busybox``/``alpine``/
``debian``/``ubuntu`` the host's ``sh`` and commands, ``python`` the kubelet's own interpreter,
``pause`` ``sleep infinity`` — whatever the tag says (``images.yaml`` and the README say the same).

Not provided: layers, registries, credentials, sizes that mean anything.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shlex
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from services.kubelet.runtime.base import ImagePullError, ImageRef

__all__ = [
    "DEFAULT_CATALOG",
    "ImageCatalog",
    "ImageStore",
    "default_pull_policy",
    "normalize_image",
]

DEFAULT_CATALOG = Path(__file__).with_name("images.yaml")
BUILTIN_DIR = Path(__file__).parent


def normalize_image(image: str) -> str:
    """``docker-host.example/library/nginx:1.25@sha256:..`` -> ``nginx:1.25``; no tag -> ``:latest``."""
    ref = image.strip()
    ref = ref.split("@", 1)[0]
    parts = ref.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]
    if len(parts) > 1 and parts[0] == "library":
        parts = parts[1:]
    ref = "/".join(parts)
    last = ref.rsplit("/", 1)[-1]
    if ":" not in last:
        ref += ":latest"
    return ref


def default_pull_policy(image: str) -> str:
    """Kubernetes' default: ``Always`` for ``:latest`` (or no tag), else ``IfNotPresent``."""
    return "Always" if normalize_image(image).endswith(":latest") else "IfNotPresent"


@dataclass(frozen=True, slots=True)
class _Entry:
    patterns: tuple[str, ...]
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    env: Mapping[str, str]
    port: int | None
    links: Mapping[str, str]
    working_dir: str | None


class ImageCatalog:
    """The parsed catalog file. ``resolve`` is pure; ``links`` are materialised by ``ImageStore``."""

    def __init__(self, *, path: Path = DEFAULT_CATALOG, python: str | None = None) -> None:
        self.path = path
        self._subst = {
            "python": python or sys.executable,
            "builtin": str(BUILTIN_DIR),
            "sh": shutil.which("sh") or "/bin/sh",
        }
        raw = yaml.safe_load(path.read_text()) or {}
        self._entries = [self._parse(item) for item in raw.get("images") or []]

    def _fill(self, value: str) -> str:
        return value.format(**self._subst)

    def _parse(self, item: Mapping[str, Any]) -> _Entry:
        match = item.get("match") or []
        if isinstance(match, str):
            match = [match]
        return _Entry(
            patterns=tuple(normalize_image(p) if "*" not in p else p for p in match),
            entrypoint=tuple(self._fill(str(a)) for a in item.get("entrypoint") or ()),
            cmd=tuple(self._fill(str(a)) for a in item.get("cmd") or ()),
            env={str(k): self._fill(str(v)) for k, v in (item.get("env") or {}).items()},
            port=int(item["port"]) if item.get("port") else None,
            links={str(k): self._fill(str(v)) for k, v in (item.get("links") or {}).items()},
            working_dir=item.get("workingDir"),
        )

    def lookup(self, image: str) -> tuple[ImageRef, Mapping[str, str]]:
        """The image and its ``links``; raises ``ImagePullError`` for an unknown image."""
        ref = normalize_image(image)
        for entry in self._entries:
            if any(fnmatch.fnmatchcase(ref, p) for p in entry.patterns):
                digest = hashlib.sha256(
                    json.dumps(
                        [ref, entry.entrypoint, entry.cmd, sorted(entry.env.items())]
                    ).encode()
                ).hexdigest()
                program = (entry.entrypoint or entry.cmd or ("",))[0]
                located = shutil.which(program) if program else None
                size = os.path.getsize(located) if located else 0
                return (
                    ImageRef(
                        image=image,
                        image_id=f"{ref.rsplit(':', 1)[0]}@sha256:{digest}",
                        entrypoint=entry.entrypoint,
                        cmd=entry.cmd,
                        env=dict(entry.env),
                        working_dir=entry.working_dir,
                        default_port=entry.port,
                        size_bytes=size,
                    ),
                    entry.links,
                )
        repo = ref.rsplit(":", 1)[0]
        raise ImagePullError(
            f'failed to pull and unpack image "{ref}": failed to resolve reference "{ref}": '
            f"pull access denied, repository does not exist or may require authorization: "
            f"{repo}: not found in the image catalog {self.path}",
        )


class ImageStore:
    """Images "present" on this node, and the per-image bin directories their links live in."""

    def __init__(self, *, catalog: ImageCatalog, state_dir: Path) -> None:
        self.catalog = catalog
        self._dir = state_dir / "images"
        self._dir.mkdir(parents=True, exist_ok=True)
        self._index = self._dir / "present.json"
        try:
            self._present: set[str] = set(json.loads(self._index.read_text()))
        except (OSError, ValueError):
            self._present = set()

    def pull(self, image: str, *, policy: str) -> tuple[ImageRef, bool]:
        """Resolve under ``policy``; return the image and whether it was already present.

        ``Never`` with an image not yet on the node fails as ``ErrImageNeverPull`` with the
        message the kubelet prints."""
        ref = normalize_image(image)
        present = ref in self._present
        if policy == "Never" and not present:
            raise ImagePullError(
                f'Container image "{image}" is not present with pull policy of Never',
                reason="ErrImageNeverPull",
            )
        resolved, links = self.catalog.lookup(image)
        if links:
            bindir = self.bin_dir(image)
            bindir.mkdir(parents=True, exist_ok=True)
            for name, target in links.items():
                _write_launcher(bindir / name, target)
            env = dict(resolved.env)
            env["PATH"] = f"{bindir}:{env.get('PATH', DEFAULT_PATH)}"
            resolved = ImageRef(
                image=resolved.image,
                image_id=resolved.image_id,
                entrypoint=resolved.entrypoint,
                cmd=resolved.cmd,
                env=env,
                working_dir=resolved.working_dir,
                default_port=resolved.default_port,
                size_bytes=resolved.size_bytes,
            )
        if not present:
            self._present.add(ref)
            tmp = self._index.with_suffix(".tmp")
            tmp.write_text(json.dumps(sorted(self._present)))
            tmp.replace(self._index)
        return resolved, present and policy != "Always"

    def bin_dir(self, image: str) -> Path:
        safe = normalize_image(image).replace("/", "_").replace(":", "_")
        return self._dir / safe / "bin"


DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""The PATH every Linux image sets; a container's own env may override it."""


def _write_launcher(path: Path, target: str) -> None:
    """A link: a command on the image's PATH that runs ``target`` by its full path.

    Not a symlink: a Python in a virtual environment finds that environment (``pyvenv.cfg``)
    from the path it was started by, so through a symlink elsewhere the ``python`` image would
    run the bare interpreter, without the kubelet's packages (the official ``kubernetes``
    client above all)."""
    script = f'#!/bin/sh\nexec {shlex.quote(target)} "$@"\n'
    if not path.is_symlink() and path.is_file() and path.read_text() == script:
        return
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(script)
    tmp.chmod(0o755)
    tmp.replace(path)
