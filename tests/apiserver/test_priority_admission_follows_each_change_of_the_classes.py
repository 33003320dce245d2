"""Priority admission reads the PriorityClasses from a list the apiserver builds once per watch
cache revision (``ApiContext.cached_objects``): each change of the classes — a new default, its
deletion, a value changed through a new class — reaches the next pods, the list is never
stale. Each step is a dry-run create (admission runs, nothing is written), retried until
the watch cache has the write that preceded it."""

from __future__ import annotations

from typing import Any

from kubelite.testing.waiting import apoll_until
from tests.apiserver.conftest import Api
from tests.factories import pod, priority_class

PODS = "/api/v1/namespaces/default/pods"
CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"


async def test_each_change_of_the_classes_reaches_the_next_pod(api: Api) -> None:
    async def dry_run_priority() -> tuple[Any, int]:
        spec = (await api.ok("POST", f"{PODS}?dryRun=All", pod("probe")))["spec"]
        return spec.get("priorityClassName"), spec["priority"]

    async def settles_at(expected: tuple[Any, int]) -> None:
        async def reached() -> bool:
            return await dry_run_priority() == expected

        await apoll_until(reached, what=f"a new pod admitted with {expected}")

    await settles_at((None, 0))
    await api.ok("POST", CLASSES, priority_class("base", 10, globalDefault=True))
    await settles_at(("base", 10))
    await api.ok("DELETE", f"{CLASSES}/base")
    await settles_at((None, 0))
    await api.ok("POST", CLASSES, priority_class("later", 30, globalDefault=True))
    await settles_at(("later", 30))
    created = await api.ok("POST", PODS, pod("real"))
    assert (created["spec"]["priorityClassName"], created["spec"]["priority"]) == ("later", 30)
