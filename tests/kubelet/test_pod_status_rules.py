"""The kubelet's status rules: phase by restart policy, container states, kubelet conditions."""

from __future__ import annotations

import time

import pytest

from services.kubelet.pod_status import (
    ContainerView,
    build_pod_status,
    container_status,
    pod_phase,
)
from services.kubelet.runtime.base import ContainerRecord


def record(*, attempt: int = 0, exit_code: int | None = None) -> ContainerRecord:
    now = time.time()
    return ContainerRecord(
        container_id=f"process://{attempt:064d}",
        pod_uid="u",
        name="main",
        attempt=attempt,
        image="busybox",
        image_id="busybox@sha256:00",
        started_at=now - 5,
        finished_at=None if exit_code is None else now,
        exit_code=exit_code,
        reason=None if exit_code is None else ("Completed" if exit_code == 0 else "Error"),
    )


def running() -> dict:
    return container_status(
        ContainerView(name="main", image="busybox", current=record(), ready=True)
    )


def exited(code: int) -> dict:
    return container_status(
        ContainerView(name="main", image="busybox", current=record(exit_code=code))
    )


def crash_looping() -> dict:
    return container_status(
        ContainerView(
            name="main",
            image="busybox",
            current=record(attempt=2, exit_code=1),
            previous=record(attempt=1, exit_code=1),
            waiting=("CrashLoopBackOff", "back-off 20s restarting failed container"),
        )
    )


def creating() -> dict:
    return container_status(ContainerView(name="main", image="busybox"))


@pytest.mark.parametrize(
    ("statuses", "policy", "phase"),
    [
        ([creating()], "Always", "Pending"),
        ([running()], "Always", "Running"),
        ([running(), creating()], "Always", "Pending"),
        ([crash_looping()], "Always", "Running"),
        ([exited(0)], "Always", "Running"),
        ([exited(0)], "OnFailure", "Succeeded"),
        ([exited(1)], "OnFailure", "Running"),
        ([exited(0)], "Never", "Succeeded"),
        ([exited(3)], "Never", "Failed"),
        ([exited(0), exited(2)], "Never", "Failed"),
        ([exited(0), running()], "Never", "Running"),
    ],
)
def test_phase_follows_the_kubelet_rules(statuses: list, policy: str, phase: str) -> None:
    assert pod_phase(statuses, restart_policy=policy) == phase


def test_a_terminated_pod_ends_succeeded_or_failed_whatever_its_policy() -> None:
    assert pod_phase([exited(0)], restart_policy="Always", terminal=True) == "Succeeded"
    assert pod_phase([exited(143)], restart_policy="Always", terminal=True) == "Failed"


def test_crash_loop_shows_waiting_with_the_last_termination() -> None:
    st = crash_looping()
    assert st["state"] == {
        "waiting": {
            "reason": "CrashLoopBackOff",
            "message": "back-off 20s restarting failed container",
        }
    }
    assert st["lastState"]["terminated"]["exitCode"] == 1
    assert st["restartCount"] == 2 and not st["ready"] and not st["started"]
    assert st["containerID"] == record(attempt=2).container_id


def test_conditions_keep_transition_times_and_foreign_conditions() -> None:
    old = {
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "True",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            },
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"},
            {"type": "DisruptionTarget", "status": "False", "lastTransitionTime": "x"},
        ],
        "startTime": "2026-01-01T00:00:00Z",
        "qosClass": "BestEffort",
    }
    status = build_pod_status(
        old=old,
        views=[ContainerView(name="main", image="busybox", current=record(), ready=True)],
        restart_policy="Always",
        pod_ip="127.1.0.2",
        host_ip="127.0.0.1",
        sandbox_ready=True,
    )
    by_type = {c["type"]: c for c in status["conditions"]}
    assert [c["type"] for c in status["conditions"]] == [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
        "DisruptionTarget",
    ]
    assert by_type["Ready"]["lastTransitionTime"] == "2026-01-01T00:00:01Z"
    assert by_type["PodScheduled"]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert status["startTime"] == "2026-01-01T00:00:00Z" and status["qosClass"] == "BestEffort"
    assert status["podIPs"] == [{"ip": "127.1.0.2"}] and status["hostIPs"] == [{"ip": "127.0.0.1"}]


def test_unready_containers_are_named_and_completed_pods_say_so() -> None:
    status = build_pod_status(
        old={},
        views=[ContainerView(name="a", image="x"), ContainerView(name="b", image="x")],
        restart_policy="Always",
        pod_ip=None,
        host_ip="127.0.0.1",
        sandbox_ready=False,
    )
    ready = {c["type"]: c for c in status["conditions"]}["Ready"]
    assert ready["reason"] == "ContainersNotReady"
    assert ready["message"] == "containers with unready status: [a b]"
    done = build_pod_status(
        old={},
        views=[ContainerView(name="a", image="x", current=record(exit_code=0))],
        restart_policy="Never",
        pod_ip="127.1.0.3",
        host_ip="127.0.0.1",
        sandbox_ready=True,
    )
    assert done["phase"] == "Succeeded"
    assert {c["type"]: c.get("reason") for c in done["conditions"]}["Ready"] == "PodCompleted"
