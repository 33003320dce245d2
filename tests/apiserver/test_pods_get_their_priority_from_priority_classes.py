"""Kubernetes' Priority admission: a new pod's ``spec.priority`` (and ``preemptionPolicy``) comes
from the PriorityClass it names, or from the one global default; an unknown class, or a priority
other than the class's, is refused 403 in Kubernetes' words; only one class may be the default."""

from __future__ import annotations

from tests.apiserver.conftest import Api
from tests.factories import pod, priority_class

PODS = "/api/v1/namespaces/default/pods"
CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"


async def test_a_pod_takes_its_class_value_and_policy(api: Api) -> None:
    await api.ok("POST", CLASSES, priority_class("high", 1000, preemptionPolicy="Never"))
    created = await api.ok("POST", PODS, pod("classy", priorityClassName="high"))
    assert created["spec"]["priority"] == 1000
    assert created["spec"]["preemptionPolicy"] == "Never"
    system = await api.ok("POST", PODS, pod("critical", priorityClassName="system-node-critical"))
    assert system["spec"]["priority"] == 2_000_001_000

    plain = await api.ok("POST", PODS, pod("plain"))
    assert plain["spec"]["priority"] == 0
    assert "priorityClassName" not in plain["spec"]


async def test_unknown_classes_and_other_priorities_are_refused(api: Api) -> None:
    status, body = await api.post(PODS, pod("lost", priorityClassName="missing"))
    assert status == 403, body
    assert body["message"] == (
        'pods "lost" is forbidden: no PriorityClass with name missing was found'
    )
    await api.ok("POST", CLASSES, priority_class("mid", 500))
    status, body = await api.post(PODS, pod("greedy", priorityClassName="mid", priority=7))
    assert status == 403, body
    assert body["message"] == (
        'pods "greedy" is forbidden: the integer value of priority (7) must not be provided in'
        " pod spec; priority admission controller computed 500 from the given PriorityClass name"
    )
    status, body = await api.post(PODS, pod("bold", priority=7))
    assert status == 403 and "computed 0 from the given PriorityClass name" in body["message"]
    status, body = await api.post(
        PODS, pod("meek", priorityClassName="mid", preemptionPolicy="Never")
    )
    assert status == 403, body
    assert body["message"] == (
        'pods "meek" is forbidden: the string value of PreemptionPolicy (Never) must not be'
        " provided in pod spec; priority admission controller computed PreemptLowerPriority"
        " from the given PriorityClass name"
    )


async def test_the_one_global_default_class_applies_to_pods_without_one(api: Api) -> None:
    await api.ok("POST", CLASSES, priority_class("base", 10, globalDefault=True))
    created = await api.ok("POST", PODS, pod("defaulted"))
    assert created["spec"]["priorityClassName"] == "base"
    assert created["spec"]["priority"] == 10
    assert created["spec"]["preemptionPolicy"] == "PreemptLowerPriority"

    status, body = await api.post(CLASSES, priority_class("other", 20, globalDefault=True))
    assert status == 403, body
    assert body["message"] == (
        'priorityclasses.scheduling.k8s.io "other" is forbidden: PriorityClass base is already'
        " marked as default. Only one default can exist"
    )


async def test_updates_keep_one_default_and_a_pods_priority(api: Api) -> None:
    await api.ok("POST", CLASSES, priority_class("first", 1, globalDefault=True))
    second = await api.ok("POST", CLASSES, priority_class("second", 2))
    status, body = await api.put(f"{CLASSES}/second", {**second, "globalDefault": True})
    assert status == 403, body
    assert "PriorityClass first is already marked as default" in body["message"]
    status, body = await api.patch(f"{CLASSES}/second", {"globalDefault": True})
    assert status == 403, body
    status, body = await api.patch(f"{CLASSES}/first", {"description": "still the default"})
    assert status == 200, body

    created = await api.ok("POST", PODS, pod("kept", priorityClassName="second"))
    bare = {**created, "spec": dict(created["spec"])}
    del bare["spec"]["priority"], bare["spec"]["preemptionPolicy"]
    updated = await api.ok("PUT", f"{PODS}/kept", bare)
    assert updated["spec"]["priority"] == 2
    assert updated["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
