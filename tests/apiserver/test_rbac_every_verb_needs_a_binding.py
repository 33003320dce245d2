"""RBAC on a real apiserver: without a binding every verb is 403, with one every verb passes.

The requests are the superuser's, impersonating ``alice`` (``Impersonate-User``; the insecure
port's superuser may impersonate anyone), so RBAC decides for ``alice`` exactly as it would for
an authenticated ``alice`` on the secure port. A binding is in force once the apiserver's watch
cache holds it; the first allowed request is awaited with ``apoll_until``.
"""

from __future__ import annotations

from typing import Any

from kubelite.testing.waiting import apoll_until
from tests.apiserver.conftest import Api
from tests.factories import policy_rule, role, role_binding

ALICE = {"Impersonate-User": "alice"}
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
VERBS = ("create", "get", "list", "watch", "update", "patch", "delete", "deletecollection")


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


async def every_verb(api: Api, headers: dict[str, str]) -> dict[str, int]:
    """The status of one request per verb on configmaps in ``default``, as ``headers`` says."""
    out: dict[str, int] = {}
    out["create"], _ = await api.post(CONFIGMAPS, configmap("mine"), headers=headers)
    out["get"], _ = await api.get(f"{CONFIGMAPS}/seed", headers=headers)
    out["list"], _ = await api.get(CONFIGMAPS, headers=headers)
    out["watch"], _ = await api.get(CONFIGMAPS + "?watch=1&timeoutSeconds=1", headers=headers)
    out["update"], _ = await api.put(
        f"{CONFIGMAPS}/seed", configmap("seed", a="2"), headers=headers
    )
    out["patch"], _ = await api.patch(f"{CONFIGMAPS}/seed", {"data": {"b": "3"}}, headers=headers)
    out["delete"], _ = await api.delete(f"{CONFIGMAPS}/seed", headers=headers)
    out["deletecollection"], _ = await api.delete(CONFIGMAPS, headers=headers)
    return out


async def test_every_verb_is_forbidden_then_allowed_by_a_role_binding(api: Api) -> None:
    await api.ok("POST", CONFIGMAPS, configmap("seed", a="1"))

    denied = await every_verb(api, ALICE)
    assert denied == dict.fromkeys(VERBS, 403)

    await api.ok(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
        role("cm", policy_rule(list(VERBS), ["configmaps"])),
    )
    await api.ok(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        role_binding("alice-cm", role="cm", user="alice"),
    )

    async def allowed() -> bool:
        status, _ = await api.get(CONFIGMAPS, headers=ALICE)
        return status == 200

    await apoll_until(allowed, what="alice's RoleBinding in force")
    granted = await every_verb(api, ALICE)
    assert granted == {
        "create": 201,
        "get": 200,
        "list": 200,
        "watch": 200,
        "update": 200,
        "patch": 200,
        "delete": 200,
        "deletecollection": 200,
    }
    assert sum(1 for s in denied.values() if s == 403) == len(VERBS)


async def test_the_403_is_worded_as_kubernetes_words_it(api: Api) -> None:
    status, body = await api.get(CONFIGMAPS, headers=ALICE)
    assert status == 403
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'configmaps is forbidden: User "alice" cannot list resource "configmaps" '
        'in API group "" in the namespace "default"',
        "reason": "Forbidden",
        "details": {"kind": "configmaps"},
        "code": 403,
    }
    status, body = await api.get(
        "/apis/apps/v1/namespaces/kube-system/deployments/dns", headers=ALICE
    )
    assert body["message"] == (
        'deployments.apps "dns" is forbidden: User "alice" cannot get resource "deployments" '
        'in API group "apps" in the namespace "kube-system"'
    )
    assert body["details"] == {"name": "dns", "group": "apps", "kind": "deployments"}
    status, body = await api.get("/api/v1/nodes/n1/status", headers=ALICE)
    assert body["message"] == (
        'nodes "n1" is forbidden: User "alice" cannot get resource "nodes/status" '
        'in API group "" at the cluster scope'
    )
    status, body = await api.get("/metrics", headers=ALICE)
    assert (status, body["message"]) == (403, 'forbidden: User "alice" cannot get path "/metrics"')


async def test_public_info_and_discovery_are_open_to_authenticated_users(api: Api) -> None:
    for path in ("/healthz", "/version", "/api", "/apis"):
        status, _ = await api.get(path, headers=ALICE)
        assert status == 200, path
