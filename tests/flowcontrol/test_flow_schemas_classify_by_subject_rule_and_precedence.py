"""Kubernetes' default FlowSchemas, as the apiserver writes them, classify each identity the
way Kubernetes' do: the first matching schema by precedence (then name), its rules' subjects,
verbs, groups, resources, namespaces, cluster scope and non-resource URLs, and its flow
distinguisher. The schemas are the real default objects (``FLOW_SCHEMAS``), and each request
is read off a method and path by the apiserver's own ``request_info``.
"""

from __future__ import annotations

from typing import Any

import pytest

from services.apiserver.flowcontrol_bootstrap import FLOW_SCHEMAS
from services.apiserver.flowcontrol_matching import classify, precedence_order
from services.apiserver.identity import UserInfo
from services.apiserver.request_info import request_info

Obj = dict[str, Any]

NODE = UserInfo("system:node:node1", groups=("system:nodes", "system:authenticated"))
SCHEDULER = UserInfo("system:kube-scheduler", groups=("system:authenticated",))
CONTROLLERS = UserInfo("system:kube-controller-manager", groups=("system:authenticated",))
ADMIN = UserInfo("admin", groups=("system:masters", "system:authenticated"))
ALICE = UserInfo("alice", groups=("system:authenticated",))
ANONYMOUS = UserInfo("system:anonymous", groups=("system:unauthenticated",))


def account(namespace: str, name: str) -> UserInfo:
    groups = ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")
    return UserInfo(f"system:serviceaccount:{namespace}:{name}", groups=groups)


def schemas(**extra: Obj) -> list[Obj]:
    """The defaults (plus ``extra``) as stored objects, in the order they are tried."""
    objs = [{"metadata": {"name": n}, "spec": s} for n, s in {**FLOW_SCHEMAS, **extra}.items()]
    return precedence_order(objs)


def flow(user: UserInfo, method: str, path: str, **extra: Obj) -> tuple[str, str]:
    match = classify(schemas(**extra), user, request_info(method, path, {}))
    assert match is not None
    return match.schema["metadata"]["name"], match.distinguisher


@pytest.mark.parametrize(
    ("user", "method", "path", "expected"),
    [
        (ADMIN, "POST", "/api/v1/namespaces/default/pods", ("exempt", "")),
        (ANONYMOUS, "GET", "/healthz", ("probes", "")),
        (ALICE, "GET", "/readyz", ("probes", "")),
        (
            NODE,
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node1",
            ("system-node-high", "system:node:node1"),
        ),
        (NODE, "PATCH", "/api/v1/nodes/node1/status", ("system-node-high", "system:node:node1")),
        (NODE, "GET", "/api/v1/nodes/node1", ("system-node-high", "system:node:node1")),
        (NODE, "GET", "/api/v1/namespaces/default/pods", ("system-nodes", "system:node:node1")),
        (NODE, "GET", "/version", ("system-nodes", "system:node:node1")),
        (
            CONTROLLERS,
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager",
            ("system-leader-election", "system:kube-controller-manager"),
        ),
        (
            CONTROLLERS,
            "POST",
            "/api/v1/namespaces/web/pods",
            ("kube-controller-manager", "web"),
        ),
        (SCHEDULER, "POST", "/api/v1/namespaces/web/pods/p/binding", ("kube-scheduler", "web")),
        (SCHEDULER, "GET", "/api/v1/nodes", ("kube-scheduler", "")),
        (
            account("kube-system", "coredns"),
            "GET",
            "/api/v1/services",
            ("kube-system-service-accounts", ""),
        ),
        (
            account("kube-system", "coredns"),
            "GET",
            "/api/v1/namespaces/kube-system/configmaps/coredns-lock",
            ("system-leader-election", "system:serviceaccount:kube-system:coredns"),
        ),
        (
            account("kube-system", "coredns"),
            "PUT",
            "/api/v1/namespaces/dns/configmaps/coredns-lock",
            ("workload-leader-election", "system:serviceaccount:kube-system:coredns"),
        ),
        (
            account("default", "builder"),
            "POST",
            "/api/v1/namespaces/default/configmaps",
            ("service-accounts", "system:serviceaccount:default:builder"),
        ),
        (ALICE, "GET", "/api/v1/namespaces/default/pods", ("global-default", "alice")),
        (ANONYMOUS, "GET", "/version", ("global-default", "system:anonymous")),
    ],
)
def test_default_schemas_classify_like_kubernetes(
    user: UserInfo, method: str, path: str, expected: tuple[str, str]
) -> None:
    assert flow(user, method, path) == expected


def _custom(precedence: int, *rules: Obj, method: str = "ByUser") -> Obj:
    return {
        "priorityLevelConfiguration": {"name": "workload-high"},
        "matchingPrecedence": precedence,
        "distinguisherMethod": {"type": method},
        "rules": list(rules),
    }


def _rule(subjects: list[Obj], **rules: Any) -> Obj:
    return {"subjects": subjects, **rules}


ALICE_SUBJECT = [{"kind": "User", "user": {"name": "alice"}}]


def test_a_lower_precedence_wins_and_ties_go_by_name() -> None:
    everything = _rule(
        ALICE_SUBJECT,
        resourceRules=[
            {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"]}
        ],
    )
    path = "/api/v1/namespaces/default/pods"
    assert flow(ALICE, "GET", path, mine=_custom(50, everything))[0] == "mine"
    assert flow(ALICE, "GET", path, b=_custom(50, everything), a=_custom(50, everything)) == (
        "a",
        "alice",
    )
    assert flow(ALICE, "GET", path, late=_custom(9950, everything))[0] == "global-default"


def test_resource_rules_need_the_namespace_or_cluster_scope() -> None:
    only_web_pods = _rule(
        ALICE_SUBJECT,
        resourceRules=[
            {
                "verbs": ["get", "list"],
                "apiGroups": [""],
                "resources": ["pods"],
                "namespaces": ["web"],
            }
        ],
    )
    custom = {"web-pods": _custom(50, only_web_pods, method="ByNamespace")}
    assert flow(ALICE, "GET", "/api/v1/namespaces/web/pods", **custom) == ("web-pods", "web")
    assert flow(ALICE, "GET", "/api/v1/namespaces/db/pods", **custom)[0] == "global-default"
    assert flow(ALICE, "DELETE", "/api/v1/namespaces/web/pods/p", **custom)[0] == "global-default"
    assert flow(ALICE, "GET", "/api/v1/pods", **custom)[0] == "global-default"  # cluster scope
    assert flow(ALICE, "GET", "/api/v1/namespaces/web/pods/p/log", **custom)[0] == (
        "global-default"  # pods/log is another resource
    )


def test_non_resource_urls_match_exactly_or_under_a_prefix() -> None:
    urls = _rule(
        [{"kind": "Group", "group": {"name": "system:authenticated"}}],
        nonResourceRules=[{"verbs": ["get"], "nonResourceURLs": ["/version", "/apis/*"]}],
    )
    custom = {"discovery": _custom(50, urls)}
    assert flow(ALICE, "GET", "/version", **custom)[0] == "discovery"
    assert flow(ALICE, "GET", "/apis/apps", **custom)[0] == "discovery"
    assert flow(ALICE, "GET", "/versions", **custom)[0] == "global-default"
    assert flow(ALICE, "GET", "/openapi/v2", **custom)[0] == "global-default"


def test_service_account_subjects_match_namespace_and_name() -> None:
    builders = _rule(
        [{"kind": "ServiceAccount", "serviceAccount": {"namespace": "ci", "name": "builder"}}],
        resourceRules=[
            {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"]}
        ],
    )
    custom = {"ci": _custom(50, builders)}
    path = "/api/v1/namespaces/ci/pods"
    assert flow(account("ci", "builder"), "GET", path, **custom)[0] == "ci"
    assert flow(account("ci", "other"), "GET", path, **custom)[0] == "service-accounts"
    assert flow(account("dev", "builder"), "GET", path, **custom)[0] == "service-accounts"
    named_alike = UserInfo("ci:builder", groups=("system:authenticated",))
    assert flow(named_alike, "GET", path, **custom)[0] == "global-default"
