"""The default ClusterRoles and ClusterRoleBindings are reconciled at every start, as
kube-apiserver's RBAC bootstrap does: a missing one is created, a role gets back the rules an
operator removed (extra rules stay), a binding gets back its subjects, a binding whose
``roleRef`` was changed (it cannot be updated) is made again, and an object annotated
``rbac.authorization.kubernetes.io/autoupdate: "false"`` keeps the operator's edit.

The start is ``ensure_bootstrap_policy`` run again on the running server's context, the call the
apiserver's start makes; the objects are read back from the server.
"""

from __future__ import annotations

from api.rbac import AUTOUPDATE_ANNOTATION
from services.apiserver.bootstrap_policy import ensure_bootstrap_policy
from services.apiserver.context import CONTEXT
from tests.apiserver.conftest import Api

RBAC = "/apis/rbac.authorization.k8s.io/v1"
ROLES = f"{RBAC}/clusterroles"
BINDINGS = f"{RBAC}/clusterrolebindings"
EXTRA = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}


async def patched(api: Api, path: str, patch: dict[str, object]) -> None:
    status, out = await api.patch(path, patch)
    assert status == 200, out


async def test_a_start_restores_edited_defaults_and_keeps_opted_out_ones(api: Api) -> None:
    basic = await api.ok("GET", f"{ROLES}/system:basic-user")
    wanted_rules = basic["rules"]
    await patched(api, f"{ROLES}/system:basic-user", {"rules": [EXTRA]})
    public = await api.ok("GET", f"{ROLES}/system:public-info-viewer")
    opted_out = {"metadata": {"annotations": {AUTOUPDATE_ANNOTATION: "false"}}, "rules": [EXTRA]}
    await patched(api, f"{ROLES}/system:public-info-viewer", opted_out)
    await patched(api, f"{BINDINGS}/system:discovery", {"subjects": []})
    moved = await api.ok("GET", f"{BINDINGS}/system:monitoring")
    await api.ok("DELETE", f"{BINDINGS}/system:monitoring")
    await api.ok(
        "POST",
        BINDINGS,
        {**moved, "metadata": {"name": "system:monitoring"}, "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}},
    )  # fmt: skip
    await api.ok("DELETE", f"{BINDINGS}/system:basic-user")

    await ensure_bootstrap_policy(api.client.app[CONTEXT])

    restored = await api.ok("GET", f"{ROLES}/system:basic-user")
    assert restored["rules"] == [EXTRA, *wanted_rules]  # added back after the operator's rule
    kept = await api.ok("GET", f"{ROLES}/system:public-info-viewer")
    assert kept["rules"] == [EXTRA] != public["rules"]
    discovery = await api.ok("GET", f"{BINDINGS}/system:discovery")
    assert discovery["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}
    ]
    remade = await api.ok("GET", f"{BINDINGS}/system:monitoring")
    assert remade["roleRef"] == moved["roleRef"]
    assert remade["subjects"] == moved["subjects"]
    assert remade["metadata"]["uid"] != moved["metadata"]["uid"]
    recreated = await api.ok("GET", f"{BINDINGS}/system:basic-user")
    assert recreated["roleRef"]["name"] == "system:basic-user"
