"""Per-pod state on disk under ``--state-dir``, so a restarted kubelet can re-adopt its pods.

Layout (one directory per pod, keyed by uid so a re-created pod of the same name is distinct)::

    <state-dir>/pods/<uid>/pod.json                  namespace, name, uid, pod IP
    <state-dir>/pods/<uid>/containers/<id>.json      one container instance (pids, attempt, spec hash)
    <state-dir>/pods/<uid>/containers/<id>.pid.json  its pids (written by its shim at start)
    <state-dir>/pods/<uid>/containers/<id>.exit.json how it ended (written by its shim)
    <state-dir>/pods/<uid>/logs/<container>/<attempt>.log   CRI-format log of that instance
    <state-dir>/pods/<uid>/root/                     the pod's working directory

Every JSON write is atomic (write a temporary file, then rename), so a kubelet killed mid-write
leaves the previous version, never half a file. What is *not* here: pod specs or statuses — the
apiserver holds those; the kubelet re-reads them from its informer after a restart.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["PodRecord", "StateDir", "write_json_atomic"]


def write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class PodRecord:
    uid: str
    namespace: str
    name: str
    ip: str


class StateDir:
    """Reads and writes the layout above. Cheap enough to call from the event loop: files are tiny."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.pods_root = root / "pods"
        self.pods_root.mkdir(parents=True, exist_ok=True)

    def pod_dir(self, uid: str) -> Path:
        return self.pods_root / uid

    def pod_root(self, uid: str) -> Path:
        return self.pod_dir(uid) / "root"

    def log_path(self, uid: str, container: str, attempt: int) -> Path:
        return self.pod_dir(uid) / "logs" / container / f"{attempt}.log"

    def container_file(self, uid: str, container_id: str) -> Path:
        return self.pod_dir(uid) / "containers" / f"{_short(container_id)}.json"

    def exit_file(self, uid: str, container_id: str) -> Path:
        return self.pod_dir(uid) / "containers" / f"{_short(container_id)}.exit.json"

    def save_pod(self, record: PodRecord) -> None:
        d = self.pod_dir(record.uid)
        for sub in ("containers", "logs", "root"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        write_json_atomic(
            d / "pod.json",
            {
                "uid": record.uid,
                "namespace": record.namespace,
                "name": record.name,
                "ip": record.ip,
            },
        )

    def load_pods(self) -> list[PodRecord]:
        out = []
        for d in sorted(self.pods_root.iterdir()) if self.pods_root.is_dir() else []:
            data = _read_json(d / "pod.json")
            if isinstance(data, dict) and data.get("uid") == d.name:
                out.append(
                    PodRecord(
                        uid=data["uid"],
                        namespace=data["namespace"],
                        name=data["name"],
                        ip=data["ip"],
                    )
                )
            elif d.is_dir():
                # a pod directory without a readable record was never fully set up
                shutil.rmtree(d, ignore_errors=True)
        return out

    def save_container(self, uid: str, container_id: str, data: dict[str, Any]) -> None:
        write_json_atomic(self.container_file(uid, container_id), data)

    def load_containers(self, uid: str) -> list[dict[str, Any]]:
        d = self.pod_dir(uid) / "containers"
        out = []
        for f in sorted(d.glob("*.json")) if d.is_dir() else []:
            if f.name.endswith((".exit.json", ".pid.json")):
                continue
            data = _read_json(f)
            if isinstance(data, dict):
                out.append(data)
        return out

    def pid_file(self, uid: str, container_id: str) -> Path:
        return self.pod_dir(uid) / "containers" / f"{_short(container_id)}.pid.json"

    def read_exit(self, uid: str, container_id: str) -> dict[str, Any] | None:
        data = _read_json(self.exit_file(uid, container_id))
        return data if isinstance(data, dict) else None

    def remove_pod(self, uid: str) -> None:
        shutil.rmtree(self.pod_dir(uid), ignore_errors=True)


def _short(container_id: str) -> str:
    return container_id.split("://", 1)[-1]
