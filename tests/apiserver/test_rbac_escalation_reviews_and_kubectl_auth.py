"""RBAC's escalation check and the review APIs, through HTTP and the real kubectl.

``alice`` is reached by impersonation from the insecure port's superuser, so the escalation
check and the self-reviews see ``alice`` as the requesting user.
"""

from __future__ import annotations

import asyncio

from kubelite.testing.waiting import apoll_until
from tests.apiserver.conftest import Api
from tests.factories import policy_rule, role, role_binding

ALICE = {"Impersonate-User": "alice"}
RBAC = "/apis/rbac.authorization.k8s.io/v1"


async def grant_alice(api: Api, *rules: dict[str, object]) -> None:
    """Bind ``rules`` (and ``list roles``, to see the binding in force) to alice in default."""
    marker = policy_rule(["list"], ["roles"], groups=("rbac.authorization.k8s.io",))
    await api.ok("POST", f"{RBAC}/namespaces/default/roles", role("alice", *rules, marker))
    await api.ok(
        "POST",
        f"{RBAC}/namespaces/default/rolebindings",
        role_binding("alice", role="alice", user="alice"),
    )

    async def in_force() -> bool:
        status, _ = await api.get(f"{RBAC}/namespaces/default/roles", headers=ALICE)
        return status == 200

    await apoll_until(in_force, what="alice's binding in force")


async def test_a_role_granting_more_than_the_writer_holds_is_refused(api: Api) -> None:
    await grant_alice(
        api,
        policy_rule(
            ["create", "get", "list"],
            ["roles", "rolebindings"],
            groups=("rbac.authorization.k8s.io",),
        ),
        policy_rule(["get"], ["pods"]),
    )
    roles = f"{RBAC}/namespaces/default/roles"
    status, _ = await api.post(roles, role("reader", policy_rule(["get"], ["pods"])), headers=ALICE)
    assert status == 201
    status, body = await api.post(
        roles, role("deleter", policy_rule(["get", "delete"], ["pods"])), headers=ALICE
    )
    assert status == 403
    assert body["message"] == (
        'roles.rbac.authorization.k8s.io "deleter" is forbidden: user "alice" '
        '(groups=["system:authenticated"]) is attempting to grant RBAC permissions not '
        'currently held:\n{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}'
    )
    bindings = f"{RBAC}/namespaces/default/rolebindings"
    status, body = await api.post(
        bindings,
        role_binding("bob-edit", role="cluster-admin", role_kind="ClusterRole", user="bob"),
        headers=ALICE,
    )
    assert status == 403, body
    status, _ = await api.post(
        bindings, role_binding("bob-reads", role="reader", user="bob"), headers=ALICE
    )
    assert status == 201


async def test_self_reviews_answer_for_the_requesting_user(api: Api) -> None:
    status, body = await api.post(
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        headers=ALICE,
    )
    assert status == 201
    assert body["status"]["userInfo"] == {"username": "alice", "groups": ["system:authenticated"]}
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "alice",
            "resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "default"},
        },
    }
    status, body = await api.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    assert (status, body["status"]) == (201, {"allowed": False})
    await grant_alice(api, policy_rule(["get"], ["pods"]))
    status, body = await api.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    assert body["status"]["allowed"] is True
    assert (
        body["status"]["reason"]
        == 'RBAC: allowed by RoleBinding "alice/default" of Role "alice" to User "alice"'
    )


async def kubectl(api: Api, *args: str) -> tuple[int, str]:
    server = f"http://{api.client.server.host}:{api.client.server.port}"
    proc = await asyncio.create_subprocess_exec(
        "kubectl",
        "--server",
        server,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


async def test_kubectl_auth_can_i_and_whoami(api: Api) -> None:
    assert await kubectl(api, "auth", "can-i", "create", "pods", "--as", "alice") == (1, "no\n")
    await grant_alice(api, policy_rule(["create", "get"], ["pods"]))
    assert await kubectl(api, "auth", "can-i", "create", "pods", "--as", "alice") == (0, "yes\n")
    code, out = await kubectl(api, "auth", "can-i", "--list", "--as", "alice", "-n", "default")
    assert code == 0
    assert any(
        line.split()[:1] == ["pods"] and "[create get]" in line for line in out.splitlines()
    ), out
    code, out = await kubectl(api, "auth", "whoami", "--as", "alice", "-o", "json")
    assert code == 0, out
    assert '"username": "alice"' in out
