"""FlowSchemas written through the API classify the requests that follow them: a schema for
``alice`` at precedence 50 sends her requests to ``workload-high`` (the response headers name
it), a later one at 40 for the same user wins over it, and once both are deleted she is back
in ``global-default``. A schema naming a level that does not exist is skipped (Kubernetes
skips dangling schemas) and marked ``Dangling``.
"""

from __future__ import annotations

from typing import Any

from services.apiserver.flowcontrol import FLOW_SCHEMA_UID_HEADER, PRIORITY_LEVEL_UID_HEADER
from tests.flowcontrol.conftest import Cluster

Obj = dict[str, Any]
API = "/apis/flowcontrol.apiserver.k8s.io/v1"


def schema(name: str, *, level: str, precedence: int) -> Obj:
    return {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": name},
        "spec": {
            "priorityLevelConfiguration": {"name": level},
            "matchingPrecedence": precedence,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [
                {
                    "subjects": [{"kind": "User", "user": {"name": "alice"}}],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                }
            ],
        },
    }


async def _as_alice(cluster: Cluster) -> tuple[str, str]:
    """The (schema uid, level uid) of alice's next request."""
    answer = await cluster.call("GET", "/apis", token="alice")
    assert answer.code == 200, answer
    return answer.headers[FLOW_SCHEMA_UID_HEADER], answer.headers[PRIORITY_LEVEL_UID_HEADER]


def _dangling(obj: Obj) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    wanted = {"type": "Dangling", "status": "True", "reason": "NotFound"}.items()
    return any(wanted <= c.items() for c in conditions)


async def _uid(cluster: Cluster, plural: str, name: str) -> str:
    uid: str = (await cluster.admin("GET", f"{API}/{plural}/{name}"))["metadata"]["uid"]
    return uid


async def test_written_schemas_take_effect_and_dangling_ones_are_skipped(
    start_cluster: Any,
) -> None:
    cluster: Cluster = await start_cluster()
    levels = {n: await _uid(cluster, "prioritylevelconfigurations", n) for n in
              ("workload-high", "leader-election", "global-default")}  # fmt: skip
    default = await _uid(cluster, "flowschemas", "global-default")
    assert await _as_alice(cluster) == (default, levels["global-default"])

    high = await cluster.admin(
        "POST", f"{API}/flowschemas", schema("alice", level="workload-high", precedence=50)
    )
    await cluster.cache_holds(high)
    assert await _as_alice(cluster) == (high["metadata"]["uid"], levels["workload-high"])

    first = await cluster.admin(
        "POST", f"{API}/flowschemas", schema("alice-first", level="leader-election", precedence=40)
    )
    await cluster.cache_holds(first)
    assert await _as_alice(cluster) == (first["metadata"]["uid"], levels["leader-election"])

    orphan = await cluster.admin(
        "POST", f"{API}/flowschemas", schema("alice-orphan", level="nowhere", precedence=30)
    )
    await cluster.cache_holds(orphan)
    assert await _as_alice(cluster) == (first["metadata"]["uid"], levels["leader-election"])

    for name in ("alice", "alice-first"):
        await cluster.admin("DELETE", f"{API}/flowschemas/{name}")
    pending, marked = {"alice", "alice-first"}, set()

    def seen(event: Obj) -> bool:
        """Both deletions applied by the cache, and the orphan marked (after its creation)."""
        name = event["object"]["metadata"]["name"]
        if event["type"] == "DELETED":
            pending.discard(name)
        elif name == "alice-orphan" and _dangling(event["object"]):
            marked.add(name)
        return not pending and bool(marked)

    since = orphan["metadata"]["resourceVersion"]
    await cluster.watch_until(f"{API}/flowschemas", since=since, done=seen)
    assert await _as_alice(cluster) == (default, levels["global-default"])
    assert _dangling(await cluster.admin("GET", f"{API}/flowschemas/alice-orphan"))
