"""The default FlowSchemas and PriorityLevelConfigurations: every start creates the missing
ones and puts back the spec of those annotated ``apf.kubernetes.io/autoupdate-spec: "true"``;
one whose annotation says ``"false"`` keeps the operator's edit (Kubernetes' rule).

The start is ``ensure_flowcontrol_defaults`` run again on the running server's context, the
call the apiserver's start makes; the objects are read back from the server.
"""

from __future__ import annotations

from typing import Any

from services.apiserver.context import CONTEXT
from services.apiserver.flowcontrol_bootstrap import (
    AUTOUPDATE_ANNOTATION,
    FLOW_SCHEMAS,
    PRIORITY_LEVELS,
    ensure_flowcontrol_defaults,
)
from tests.flowcontrol.conftest import Cluster

API = "/apis/flowcontrol.apiserver.k8s.io/v1"
LEVELS = f"{API}/prioritylevelconfigurations"
SCHEMAS = f"{API}/flowschemas"


async def test_a_restart_restores_edited_defaults_and_recreates_deleted_ones(
    start_cluster: Any,
) -> None:
    cluster: Cluster = await start_cluster()
    for path, table in ((LEVELS, PRIORITY_LEVELS), (SCHEMAS, FLOW_SCHEMAS)):
        listed = await cluster.admin("GET", path)
        assert {o["metadata"]["name"] for o in listed["items"]} == set(table)
        for obj in listed["items"]:
            assert obj["metadata"]["annotations"][AUTOUPDATE_ANNOTATION] == "true"

    shares = {"spec": {"limited": {"nominalConcurrencyShares": 7}}}
    await cluster.admin("PATCH", f"{LEVELS}/workload-low", shares)
    kept = {"metadata": {"annotations": {AUTOUPDATE_ANNOTATION: "false"}}, **shares}
    await cluster.admin("PATCH", f"{LEVELS}/global-default", kept)
    await cluster.admin("DELETE", f"{SCHEMAS}/probes")

    await ensure_flowcontrol_defaults(cluster.app[CONTEXT])

    restored = await cluster.admin("GET", f"{LEVELS}/workload-low")
    assert restored["spec"]["limited"]["nominalConcurrencyShares"] == 100
    untouched = await cluster.admin("GET", f"{LEVELS}/global-default")
    assert untouched["spec"]["limited"]["nominalConcurrencyShares"] == 7
    probes = await cluster.admin("GET", f"{SCHEMAS}/probes")
    assert probes["spec"]["priorityLevelConfiguration"] == {"name": "exempt"}
