"""Roles and bindings are validated as Kubernetes validates them (``pkg/apis/rbac/validation``),
with its messages, by a real apiserver process: rules need verbs, resource rules need API groups
and resources, non-resource URLs belong only to ClusterRoles and never beside resources, a
binding's roleRef names a Role or ClusterRole of the rbac group and never changes, subjects are
Users, Groups or ServiceAccounts with their apiGroup (defaulted for users and groups) and a
ClusterRoleBinding's service account names its namespace."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from kubelite.testing import ComponentProcess
from tests.factories import policy_rule, role, role_binding

pytestmark = pytest.mark.e2e

RBAC = "/apis/rbac.authorization.k8s.io/v1"
GROUP = "rbac.authorization.k8s.io"
ROLES = f"{RBAC}/namespaces/default/roles"
CLUSTERROLES = f"{RBAC}/clusterroles"
ROLEBINDINGS = f"{RBAC}/namespaces/default/rolebindings"
CLUSTERROLEBINDINGS = f"{RBAC}/clusterrolebindings"


class Http:
    def __init__(self, base: str, session: aiohttp.ClientSession) -> None:
        self.base, self.session = base, session

    async def send(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        async with self.session.request(method, self.base + path, json=body) as resp:
            return resp.status, await resp.json()

    async def created(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        status, obj = await self.send("POST", path, body)
        assert status == 201, obj
        return dict(obj)

    async def refused(self, path: str, body: dict[str, Any], *, method: str = "POST") -> str:
        """The 422 Invalid answer's message."""
        status, obj = await self.send(method, path, body)
        assert status == 422, obj
        assert obj["reason"] == "Invalid"
        return str(obj["message"])


@pytest.fixture
async def http(kubelite_apiserver: ComponentProcess) -> AsyncIterator[Http]:
    async with aiohttp.ClientSession() as session:
        yield Http(kubelite_apiserver.url, session)


def subject(kind: str, name: str, **extra: str) -> dict[str, str]:
    return {"kind": kind, "name": name, **extra}


def binding(called: str, *subjects: dict[str, str], cluster: bool = False, **ref: str) -> Any:
    """A binding of ``view`` to ``subjects``; ``ref`` overrides roleRef fields."""
    body = role_binding(called, role="view", role_kind="ClusterRole", user="x", cluster=cluster)
    body["roleRef"].update(ref)
    body["subjects"] = list(subjects)
    return body


async def test_rules_need_verbs_groups_and_resources(http: Http) -> None:
    message = await http.refused(ROLES, role("r", {"apiGroups": [""], "resources": ["pods"]}))
    assert message == (
        'Role.rbac.authorization.k8s.io "r" is invalid: '
        "rules[0].verbs: Required value: verbs must contain at least one value"
    )
    message = await http.refused(ROLES, role("r", {"verbs": ["get"]}))
    assert message == (
        'Role.rbac.authorization.k8s.io "r" is invalid: ['
        "rules[0].apiGroups: Required value: resource rules must supply at least one api group, "
        "rules[0].resources: Required value: resource rules must supply at least one resource]"
    )
    named = policy_rule(["get"], ["pods", "secrets"]) | {"resourceNames": ["a"]}
    message = await http.refused(ROLES, role("r", named))
    assert message.endswith(
        "rules[0].resourceNames: Required value: resource names cannot apply to multiple resources"
    )
    await http.created(ROLES, role("r", policy_rule(["get"], ["pods"]) | {"resourceNames": ["a"]}))


async def test_non_resource_urls_only_on_cluster_roles_and_alone(http: Http) -> None:
    urls = {"verbs": ["get"], "nonResourceURLs": ["/healthz", "/logs/*"]}
    message = await http.refused(ROLES, role("urls", urls))
    assert message == (
        'Role.rbac.authorization.k8s.io "urls" is invalid: rules[0].nonResourceURLs: '
        'Invalid value: []string{"/healthz", "/logs/*"}: '
        "namespaced rules cannot apply to non-resource URLs"
    )
    mixed = urls | {"resources": ["pods"]}
    message = await http.refused(CLUSTERROLES, role("mixed", mixed, cluster=True))
    assert message == (
        'ClusterRole.rbac.authorization.k8s.io "mixed" is invalid: rules[0].nonResourceURLs: '
        'Invalid value: []string{"/healthz", "/logs/*"}: '
        "rules cannot apply to both regular resources and non-resource URLs"
    )
    created = await http.created(CLUSTERROLES, role("system:custom:urls", urls, cluster=True))
    assert created["rules"] == [urls]
    message = await http.refused(CLUSTERROLES, role("50%", urls, cluster=True))
    assert message == (
        'ClusterRole.rbac.authorization.k8s.io "50%" is invalid: '
        "metadata.name: Invalid value: \"50%\": may not contain '%'"
    )


async def test_role_refs_name_a_role_of_the_rbac_group(http: Http) -> None:
    message = await http.refused(ROLEBINDINGS, binding("b", subject("User", "a"), kind="Pod"))
    assert message == (
        'RoleBinding.rbac.authorization.k8s.io "b" is invalid: '
        'roleRef.kind: Unsupported value: "Pod": supported values: "Role", "ClusterRole"'
    )
    message = await http.refused(
        CLUSTERROLEBINDINGS, binding("b", subject("User", "a"), cluster=True, kind="Role")
    )
    assert message == (
        'ClusterRoleBinding.rbac.authorization.k8s.io "b" is invalid: '
        'roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"'
    )
    message = await http.refused(
        ROLEBINDINGS, binding("b", subject("User", "a"), apiGroup="example.com", name="")
    )
    assert message == (
        'RoleBinding.rbac.authorization.k8s.io "b" is invalid: ['
        'roleRef.apiGroup: Unsupported value: "example.com": supported values: '
        '"rbac.authorization.k8s.io", roleRef.name: Required value]'
    )
    no_ref = binding("b", subject("User", "a"))
    del no_ref["roleRef"]
    message = await http.refused(ROLEBINDINGS, no_ref)
    assert (
        message == 'RoleBinding.rbac.authorization.k8s.io "b" is invalid: roleRef: Required value'
    )


async def test_subjects_are_users_groups_or_service_accounts(http: Http) -> None:
    made = await http.created(
        ROLEBINDINGS,
        binding(
            "defaulted",
            subject("User", "alice"),
            subject("Group", "devs"),
            subject("ServiceAccount", "robot"),
        ),
    )
    assert made["subjects"] == [
        {"kind": "User", "name": "alice", "apiGroup": GROUP},
        {"kind": "Group", "name": "devs", "apiGroup": GROUP},
        {"kind": "ServiceAccount", "name": "robot"},
    ]
    message = await http.refused(
        CLUSTERROLEBINDINGS,
        binding(
            "b",
            subject("ServiceAccount", "robot", apiGroup=GROUP),
            subject("Robot", "r2"),
            subject("User", "u", apiGroup="example.com"),
            cluster=True,
        ),
    )
    assert message == (
        'ClusterRoleBinding.rbac.authorization.k8s.io "b" is invalid: ['
        'subjects[0].apiGroup: Unsupported value: "rbac.authorization.k8s.io": '
        'supported values: "", '
        "subjects[0].namespace: Required value, "
        'subjects[1].kind: Unsupported value: "Robot": supported values: '
        '"ServiceAccount", "User", "Group", '
        'subjects[2].apiGroup: Unsupported value: "example.com": supported values: '
        '"rbac.authorization.k8s.io"]'
    )
    await http.created(
        CLUSTERROLEBINDINGS,
        binding("robot-views", subject("ServiceAccount", "robot", namespace="ci"), cluster=True),
    )


async def test_a_bindings_role_ref_cannot_change(http: Http) -> None:
    made = await http.created(ROLEBINDINGS, binding("fixed", subject("User", "alice")))
    path = f"{ROLEBINDINGS}/fixed"
    changed = made | {"roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "edit"}}
    message = await http.refused(path, changed, method="PUT")
    assert message == (
        'RoleBinding.rbac.authorization.k8s.io "fixed" is invalid: roleRef: Invalid value: '
        'rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"ClusterRole", Name:"edit"}: '
        "cannot change roleRef"
    )
    more = made | {"subjects": [*made["subjects"], {"kind": "Group", "name": "devs"}]}
    status, updated = await http.send("PUT", path, more)
    assert status == 200, updated
    assert updated["subjects"][-1] == {"kind": "Group", "name": "devs", "apiGroup": GROUP}
