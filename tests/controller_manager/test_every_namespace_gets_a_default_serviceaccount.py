"""The serviceaccount controller, in a real controller-manager process: every Active namespace
has a ``default`` ServiceAccount — the system namespaces from the start, a new namespace as soon
as it exists — and a deleted ``default`` is created again."""

from __future__ import annotations

import pytest

from api.registry import REGISTRY
from kubelite.testing.waiting import Watcher
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import NAMESPACES

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

SERVICEACCOUNTS = REGISTRY.require("", "ServiceAccount")


async def test_new_namespace_gets_default_and_it_comes_back_after_deletion(
    cluster: Cluster,
) -> None:
    client = cluster.client
    async with Watcher(client, SERVICEACCOUNTS) as accounts:
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            key = f"{ns}/default"

            def present(_o: list[dict[str, object]], key: str = key) -> bool:
                return accounts.get(key) is not None

            await accounts.wait_until(present, what=f"serviceaccount {key}")

        await client.create(NAMESPACES, {"metadata": {"name": "team"}})
        await accounts.wait_until(
            lambda _o: accounts.get("team/default") is not None, what="team/default"
        )
        first = await client.get(SERVICEACCOUNTS, "default", namespace="team")
        assert first["metadata"]["name"] == "default"

        await client.delete(SERVICEACCOUNTS, "default", namespace="team")
        uid = first["metadata"]["uid"]
        await accounts.wait_until(
            lambda _o: (
                (accounts.get("team/default") or {}).get("metadata", {}).get("uid")
                not in (None, uid)
            ),
            what="team/default created again",
        )
        again = await client.get(SERVICEACCOUNTS, "default", namespace="team")
        assert again["metadata"]["uid"] != uid
