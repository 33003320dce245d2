"""Small builders of Pod and Node JSON for the scheduler's tests (wire shape, not models)."""

from __future__ import annotations

from typing import Any

from services.scheduler.nodeinfo import NodeInfo, PodInfo


def pod_obj(
    name: str = "p",
    *,
    namespace: str = "default",
    cpu: str | None = None,
    memory: str | None = None,
    node_selector: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    node_name: str | None = None,
    owner_uid: str | None = None,
    priority: int | None = None,
    init_cpu: str | None = None,
) -> dict[str, Any]:
    requests: dict[str, str] = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    container: dict[str, Any] = {"name": "c", "image": "nginx"}
    if requests:
        container["resources"] = {"requests": requests}
    spec: dict[str, Any] = {"containers": [container]}
    if init_cpu is not None:
        spec["initContainers"] = [
            {"name": "init", "image": "busybox", "resources": {"requests": {"cpu": init_cpu}}}
        ]
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = affinity
    if tolerations:
        spec["tolerations"] = tolerations
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    if owner_uid:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "rs",
                "uid": owner_uid,
                "controller": True,
            }
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def node_obj(
    name: str = "node1",
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    resources = {"cpu": cpu, "memory": memory, "pods": pods}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": spec,
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(name: str = "p", **kw: Any) -> PodInfo:
    return PodInfo(pod_obj(name, **kw))


def node(name: str = "node1", *, placed: tuple[PodInfo, ...] = (), **kw: Any) -> NodeInfo:
    info = NodeInfo(name)
    info.set_node(node_obj(name, **kw))
    for p in placed:
        info.add_pod(p)
    return info
