"""The oracle of the patch tests: ``kubectl patch --local``, the apiserver's own Go code.

``kubectl patch --local -f obj.json --type=strategic|merge|json -p PATCH -o json`` applies a
patch offline with the apimachinery code kube-apiserver runs (struct tags compiled into
kubectl 1.32). ``run_patch`` is that call (``OracleRefused`` when kubectl rejects the patch);
``object_of`` builds a minimal object of a kind; ``as_stored`` is what the apiserver's typed
decode keeps of a result. The ``kubectl`` fixture (tests/api/conftest.py) skips without
kubectl 1.32 beside the dispatcher.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

API_VERSIONS = {
    "Pod": "v1",
    "PodTemplate": "v1",
    "ReplicationController": "v1",
    "Node": "v1",
    "Namespace": "v1",
    "Service": "v1",
    "Event": "v1",
    "ConfigMap": "v1",
    "Secret": "v1",
    "ReplicaSet": "apps/v1",
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "Job": "batch/v1",
    "CronJob": "batch/v1",
    "Lease": "coordination.k8s.io/v1",
}


def find_kubectl() -> Path | None:
    dispatcher = shutil.which("kubectl")
    if dispatcher is None:
        return None
    real = Path(os.path.realpath(dispatcher))
    for candidate in (real.parent / "kubectl.1.32", real):
        if candidate.exists() and candidate.name != "kubectl":
            return candidate
    return None


KUBECTL = find_kubectl()


class OracleRefused(Exception):
    """kubectl rejected the patch."""


def as_stored(value: Any) -> Any:
    """What the apiserver's typed decode keeps: no ``$`` directive keys, no ``null`` members."""
    if isinstance(value, dict):
        return {
            k: as_stored(v) for k, v in value.items() if not k.startswith("$") and v is not None
        }
    if isinstance(value, list):
        return [as_stored(v) for v in value]
    return value


def object_of(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    obj = {"apiVersion": API_VERSIONS[kind], "kind": kind, "metadata": {"name": "x"}}
    for key, value in body.items():
        if key == "metadata":
            obj["metadata"] = {"name": "x", **value}
        else:
            obj[key] = value
    return obj


def run_patch(obj: dict[str, Any], patch: Any, *, patch_type: str, workdir: Path) -> Any:
    """``kubectl patch --local`` of ``obj`` (written to ``workdir``) with ``patch``."""
    assert KUBECTL is not None
    path = workdir / "obj.json"
    path.write_text(json.dumps(obj))
    done = subprocess.run(
        [
            *(str(KUBECTL), "patch", "--local", "-f", str(path)),
            *(f"--type={patch_type}", "-p", json.dumps(patch), "-o", "json"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "KUBECONFIG": os.devnull},
        check=False,
    )
    if done.returncode != 0:
        raise OracleRefused(done.stderr.strip())
    return json.loads(done.stdout)
