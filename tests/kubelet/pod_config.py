"""What the kubelet's volume and env tests do: kubectl against the cluster, exec, events, objects.

Files and env are read the way a Kubernetes user reads them, with ``kubectl exec ... cat`` and
``kubectl exec ... env`` (the stock kubectl, through the apiserver's exec proxy to the kubelet).
Events are awaited on the apiserver's watch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from api.registry import REGISTRY, ResourceType
from kubelite.testing.waiting import Watcher
from tests.kubectl.harness import Kubectl
from tests.kubelet.conftest import Cluster

Obj = dict[str, Any]


def rt(plural: str) -> ResourceType:
    found = REGISTRY.get("", "v1", plural)
    assert found is not None
    return found


def kubectl(c: Cluster) -> Kubectl:
    return Kubectl.on(c.server, workdir=c.tmp)


def exec_out(k: Kubectl, pod: str, *command: str, container: str | None = None) -> str:
    """``kubectl exec pod [-c container] -- command``'s stdout (the exec must succeed)."""
    where = ["-c", container] if container else []
    return k("exec", pod, *where, "--", *command).stdout


def pod_env(k: Kubectl, pod: str, container: str | None = None) -> dict[str, str]:
    lines = exec_out(k, pod, "env", container=container).splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


async def wait_event(
    c: Cluster, pod: str, predicate: Callable[[Obj], bool], *, within: float = 30
) -> Obj:
    """The first Event about ``pod`` for which ``predicate`` holds, awaited on a watch."""
    found: list[Obj] = []

    def holds(events: list[Obj]) -> bool:
        found[:] = [
            e for e in events if (e.get("involvedObject") or {}).get("name") == pod and predicate(e)
        ]
        return bool(found)

    async with Watcher(c.client, rt("events"), namespace="default") as watcher:
        await watcher.wait_until(holds, what=f"an event about pod {pod}", within=within)
    return found[0]


def waiting(p: Obj | None, index: int = 0) -> Obj:
    statuses = ((p or {}).get("status") or {}).get("containerStatuses") or [{}]
    return (statuses[index].get("state") or {}).get("waiting") or {}
