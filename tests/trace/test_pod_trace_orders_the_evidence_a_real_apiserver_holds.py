"""``api.pod_trace`` over objects read back from a real apiserver.

The evidence is written the way the components write it — the scheduler's and the kubelet's
Events through the real ``EventRecorder`` (which stamps ``eventTime`` to the microsecond), the
binding through ``pods/binding``, the kubelet's conditions through ``pods/status`` — and read
back over HTTP, so the trace sees exactly the wire format: second-resolution conditions and
``creationTimestamp``, MicroTime ``eventTime``, server-written managedFields.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from api.meta import format_time, parse_time
from api.pod_trace import TraceStep, pod_trace, replicaset_trace
from api.registry import REGISTRY
from client.events import EventRecorder
from client.kubeconfig import ClientConfig
from client.rest import ApiClient
from tests.conftest import StartApiServer
from tests.factories import container, controlled_by, pod, replica_set

PODS = REGISTRY.require("", "Pod")
EVENTS = REGISTRY.require("", "Event")
REPLICASETS = REGISTRY.require("apps", "ReplicaSet")

Obj = dict[str, Any]

KUBELET_STEPS = [
    "seen by kubelet",
    "volumes ready",
    "sandbox ready",
    "image pulled",
    "container created",
    "container started",
    "probes passed",
]


def condition(kind: str, at: str) -> Obj:
    return {"type": kind, "status": "True", "lastTransitionTime": at}


async def run_as_the_kubelet(client: ApiClient, created: Obj, node: str) -> None:
    """What the node's kubelet leaves: its Events, then its status with conditions."""
    kubelet = EventRecorder(client, component="kubelet", host=node)
    kubelet.start()
    acknowledged = format_time(datetime.now(UTC))
    kubelet.event(created, "Normal", "Pulled", 'Container image "nginx" already present')
    kubelet.event(created, "Normal", "Created", "Created container: web")
    kubelet.event(created, "Normal", "Started", "Started container web")
    await kubelet.flush()
    ready = format_time(datetime.now(UTC))
    name = created["metadata"]["name"]
    status = {
        "phase": "Running",
        "startTime": acknowledged,
        "podIP": "127.77.0.5",
        "conditions": [
            condition("PodReadyToStartContainers", acknowledged),
            condition("Initialized", acknowledged),
            condition("ContainersReady", ready),
            condition("Ready", ready),
            condition("PodScheduled", acknowledged),
        ],
        "containerStatuses": [
            {"name": "web", "ready": True, "restartCount": 0, "image": "nginx", "imageID": "",
             "state": {"running": {"startedAt": ready}}},
        ],
    }  # fmt: skip
    await client.patch(PODS, name, {"status": status}, namespace="default", subresource="status")


async def test_a_pending_then_bound_pod_shows_every_step_in_lifecycle_order(
    apiserver_process: StartApiServer,
) -> None:
    api = apiserver_process(store="memory://")
    async with ApiClient(server=api.url) as client:
        web = container(
            "web",
            readinessProbe={"httpGet": {"path": "/", "port": 80}},
            ports=[{"containerPort": 80}],
        )
        volume = {"name": "scratch", "emptyDir": {}}
        body = pod("traced", web, nodeSelector={"zz": "cxk"}, volumes=[volume])
        created = await client.create(PODS, body, namespace="default")
        scheduler = EventRecorder(client, component="default-scheduler")
        scheduler.start()
        scheduler.event(
            created,
            "Warning",
            "FailedScheduling",
            "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
        )
        await client.bind(namespace="default", pod="traced", node="node1")
        bound = await client.get(PODS, "traced", namespace="default")
        scheduler.event(
            bound, "Normal", "Scheduled", "Successfully assigned default/traced to node1"
        )
        await scheduler.flush()
        await run_as_the_kubelet(client, bound, "node1")

        final = await client.get(PODS, "traced", namespace="default")
        events = (await client.list(EVENTS, namespace="default"))["items"]

    assert all(len(e["eventTime"]) == len("2026-01-01T00:00:00.000000Z") for e in events)
    steps = pod_trace(final, events)
    assert [s.step for s in steps] == [
        "created",
        "not schedulable",
        "scheduled",
        *KUBELET_STEPS,
    ]
    assert [s.component for s in steps[:3]] == ["apiserver", "scheduler", "scheduler"]
    assert {s.component for s in steps[3:]} == {"kubelet"}
    assert_monotonic(steps)
    by_step = {s.step: s for s in steps}
    assert "0/3 nodes are available" in by_step["not schedulable"].detail
    scheduled = by_step["scheduled"].detail
    assert "Successfully assigned default/traced to node1" in scheduled
    assert f"resourceVersion {bound['metadata']['resourceVersion']}" in scheduled
    assert by_step["created"].detail == "by kubelite"  # the client's user agent, its field manager
    assert "scratch" in by_step["volumes ready"].detail
    assert by_step["sandbox ready"].detail == "pod IP 127.77.0.5"
    assert by_step["probes passed"].detail == "readiness of web"
    # the scheduler's Event is precise, and a step known to the second follows it
    assert by_step["seen by kubelet"].at >= by_step["scheduled"].at
    as_json = steps[2].to_json()
    assert set(as_json) == {"step", "component", "time", "offsetSeconds", "detail"}
    assert parse_time(as_json["time"]) == steps[2].at


async def test_a_replica_sets_scale_up_shows_each_pod_created_scheduled_and_started(
    apiserver_process: StartApiServer,
) -> None:
    api = apiserver_process(store="memory://")
    async with ApiClient(server=api.url) as client:
        rs = await client.create(
            REPLICASETS, replica_set("web", replicas=1, labels={"app": "web"}), namespace="default"
        )
        await client.patch(
            REPLICASETS, "web", {"spec": {"replicas": 2}}, namespace="default", subresource="scale"
        )
        controller = EventRecorder(client, component="replicaset-controller")
        scheduler = EventRecorder(client, component="default-scheduler")
        controller.start()
        scheduler.start()
        for name, node in (("web-a", "node1"), ("web-b", "node2")):
            body = controlled_by(pod(name, labels={"app": "web"}), rs)
            await client.create(PODS, body, namespace="default")
            controller.event(rs, "Normal", "SuccessfulCreate", f"Created pod: {name}")
            await client.bind(namespace="default", pod=name, node=node)
            bound = await client.get(PODS, name, namespace="default")
            scheduler.event(bound, "Normal", "Scheduled", f"Successfully assigned default/{name} to {node}")  # fmt: skip
            await controller.flush()
            await scheduler.flush()
        rs = await client.get(REPLICASETS, "web", namespace="default")
        pods = (await client.list(PODS, namespace="default"))["items"]
        events = (await client.list(EVENTS, namespace="default"))["items"]

    steps = replicaset_trace(rs, pods, events)
    assert_monotonic(steps)
    assert steps[0].step == "created"
    assert [s.step for s in steps if s.step.startswith("pod ")] == [
        "pod created",
        "pod scheduled",
        "pod created",
        "pod scheduled",
    ]
    named = [s.detail.split(":", 1)[0] for s in steps if s.step.startswith("pod ")]
    assert named == ["web-a", "web-a", "web-b", "web-b"]
    scaled = [s for s in steps if s.step == "scaled"]
    assert len(scaled) == 1 and "(now 2)" in scaled[0].detail and "/scale" in scaled[0].detail


async def test_a_pod_whose_created_event_was_combined_is_seen_from_its_managed_fields(
    apiserver_process: StartApiServer,
) -> None:
    """From an owner's tenth pod on, the recorder folds SuccessfulCreate into one "(combined from
    similar events)" Event that names only the latest pod and carries the first one's time: the
    trace does not take it for that pod's creation, it reads the controller-manager's entry in
    the pod's managedFields instead."""
    api = apiserver_process(store="memory://")
    as_controller = ClientConfig(server=api.url, user_agent="kubelite-controller-manager")
    async with ApiClient(as_controller) as client:
        rs = await client.create(
            REPLICASETS, replica_set("web", replicas=11, labels={"app": "web"}), namespace="default"
        )
        controller = EventRecorder(client, component="replicaset-controller")
        controller.start()
        names = [f"web-{i}" for i in range(11)]
        for name in names:
            await client.create(
                PODS, controlled_by(pod(name, labels={"app": "web"}), rs), namespace="default"
            )
            controller.event(rs, "Normal", "SuccessfulCreate", f"Created pod: {name}")
            await controller.flush()
        pods = {
            p["metadata"]["name"]: p
            for p in (await client.list(PODS, namespace="default"))["items"]
        }
        events = (await client.list(EVENTS, namespace="default"))["items"]

    combined = [e for e in events if str(e.get("message")).startswith("(combined from similar")]
    assert combined and combined[0]["message"].endswith(": web-10")
    first = {s.step: s for s in pod_trace(pods["web-0"], events, [rs])}
    assert first["seen by controller-manager"].detail == "ReplicaSet web: Created pod: web-0"
    last = {s.step: s for s in pod_trace(pods["web-10"], events, [rs])}
    seen = last["seen by controller-manager"]
    assert seen.component == "controller-manager" and "combined" in seen.detail
    assert seen.at >= last["created"].at


def test_a_step_known_to_the_second_is_placed_after_the_precise_steps_that_precede_it() -> None:
    """The kubelet's startTime (whole seconds) in the same second as the precise Scheduled
    Event: it cannot have come before the binding, so it is placed at the binding's instant,
    not at the start of its second."""
    second = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)
    scheduled_at = second + timedelta(microseconds=420_000)
    traced: Obj = {
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "u1",
                     "creationTimestamp": format_time(second)},
        "spec": {"nodeName": "node1", "containers": [{"name": "main"}]},
        "status": {"startTime": format_time(second)},
    }  # fmt: skip
    scheduled = scheduled_event("p", "u1", scheduled_at)
    steps = pod_trace(traced, [scheduled])
    assert [(s.step, s.offset) for s in steps] == [
        ("created", 0.0),
        ("scheduled", 0.42),
        ("seen by kubelet", 0.42),
    ]


def scheduled_event(pod: str, uid: str, at: datetime) -> Obj:
    """The scheduler's ``Scheduled`` Event for ``default/<pod>`` on node1, at microseconds."""
    return {
        "involvedObject": {"kind": "Pod", "name": pod, "namespace": "default", "uid": uid},
        "reason": "Scheduled",
        "message": f"Successfully assigned default/{pod} to node1",
        "reportingComponent": "default-scheduler",
        "eventTime": at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    }


def assert_monotonic(steps: list[TraceStep]) -> None:
    offsets = [s.offset for s in steps]
    assert offsets == sorted(offsets) and offsets[0] == 0.0, offsets
    assert [s.at for s in steps] == sorted(s.at for s in steps)


def test_a_creation_reported_after_the_pods_binding_is_placed_before_it() -> None:
    """The controller-manager records SuccessfulCreate once its create has returned; the
    scheduler may bind the pod in between. A pod exists before it is scheduled, so the trace
    puts "pod created" no later than "pod scheduled"."""
    second = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)
    micro = "%Y-%m-%dT%H:%M:%S.%fZ"
    rs: Obj = {
        "kind": "ReplicaSet",
        "metadata": {"name": "web", "namespace": "default", "uid": "rs1",
                     "creationTimestamp": format_time(second)},
    }  # fmt: skip
    traced: Obj = {
        "kind": "Pod",
        "metadata": {"name": "web-a", "namespace": "default", "uid": "p1",
                     "creationTimestamp": format_time(second),
                     "ownerReferences": [{"kind": "ReplicaSet", "name": "web", "uid": "rs1"}]},
        "spec": {"nodeName": "node1", "containers": [{"name": "main"}]},
    }  # fmt: skip
    scheduled = scheduled_event("web-a", "p1", second + timedelta(microseconds=300_000))
    made: Obj = {
        "involvedObject": {
            "kind": "ReplicaSet",
            "name": "web",
            "namespace": "default",
            "uid": "rs1",
        },
        "reason": "SuccessfulCreate",
        "message": "Created pod: web-a",
        "reportingComponent": "replicaset-controller",
        "eventTime": (second + timedelta(microseconds=450_000)).strftime(micro),
    }
    steps = replicaset_trace(rs, [traced], [made, scheduled])
    assert [s.step for s in steps if s.step.startswith("pod ")] == ["pod created", "pod scheduled"]
    assert_monotonic(steps)
