"""Server-side Table cells, pinned against what Kubernetes' printers print for the same objects."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from api.errors import BadRequest
from api.registry import ResourceType
from services.apiserver.tables import human_duration, to_table, wants_table

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
SAMPLES = Path(__file__).parents[1] / "fixtures" / "kubectl-samples"


class _Any(BaseModel):
    pass


def _rt(kind: str, plural: str, *, group: str = "", namespaced: bool = True) -> ResourceType:
    return ResourceType(
        group=group,
        version="v1",
        kind=kind,
        plural=plural,
        singular=kind.lower(),
        namespaced=namespaced,
        model=_Any,
    )


PODS = _rt("Pod", "pods")
NODES = _rt("Node", "nodes", namespaced=False)
RCS = _rt("ReplicationController", "replicationcontrollers")
RSS = _rt("ReplicaSet", "replicasets", group="apps")
DEPLOYMENTS = _rt("Deployment", "deployments", group="apps")
EVENTS = _rt("Event", "events")
NAMESPACES = _rt("Namespace", "namespaces", namespaced=False)
LEASES = _rt("Lease", "leases", group="coordination.k8s.io")
WIDGETS = _rt("Widget", "widgets")  # a kind without a printer of its own


def ago(**kw: float) -> str:
    return (NOW - timedelta(**kw)).strftime("%Y-%m-%dT%H:%M:%SZ")


def cells(rt: ResourceType, obj: dict[str, Any]) -> list[Any]:
    table = to_table(rt, [obj], now=NOW)
    return table["rows"][0]["cells"]


def headers(rt: ResourceType, *, wide: bool = False) -> list[str]:
    table = to_table(rt, [], now=NOW)
    return [c["name"].upper() for c in table["columnDefinitions"] if wide or c["priority"] == 0]


# ---- durations


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (-1.5, "0s"),
        (0, "0s"),
        (45, "45s"),
        (119, "119s"),
        (120, "2m"),
        (302, "5m2s"),
        (599, "9m59s"),
        (600, "10m"),
        (179 * 60 + 59, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 25 * 60, "3h25m"),
        (8 * 3600 + 59 * 60, "8h"),
        (47 * 3600, "47h"),
        (2 * 86400, "2d"),
        (2 * 86400 + 5 * 3600, "2d5h"),
        (8 * 86400 + 5 * 3600, "8d"),
        (400 * 86400, "400d"),
        (2 * 365 * 86400, "2y"),
        (3 * 365 * 86400 + 20 * 86400, "3y20d"),
        (9 * 365 * 86400 + 20 * 86400, "9y"),
    ],
)
def test_human_duration_matches_kubernetes(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


# ---- negotiation


@pytest.mark.parametrize(
    ("accept", "table"),
    [
        (
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
            True,
        ),
        ("application/json;as=Table;v=v1beta1;g=meta.k8s.io", True),
        ("application/json; as=Table; v=v1; g=meta.k8s.io", True),
        ("application/json", False),
        ("application/json, */*", False),
        (None, False),
        ("", False),
        ("application/json;as=Table;v=v2;g=meta.k8s.io", False),
        ("application/json;as=Table;v=v1;g=other.io", False),
        ("application/json,application/json;as=Table;v=v1;g=meta.k8s.io", False),
        ("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json", False),
        (
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
            False,
        ),
    ],
)
def test_wants_table_follows_accept_order(accept: str | None, table: bool) -> None:
    assert wants_table(accept) is table


# ---- the Table envelope


def test_table_envelope_with_partial_object_metadata_by_default() -> None:
    pod = json.loads((SAMPLES / "pod.json").read_text())
    table = to_table(PODS, [pod], resource_version="111", continue_token="abc", now=NOW)
    assert table["kind"] == "Table"
    assert table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"] == {"resourceVersion": "111", "continue": "abc"}
    row = table["rows"][0]
    assert row["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": pod["metadata"],
    }
    defs = table["columnDefinitions"]
    assert [(d["name"], d["priority"]) for d in defs] == [
        ("Name", 0),
        ("Ready", 0),
        ("Status", 0),
        ("Restarts", 0),
        ("Age", 0),
        ("IP", 1),
        ("Node", 1),
        ("Nominated Node", 1),
        ("Readiness Gates", 1),
    ]
    assert defs[0]["format"] == "name"
    assert all(set(d) == {"name", "type", "format", "description", "priority"} for d in defs)


def test_table_include_object_policies() -> None:
    pod = json.loads((SAMPLES / "pod.json").read_text())
    assert to_table(PODS, [pod], include_object="Object", now=NOW)["rows"][0]["object"] == pod
    assert "object" not in to_table(PODS, [pod], include_object="None", now=NOW)["rows"][0]
    assert to_table(PODS, [pod], include_object="", now=NOW)["rows"][0]["object"]["kind"] == (
        "PartialObjectMetadata"
    )
    with pytest.raises(BadRequest):
        to_table(PODS, [pod], include_object="Everything", now=NOW)


def test_table_without_headers_and_empty() -> None:
    table = to_table(PODS, [], with_headers=False, now=NOW)
    assert table["columnDefinitions"] is None
    assert table["rows"] == []
    assert table["metadata"] == {}


def test_table_defaults_now_to_the_clock() -> None:
    pod = {"metadata": {"name": "p", "creationTimestamp": datetime.now(UTC).isoformat()}}
    assert to_table(PODS, [pod])["rows"][0]["cells"][4] in ("0s", "1s", "2s")


# ---- pods

RUNNING = json.loads((SAMPLES / "pod.json").read_text())


def pod_with(**status: Any) -> dict[str, Any]:
    pod = copy.deepcopy(RUNNING)
    pod["metadata"]["creationTimestamp"] = ago(minutes=5, seconds=2)
    pod["status"].update(status)
    return pod


def test_pod_headers() -> None:
    assert headers(PODS) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert headers(PODS, wide=True)[5:] == ["IP", "NODE", "NOMINATED NODE", "READINESS GATES"]


def test_pod_running() -> None:
    pod = pod_with()
    assert cells(PODS, pod) == [
        "demo",
        "1/1",
        "Running",
        "0",
        "5m2s",
        "10.244.0.128",
        "node1",
        "<none>",
        "<none>",
    ]


def test_pod_pending_unscheduled() -> None:
    pod = {
        "metadata": {"name": "p", "creationTimestamp": ago(seconds=45)},
        "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]},
        "status": {"phase": "Pending"},
    }
    assert cells(PODS, pod) == [
        "p",
        "0/2",
        "Pending",
        "0",
        "45s",
        "<none>",
        "<none>",
        "<none>",
        "<none>",
    ]


def test_pod_container_creating() -> None:
    pod = pod_with(
        phase="Pending",
        containerStatuses=[
            {
                "name": "main",
                "ready": False,
                "restartCount": 0,
                "state": {"waiting": {"reason": "ContainerCreating"}},
            }
        ],
    )
    assert cells(PODS, pod)[1:4] == ["0/1", "ContainerCreating", "0"]


def test_pod_completed() -> None:
    pod = pod_with(
        phase="Succeeded",
        containerStatuses=[
            {
                "name": "main",
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
            }
        ],
    )
    table = to_table(PODS, [pod], now=NOW)
    assert table["rows"][0]["cells"][1:4] == ["0/1", "Completed", "0"]
    assert table["rows"][0]["conditions"] == [
        {
            "type": "Completed",
            "status": "True",
            "reason": "Succeeded",
            "message": "The pod has completed successfully.",
        }
    ]


def test_pod_failed_with_exit_code_and_signal() -> None:
    exit_pod = pod_with(
        phase="Failed",
        containerStatuses=[
            {"name": "main", "restartCount": 0, "state": {"terminated": {"exitCode": 3}}}
        ],
    )
    assert cells(PODS, exit_pod)[2] == "ExitCode:3"
    assert to_table(PODS, [exit_pod], now=NOW)["rows"][0]["conditions"][0]["reason"] == "Failed"
    signal_pod = pod_with(
        phase="Failed",
        containerStatuses=[
            {
                "name": "main",
                "restartCount": 0,
                "state": {"terminated": {"exitCode": 137, "signal": 9}},
            }
        ],
    )
    assert cells(PODS, signal_pod)[2] == "Signal:9"


def test_pod_crash_loop_with_restarts_ago() -> None:
    pod = pod_with(
        phase="Running",
        containerStatuses=[
            {
                "name": "main",
                "ready": False,
                "restartCount": 4,
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                "lastState": {
                    "terminated": {"exitCode": 1, "reason": "Error", "finishedAt": ago(minutes=5)}
                },
            }
        ],
    )
    assert cells(PODS, pod)[1:4] == ["0/1", "CrashLoopBackOff", "4 (5m ago)"]


def test_pod_image_pull_errors() -> None:
    for reason in ("ErrImagePull", "ImagePullBackOff"):
        pod = pod_with(
            phase="Pending",
            containerStatuses=[
                {
                    "name": "main",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"waiting": {"reason": reason}},
                }
            ],
        )
        assert cells(PODS, pod)[2] == reason


def test_pod_terminating_and_node_lost() -> None:
    pod = pod_with()
    pod["metadata"]["deletionTimestamp"] = ago(seconds=3)
    assert cells(PODS, pod)[2] == "Terminating"
    lost = pod_with(reason="NodeLost")
    lost["metadata"]["deletionTimestamp"] = ago(seconds=3)
    assert cells(PODS, lost)[2] == "Unknown"
    done = pod_with(phase="Succeeded", containerStatuses=[])
    done["metadata"]["deletionTimestamp"] = ago(seconds=3)
    assert cells(PODS, done)[2] == "Succeeded"


def test_pod_completed_container_with_running_sibling() -> None:
    pod = pod_with(
        containerStatuses=[
            {"name": "a", "ready": True, "restartCount": 0, "state": {"running": {}}},
            {
                "name": "b",
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
            },
        ],
    )
    pod["spec"]["containers"] = [{"name": "a"}, {"name": "b"}]
    assert cells(PODS, pod)[1:3] == ["1/2", "Running"]
    pod["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    assert cells(PODS, pod)[1:3] == ["1/2", "NotReady"]


def _init_pod(*init_statuses: dict[str, Any], initialized: bool = False) -> dict[str, Any]:
    pod = pod_with(
        phase="Pending",
        initContainerStatuses=list(init_statuses),
        containerStatuses=[
            {
                "name": "main",
                "ready": False,
                "restartCount": 0,
                "state": {"waiting": {"reason": "PodInitializing"}},
            }
        ],
        conditions=[{"type": "Initialized", "status": "True" if initialized else "False"}],
    )
    pod["spec"]["initContainers"] = [{"name": s["name"]} for s in init_statuses]
    return pod


def test_pod_init_progress() -> None:
    done = {
        "name": "i1",
        "restartCount": 0,
        "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
    }
    running = {"name": "i2", "restartCount": 0, "state": {"running": {}}}
    assert cells(PODS, _init_pod(done, running))[1:4] == ["0/1", "Init:1/2", "0"]
    waiting = {"name": "i1", "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}
    assert cells(PODS, _init_pod(waiting))[2] == "Init:0/1"


def test_pod_init_failures() -> None:
    crashing = {
        "name": "i1",
        "restartCount": 2,
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(seconds=30)}},
    }
    assert cells(PODS, _init_pod(crashing))[2:4] == ["Init:CrashLoopBackOff", "2 (30s ago)"]
    failed = {"name": "i1", "restartCount": 0, "state": {"terminated": {"exitCode": 2}}}
    assert cells(PODS, _init_pod(failed))[2] == "Init:ExitCode:2"
    reasoned = {
        "name": "i1",
        "restartCount": 0,
        "state": {"terminated": {"exitCode": 2, "reason": "Error"}},
    }
    assert cells(PODS, _init_pod(reasoned))[2] == "Init:Error"
    pulled = {"name": "i1", "restartCount": 0, "state": {"waiting": {"reason": "ErrImagePull"}}}
    assert cells(PODS, _init_pod(pulled))[2] == "Init:ErrImagePull"


def test_pod_sidecar_counts_towards_ready() -> None:
    sidecar = {
        "name": "side",
        "restartCount": 1,
        "started": True,
        "ready": True,
        "state": {"running": {}},
    }
    pod = _init_pod(sidecar, initialized=True)
    pod["spec"]["initContainers"] = [{"name": "side", "restartPolicy": "Always"}]
    pod["status"]["phase"] = "Running"
    pod["status"]["containerStatuses"] = [
        {"name": "main", "ready": True, "restartCount": 0, "state": {"running": {}}}
    ]
    assert cells(PODS, pod)[1:4] == ["2/2", "Running", "1"]


def test_pod_scheduling_gated_and_readiness_gates() -> None:
    pod = {
        "metadata": {"name": "g", "creationTimestamp": ago(seconds=1)},
        "spec": {
            "containers": [{"name": "c"}],
            "readinessGates": [{"conditionType": "x/a"}, {"conditionType": "x/b"}],
        },
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"},
                {"type": "x/a", "status": "True"},
            ],
            "nominatedNodeName": "node2",
        },
    }
    assert cells(PODS, pod) == [
        "g",
        "0/1",
        "SchedulingGated",
        "0",
        "1s",
        "<none>",
        "<none>",
        "node2",
        "1/2",
    ]


def test_pod_without_creation_timestamp() -> None:
    assert cells(PODS, {"metadata": {"name": "x"}})[4] == "<unknown>"


# ---- nodes


def node(**kw: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {
            "name": "node1",
            "creationTimestamp": ago(hours=3),
            "labels": {"kubernetes.io/hostname": "node1"},
        },
        "spec": {},
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True"},
            ],
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": "node1"},
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.32.0-kubelite",
                "osImage": "Debian GNU/Linux 12",
                "kernelVersion": "6.1.0",
                "containerRuntimeVersion": "kubelite://0.1.0",
            },
        },
    }
    for key, value in kw.items():
        obj[key].update(value)
    return obj


def test_node_headers() -> None:
    assert headers(NODES) == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert headers(NODES, wide=True)[5:] == [
        "INTERNAL-IP",
        "EXTERNAL-IP",
        "OS-IMAGE",
        "KERNEL-VERSION",
        "CONTAINER-RUNTIME",
    ]


def test_node_ready() -> None:
    assert cells(NODES, node()) == [
        "node1",
        "Ready",
        "<none>",
        "3h",
        "v1.32.0-kubelite",
        "127.0.0.1",
        "<none>",
        "Debian GNU/Linux 12",
        "6.1.0",
        "kubelite://0.1.0",
    ]


def test_node_not_ready_unknown_and_unschedulable() -> None:
    not_ready = node(status={"conditions": [{"type": "Ready", "status": "False"}]})
    assert cells(NODES, not_ready)[1] == "NotReady"
    unknown_status = node(status={"conditions": [{"type": "Ready", "status": "Unknown"}]})
    assert cells(NODES, unknown_status)[1] == "NotReady"
    no_condition = node(status={"conditions": []})
    assert cells(NODES, no_condition)[1] == "Unknown"
    cordoned = node(spec={"unschedulable": True})
    assert cells(NODES, cordoned)[1] == "Ready,SchedulingDisabled"


def test_node_roles_sorted_and_missing_info() -> None:
    obj = node(
        metadata={
            "labels": {
                "node-role.kubernetes.io/worker": "",
                "node-role.kubernetes.io/control-plane": "",
                "node-role.kubernetes.io/": "",
                "kubernetes.io/role": "edge",
            }
        },
        status={"nodeInfo": {}, "addresses": [{"type": "ExternalIP", "address": "127.0.0.9"}]},
    )
    assert cells(NODES, obj)[2:] == [
        "control-plane,edge,worker",
        "3h",
        "",
        "<none>",
        "127.0.0.9",
        "<unknown>",
        "<unknown>",
        "<unknown>",
    ]


def test_node_sample_table_matches_recorded_cells() -> None:
    sample = json.loads((SAMPLES / "table_nodes.json").read_text())
    row = sample["rows"][0]
    obj = {
        "metadata": row["object"]["metadata"],
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "addresses": [{"type": "InternalIP", "address": row["cells"][5]}],
            "nodeInfo": {
                "kubeletVersion": "v1.32.0",
                "osImage": row["cells"][7],
                "kernelVersion": row["cells"][8],
                "containerRuntimeVersion": row["cells"][9],
            },
        },
    }
    created = datetime.fromisoformat(row["object"]["metadata"]["creationTimestamp"])
    table = to_table(NODES, [obj], now=created + timedelta(minutes=60))
    assert table["rows"][0]["cells"] == row["cells"]


# ---- workload controllers


def rc(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "creationTimestamp": ago(days=2, hours=5)},
        "spec": {
            "replicas": 3,
            "selector": {"tier": "web", "app": "demo"},
            "template": {
                "spec": {
                    "containers": [
                        {"name": "nginx", "image": "nginx:1.27"},
                        {"name": "side", "image": "busybox"},
                    ]
                }
            },
        },
        "status": status,
    }


def test_replication_controller() -> None:
    assert headers(RCS) == ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]
    assert headers(RCS, wide=True)[5:] == ["CONTAINERS", "IMAGES", "SELECTOR"]
    assert cells(RCS, rc(replicas=3, readyReplicas=2)) == [
        "web",
        3,
        3,
        2,
        "2d5h",
        "nginx,side",
        "nginx:1.27,busybox",
        "app=demo,tier=web",
    ]
    fresh = rc()
    del fresh["spec"]["replicas"], fresh["spec"]["selector"]
    assert cells(RCS, fresh)[1:4] == [1, 0, 0]
    assert cells(RCS, fresh)[7] == "<none>"


def test_replica_set_selector() -> None:
    rs = rc(replicas=2, readyReplicas=2)
    rs["spec"]["selector"] = {
        "matchLabels": {"app": "demo"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["web", "api"]},
            {"key": "canary", "operator": "DoesNotExist"},
            {"key": "env", "operator": "NotIn", "values": ["prod"]},
            {"key": "zone", "operator": "Exists"},
        ],
    }
    assert headers(RSS) == ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]
    assert cells(RSS, rs)[1:4] == [3, 2, 2]
    assert cells(RSS, rs)[7] == "app=demo,!canary,env notin (prod),tier in (api,web),zone"
    rs["spec"]["selector"] = {}
    assert cells(RSS, rs)[7] == "<none>"


def test_deployment() -> None:
    deploy = rc(replicas=3, readyReplicas=1, updatedReplicas=2, availableReplicas=1)
    deploy["spec"]["selector"] = {"matchLabels": {"app": "demo"}}
    assert headers(DEPLOYMENTS) == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert headers(DEPLOYMENTS, wide=True)[5:] == ["CONTAINERS", "IMAGES", "SELECTOR"]
    assert cells(DEPLOYMENTS, deploy) == [
        "web",
        "1/3",
        2,
        1,
        "2d5h",
        "nginx,side",
        "nginx:1.27,busybox",
        "app=demo",
    ]


# ---- events, namespaces, leases, default


def test_event_columns() -> None:
    assert headers(EVENTS) == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert headers(EVENTS, wide=True) == [
        "LAST SEEN",
        "TYPE",
        "REASON",
        "OBJECT",
        "SUBOBJECT",
        "SOURCE",
        "MESSAGE",
        "FIRST SEEN",
        "COUNT",
        "NAME",
    ]


def test_event_from_the_recorded_sample() -> None:
    sample = json.loads((SAMPLES / "events.json").read_text())["items"][0]
    moment = datetime.fromisoformat(sample["lastTimestamp"]) + timedelta(seconds=75)
    row = to_table(EVENTS, [sample], now=moment)["rows"][0]["cells"]
    assert row == [
        "75s",
        "Normal",
        "Created",
        "pod/demo",
        "spec.containers{main}",
        "kubelet, node1",
        "Created container main",
        "75s",
        1,
        sample["metadata"]["name"],
    ]


def test_event_series_event_time_and_reporting_controller() -> None:
    event = {
        "metadata": {"name": "e1"},
        "involvedObject": {"kind": "Node"},
        "reason": "Starting",
        "message": "  starting  \n",
        "type": "Normal",
        "eventTime": ago(minutes=30),
        "reportingController": "kubelite-scheduler",
        "series": {"count": 7, "lastObservedTime": ago(minutes=2)},
    }
    assert cells(EVENTS, event) == [
        "2m",
        "Normal",
        "Starting",
        "node",
        "",
        "kubelite-scheduler",
        "starting",
        "30m",
        7,
        "e1",
    ]
    warning = {
        "metadata": {"name": "e2"},
        "involvedObject": {"kind": "Pod", "name": "p"},
        "reason": "FailedScheduling",
        "message": "0/2 nodes are available",
        "type": "Warning",
        "firstTimestamp": ago(hours=3),
        "count": 12,
    }
    row = cells(EVENTS, warning)
    assert row[0] == "3h"  # no lastTimestamp: the first occurrence stands in
    assert row[3] == "pod/p"
    assert row[8] == 12


def test_namespace_lease_and_default() -> None:
    ns = {
        "metadata": {"name": "default", "creationTimestamp": ago(days=9)},
        "status": {"phase": "Active"},
    }
    assert headers(NAMESPACES) == ["NAME", "STATUS", "AGE"]
    assert cells(NAMESPACES, ns) == ["default", "Active", "9d"]
    lease = {
        "metadata": {"name": "node1", "creationTimestamp": ago(seconds=30)},
        "spec": {"holderIdentity": "node1"},
    }
    assert headers(LEASES) == ["NAME", "HOLDER", "AGE"]
    assert cells(LEASES, lease) == ["node1", "node1", "30s"]
    assert cells(LEASES, {"metadata": {"name": "x"}, "spec": {}}) == ["x", "", "<unknown>"]
    assert headers(WIDGETS) == ["NAME", "AGE"]
    assert cells(WIDGETS, {"metadata": {"name": "cm", "creationTimestamp": ago(minutes=7)}}) == [
        "cm",
        "7m",
    ]
