"""FlowSchemas written through the API classify the requests that follow them: a schema for
``alice`` at precedence 50 sends her requests to ``workload-high`` (the response headers name
it), a later one at 40 for the same user wins over it, and once both are deleted she is back
in ``global-default``. A schema naming a level that does not exist is skipped (Kubernetes
skips dangling schemas) and marked ``Dangling``.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from kubelite.testing.waiting import apoll_until
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


async def _deletions(events: aiohttp.ClientResponse, names: set[str]) -> None:
    """Read watch events until ``names`` have all been DELETED."""
    pending, buffer = set(names), b""
    while pending:
        chunk = await events.content.readany()
        assert chunk, f"the watch ended before {pending} were deleted"
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            event = json.loads(line)
            if event["type"] == "DELETED":
                pending.discard(event["object"]["metadata"]["name"])


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

    since = orphan["metadata"]["resourceVersion"]
    watch = {"watch": "1", "resourceVersion": since}
    async with cluster.session.get(f"{cluster.plain}{API}/flowschemas", params=watch) as events:
        for name in ("alice", "alice-first"):
            await cluster.admin("DELETE", f"{API}/flowschemas/{name}")
        await _deletions(events, {"alice", "alice-first"})  # the cache has applied them
    assert await _as_alice(cluster) == (default, levels["global-default"])

    async def dangling() -> bool:
        marked = await cluster.admin("GET", f"{API}/flowschemas/alice-orphan")
        conditions = (marked.get("status") or {}).get("conditions") or []
        return {"type": "Dangling", "status": "True", "reason": "NotFound"}.items() <= (
            conditions[0].items() if conditions else set()
        )

    await apoll_until(dangling, what="the orphan schema marked Dangling")
