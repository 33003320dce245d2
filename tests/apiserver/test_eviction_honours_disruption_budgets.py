"""``pods/eviction`` honours PodDisruptionBudgets as Kubernetes' eviction REST does.

The disruption controller that fills a budget's status comes later, so each test writes the
status it needs through ``poddisruptionbudgets/{name}/status`` itself.
"""

from __future__ import annotations

from typing import Any

from tests.apiserver.conftest import Api
from tests.factories import pod, pod_disruption_budget

Obj = dict[str, Any]

PODS = "/api/v1/namespaces/default/pods"
PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
VIOLATES = "Cannot evict pod as it would violate the pod's disruption budget."


async def patched(api: Api, path: str, doc: Obj) -> Obj:
    status, out = await api.patch(path, doc)
    assert status == 200, (status, out)
    assert isinstance(out, dict)
    return out


async def running_pod(api: Api, name: str, *, ready: bool = True, **labels: str) -> Obj:
    """A pod bound to node1 and reported Running (Ready or not), labelled ``labels``."""
    await api.ok("POST", PODS, pod(name, labels=labels or {"app": "web"}, nodeName="node1"))
    condition = {"type": "Ready", "status": "True" if ready else "False"}
    status = {"phase": "Running", "conditions": [condition]}
    return await patched(api, f"{PODS}/{name}/status", {"status": status})


async def budget(api: Api, name: str = "web", *, allowed: int, **status: Any) -> Obj:
    """A budget over ``app=web`` whose status the disruption controller would have written."""
    await api.ok("POST", PDBS, pod_disruption_budget(name, selector={"app": "web"}, minAvailable=1))
    observed = {"observedGeneration": 1, "disruptionsAllowed": allowed, "currentHealthy": 1}
    observed |= {"desiredHealthy": 1, "expectedPods": 1} | status
    return await patched(api, f"{PDBS}/{name}/status", {"status": observed})


async def evict(api: Api, name: str) -> tuple[int, Obj]:
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}
    status, body = await api.post(f"{PODS}/{name}/eviction", eviction)
    assert isinstance(body, dict)
    return status, body


async def is_evicted(api: Api, name: str) -> bool:
    """Gone, or (bound to a node) marked for graceful deletion."""
    status, got = await api.get(f"{PODS}/{name}")
    return status == 404 or bool(got["metadata"].get("deletionTimestamp"))


async def test_no_disruptions_allowed_is_429_and_the_pod_stays(api: Api) -> None:
    await running_pod(api, "web-0")
    await budget(api, allowed=0)
    status, body = await evict(api, "web-0")
    assert (status, body["reason"], body["message"]) == (429, "TooManyRequests", VIOLATES)
    assert body["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget web needs 1 healthy pods and has 1 currently",
        }
    ]
    assert not await is_evicted(api, "web-0")


async def test_an_allowed_disruption_is_spent_and_the_pod_recorded(api: Api) -> None:
    await running_pod(api, "web-0")
    await budget(api, allowed=1)
    status, body = await evict(api, "web-0")
    assert (status, body["status"]) == (201, "Success")
    assert await is_evicted(api, "web-0")
    spent = (await api.ok("GET", f"{PDBS}/web"))["status"]
    assert spent["disruptionsAllowed"] == 0
    assert list(spent["disruptedPods"]) == ["web-0"]
    [condition] = spent["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "DisruptionAllowed",
        "False",
        "InsufficientPods",
    )

    await running_pod(api, "web-1")
    status, body = await evict(api, "web-1")  # the budget is spent now
    assert (status, body["message"]) == (429, VIOLATES)


async def test_a_budget_the_controller_has_not_seen_yet_is_429(api: Api) -> None:
    await running_pod(api, "web-0")
    await budget(api, allowed=1, observedGeneration=0)
    status, body = await evict(api, "web-0")
    assert (status, body["message"], body["details"]["retryAfterSeconds"]) == (429, VIOLATES, 10)
    assert body["details"]["causes"][0]["message"] == (
        "The disruption budget web is still being processed by the server."
    )


async def test_two_budgets_over_one_pod_are_refused(api: Api) -> None:
    await running_pod(api, "web-0")
    await budget(api, "first", allowed=1)
    await budget(api, "second", allowed=1)
    status, body = await evict(api, "web-0")
    assert (status, body["status"], body["code"]) == (500, "Failure", 500)
    assert body["message"] == (
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
        "not support."
    )
    assert not await is_evicted(api, "web-0")


async def test_pods_no_budget_covers_are_evicted(api: Api) -> None:
    await running_pod(api, "other", app="other")
    await budget(api, allowed=0)
    status, _ = await evict(api, "other")
    assert status == 201 and await is_evicted(api, "other")


async def test_pods_that_disrupt_nothing_more_by_going_ignore_the_budget(api: Api) -> None:
    await budget(api, allowed=0)
    await api.ok("POST", PODS, pod("pending", labels={"app": "web"}))  # never ran
    status, _ = await evict(api, "pending")
    assert status == 201 and await is_evicted(api, "pending")
    # not Ready while the budget is met (IfHealthyBudget, the default)
    await running_pod(api, "unready", ready=False)
    status, _ = await evict(api, "unready")
    assert status == 201 and await is_evicted(api, "unready")


async def test_unhealthy_pods_under_a_broken_budget_follow_its_policy(api: Api) -> None:
    await running_pod(api, "unready", ready=False)
    await budget(api, allowed=0, currentHealthy=0)  # broken: 0 healthy of 1 desired
    status, _ = await evict(api, "unready")
    assert status == 429
    await patched(api, f"{PDBS}/web", {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}})
    status, _ = await evict(api, "unready")
    assert status == 201 and await is_evicted(api, "unready")


async def test_a_dry_run_eviction_writes_nothing(api: Api) -> None:
    await running_pod(api, "web-0")
    await budget(api, allowed=1)
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-0"}}
    status, _ = await api.post(f"{PODS}/web-0/eviction?dryRun=All", eviction)
    assert status == 201
    assert not await is_evicted(api, "web-0")
    assert (await api.ok("GET", f"{PDBS}/web"))["status"]["disruptionsAllowed"] == 1
