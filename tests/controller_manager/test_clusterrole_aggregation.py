"""The clusterrole-aggregation controller, in a real controller-manager process beside a real
apiserver: the default ``admin``, ``edit`` and ``view`` roles (aggregation rules, no rules of
their own) are filled from the ``system:aggregate-to-*`` roles; a ClusterRole labelled
``aggregate-to-view`` joins ``view`` (and, through ``view``'s own label, ``edit`` and
``admin``) and leaves it when the label goes; a user bound to ``view`` by a RoleBinding can
then list pods. ``alice`` is reached by impersonation from the insecure port's superuser."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from api.rbac import AGGREGATE_TO_LABEL_PREFIX
from kubelite.testing.waiting import Watcher, apoll_until
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import rt
from tests.factories import policy_rule, role, role_binding

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

CLUSTERROLES = rt("rbac.authorization.k8s.io", "ClusterRole")
ROLEBINDINGS = rt("rbac.authorization.k8s.io", "RoleBinding")

WIDGETS = policy_rule(["get", "list"], ["widgets"], groups=("example.com",))


@pytest.fixture
def cm_args() -> tuple[str, ...]:
    return ("--controllers=clusterrole-aggregation",)


def grants(role: dict[str, Any] | None, verb: str, resource: str, group: str = "") -> bool:
    """Some rule of ``role`` names ``verb`` on ``group``/``resource`` explicitly."""
    return any(
        verb in r.get("verbs", [])
        and group in (r.get("apiGroups") or [])
        and resource in (r.get("resources") or [])
        for r in (role or {}).get("rules") or []
    )


async def test_default_roles_are_aggregated_and_follow_labels(cluster: Cluster) -> None:
    client = cluster.client
    async with Watcher(client, CLUSTERROLES) as roles:
        await roles.wait_until(
            lambda _o: (
                grants(roles.get("view"), "get", "pods")
                and grants(roles.get("edit"), "create", "pods")
                and grants(roles.get("edit"), "get", "pods")
                and grants(roles.get("admin"), "create", "roles", "rbac.authorization.k8s.io")
                and grants(roles.get("admin"), "create", "pods")
            ),
            what="admin, edit and view aggregated",
        )
        view = await client.get(CLUSTERROLES, "view")
        assert not grants(view, "create", "pods")
        rules = view["rules"]
        assert len(rules) == len({repr(r) for r in rules}), "rules are deduplicated"

        widget_viewer = role("widget-viewer", WIDGETS, cluster=True)
        widget_viewer["metadata"]["labels"] = {f"{AGGREGATE_TO_LABEL_PREFIX}view": "true"}
        await client.create(CLUSTERROLES, widget_viewer)
        await roles.wait_until(
            lambda _o: all(
                grants(roles.get(name), "list", "widgets", "example.com")
                for name in ("view", "edit", "admin")
            ),
            what="widget-viewer's rule in view, edit and admin",
        )
        view = await client.get(CLUSTERROLES, "view")
        assert view["rules"][: len(rules)] == rules, "a new source's rules come after, in order"

        stored = await client.get(CLUSTERROLES, "widget-viewer")
        stored["metadata"]["labels"] = {}
        await client.update(CLUSTERROLES, stored)
        await roles.wait_until(
            lambda _o: (
                not any(
                    grants(roles.get(name), "list", "widgets", "example.com")
                    for name in ("view", "edit", "admin")
                )
            ),
            what="widget-viewer's rule gone from view, edit and admin",
        )
        view = await client.get(CLUSTERROLES, "view")
        assert view["rules"] == rules


async def test_a_user_bound_to_view_can_list_pods(cluster: Cluster) -> None:
    client = cluster.client
    async with Watcher(client, CLUSTERROLES) as roles:
        await roles.wait_until(
            lambda _o: grants(roles.get("view"), "list", "pods"), what="view aggregated"
        )
    pods = f"{cluster.api.url}/api/v1/namespaces/default/pods"
    alice = {"Impersonate-User": "alice"}
    async with aiohttp.ClientSession() as http:

        async def status() -> int:
            async with http.get(pods, headers=alice) as resp:
                return resp.status

        assert await status() == 403
        binding = role_binding("alice-views", role="view", role_kind="ClusterRole", user="alice")
        await client.create(ROLEBINDINGS, binding, namespace="default")

        async def allowed() -> bool:
            return await status() == 200

        await apoll_until(allowed, what="alice lists pods through view")
        async with http.get(f"{cluster.api.url}/api/v1/pods", headers=alice) as resp:
            assert resp.status == 403, "a RoleBinding grants only its namespace"
