"""The default ClusterRoles and ClusterRoleBindings, written at every apiserver start.

Why: with RBAC on, a fresh cluster must already let people and components do their work:
``system:masters`` is ``cluster-admin``; every authenticated user may discover the API and ask
what it may do (``system:discovery``, ``system:basic-user``); anyone, authenticated or not, may
read ``/healthz``, ``/livez``, ``/readyz`` and ``/version`` (``system:public-info-viewer``);
the group ``system:monitoring`` may read ``/metrics`` and the health checks
(``system:monitoring``, as in Kubernetes: a scraper's certificate carries that group);
the scheduler, the controller-manager, kube-proxy, kubelets and the DNS have their roles. This
is Kubernetes' ``bootstrappolicy`` (``ClusterRoles``, ``ClusterRoleBindings``), cut to the
kinds kubelite serves, and its ``storage_rbac`` post-start hook:

* every role and binding here is created if missing, labelled
  ``kubernetes.io/bootstrapping: rbac-defaults`` and annotated
  ``rbac.authorization.kubernetes.io/autoupdate: "true"``;
* an existing one is *reconciled* unless its annotation says ``"false"``: rules it lacks are
  added (extra rules are kept), subjects a binding lacks are added, a binding pointing at
  another role is re-created;
* ``admin``, ``edit`` and ``view`` carry ``aggregationRule``s and no rules of their own: the
  controller-manager's ``clusterrole-aggregation`` controller fills them from the
  ``system:aggregate-to-*`` roles (and any role labelled
  ``rbac.authorization.k8s.io/aggregate-to-<name>: "true"``), as in Kubernetes.

As in Kubernetes, ``system:node`` (``NODE_RULES``) is bound to nobody: the Node authorizer
applies those rules to node identities and narrows the Secrets, ConfigMaps and volumes they
read; reconciliation also removes the subjects ``RETIRED_SUBJECTS`` names (the ``system:nodes``
group earlier kubelite versions bound), so a resumed cluster is narrowed too.

Differences from Kubernetes, on purpose:

* the controller-manager runs as one user, ``system:kube-controller-manager`` — kubelite has
  no ``--use-service-account-credentials`` and no per-controller service accounts — so its role
  holds what every controller needs (Kubernetes' ``system:controller:*`` roles of
  ``controller_policy.go``, folded into one: reads of everything, writes of the workload,
  discovery, coordination and storage kinds, events, the aggregation controller's cluster
  roles);
* ``system:coredns`` (kubeadm's CoreDNS role, bound to ``kube-system/coredns``, the DNS
  component's identity) may also create its own ``kube-system/kube-dns`` Service and get,
  update and delete it by name, and its ``kube-dns`` EndpointSlice likewise: kubelite's DNS
  registers both itself, where kubeadm's addon manifest makes the Service.
"""

from __future__ import annotations

import logging
from typing import Any

from api.errors import Conflict
from api.rbac import AGGREGATE_TO_LABEL_PREFIX, AUTOUPDATE_ANNOTATION, GROUP
from services.apiserver.context import ApiContext
from services.apiserver.rbac import Rule, missing_rules
from services.apiserver.strategy import default_object, prepare_for_create

__all__ = [
    "CLUSTER_ROLES",
    "CLUSTER_ROLE_BINDINGS",
    "NODE_RULES",
    "RETIRED_SUBJECTS",
    "ensure_bootstrap_policy",
]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

READ = ("get", "list", "watch")
WRITE = ("create", "delete", "deletecollection", "patch", "update")
BOOTSTRAP_LABEL = {"kubernetes.io/bootstrapping": "rbac-defaults"}


def _rule(verbs: tuple[str, ...], groups: tuple[str, ...], *resources: str) -> Obj:
    return {"verbs": list(verbs), "apiGroups": list(groups), "resources": list(resources)}


def _named(rule: Obj, *names: str) -> Obj:
    """``rule`` for the objects of these names only (``resourceNames``)."""
    return {**rule, "resourceNames": list(names)}


def _urls(verbs: tuple[str, ...], *urls: str) -> Obj:
    return {"verbs": list(verbs), "nonResourceURLs": list(urls)}


def _role(name: str, rules: list[Obj], *, labels: dict[str, str] | None = None) -> Obj:
    return {"name": name, "rules": rules, "labels": labels or {}}


def _aggregated(name: str, *, labels: dict[str, str] | None = None) -> Obj:
    selector = {"matchLabels": {f"{AGGREGATE_TO_LABEL_PREFIX}{name}": "true"}}
    return {
        "name": name,
        "rules": [],
        "labels": labels or {},
        "aggregationRule": {"clusterRoleSelectors": [selector]},
    }


def _aggregate_to(name: str) -> dict[str, str]:
    return {f"{AGGREGATE_TO_LABEL_PREFIX}{name}": "true"}


_CORE = ("",)
_EVENTS = _rule(("create", "patch", "update"), ("", "events.k8s.io"), "events")

_VIEW_RULES = [
    _rule(
        READ,
        _CORE,
        "configmaps",
        "endpoints",
        "persistentvolumeclaims",
        "persistentvolumeclaims/status",
        "pods",
        "replicationcontrollers",
        "replicationcontrollers/scale",
        "serviceaccounts",
        "services",
        "services/status",
    ),
    _rule(
        READ,
        _CORE,
        "bindings",
        "events",
        "limitranges",
        "namespaces/status",
        "pods/log",
        "pods/status",
        "replicationcontrollers/status",
        "resourcequotas",
        "resourcequotas/status",
    ),
    _rule(READ, _CORE, "namespaces"),
    _rule(READ, ("discovery.k8s.io",), "endpointslices"),
    _rule(
        READ,
        ("apps",),
        "controllerrevisions",
        "daemonsets",
        "daemonsets/status",
        "deployments",
        "deployments/scale",
        "deployments/status",
        "replicasets",
        "replicasets/scale",
        "replicasets/status",
        "statefulsets",
        "statefulsets/scale",
        "statefulsets/status",
    ),
    _rule(READ, ("autoscaling",), "horizontalpodautoscalers", "horizontalpodautoscalers/status"),
    _rule(READ, ("metrics.k8s.io",), "pods", "nodes"),  # metrics-server's aggregated reader
    _rule(READ, ("batch",), "cronjobs", "cronjobs/status", "jobs", "jobs/status"),
    _rule(READ, ("policy",), "poddisruptionbudgets", "poddisruptionbudgets/status"),
]

_EDIT_RULES = [
    _rule(
        READ,
        _CORE,
        "pods/attach",
        "pods/exec",
        "pods/portforward",
        "pods/proxy",
        "secrets",
        "services/proxy",
    ),
    _rule(("impersonate",), _CORE, "serviceaccounts"),
    _rule(WRITE, _CORE, "pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"),
    _rule(("create",), _CORE, "pods/eviction"),
    _rule(
        WRITE,
        _CORE,
        "configmaps",
        "events",
        "persistentvolumeclaims",
        "replicationcontrollers",
        "replicationcontrollers/scale",
        "secrets",
        "serviceaccounts",
        "services",
        "services/proxy",
    ),
    _rule(("create",), _CORE, "serviceaccounts/token"),
    _rule(
        WRITE,
        ("apps",),
        "daemonsets",
        "deployments",
        "deployments/rollback",
        "deployments/scale",
        "replicasets",
        "replicasets/scale",
        "statefulsets",
        "statefulsets/scale",
    ),
    _rule(WRITE, ("autoscaling",), "horizontalpodautoscalers"),
    _rule(WRITE, ("batch",), "cronjobs", "jobs"),
    _rule(WRITE, ("policy",), "poddisruptionbudgets"),
    _rule(WRITE, ("discovery.k8s.io",), "endpointslices"),
]

_ADMIN_RULES = [
    _rule(("create",), ("authorization.k8s.io",), "localsubjectaccessreviews"),
    _rule(READ + WRITE, (GROUP,), "rolebindings", "roles"),
]

_PUBLIC_URLS = ("/healthz", "/livez", "/readyz", "/version", "/version/")

NODE_RULES: list[Obj] = [
    # checking API access (the kubelet's own server asks): these creates change nothing
    _rule(("create",), ("authentication.k8s.io",), "tokenreviews"),
    _rule(
        ("create",), ("authorization.k8s.io",), "localsubjectaccessreviews", "subjectaccessreviews"
    ),
    _rule(READ, _CORE, "services"),  # the containers' Service variables
    # registering its Node and reporting status; NodeRestriction: only its own
    _rule(("create", "get", "list", "watch"), _CORE, "nodes"),
    _rule(("patch", "update"), _CORE, "nodes/status"),
    _rule(("patch", "update"), _CORE, "nodes"),
    _EVENTS,
    _rule(READ, _CORE, "pods"),
    # mirror pods, and finishing a graceful deletion; NodeRestriction: pods bound to itself
    _rule(("create", "delete"), _CORE, "pods"),
    _rule(("patch", "update"), _CORE, "pods/status"),
    _rule(("create",), _CORE, "pods/eviction"),
    # the Node authorizer narrows these to what its pods reference
    _rule(READ, _CORE, "configmaps", "secrets"),
    _rule(("get",), _CORE, "persistentvolumeclaims", "persistentvolumes"),
    _rule(("get",), _CORE, "endpoints"),
    _rule(
        ("create", "get", "list", "watch"), ("certificates.k8s.io",), "certificatesigningrequests"
    ),
    _rule(("create", "delete", "get", "patch", "update"), ("coordination.k8s.io",), "leases"),
    _rule(("get",), ("storage.k8s.io",), "volumeattachments"),
    _rule(("get", "patch", "update"), _CORE, "persistentvolumeclaims/status"),
    _rule(("create",), _CORE, "serviceaccounts/token"),
    _rule(("get", "list", "watch"), ("storage.k8s.io",), "csidrivers"),
    _rule(("create", "delete", "get", "patch", "update"), ("storage.k8s.io",), "csinodes"),
    _rule(("get", "list", "watch"), ("node.k8s.io",), "runtimeclasses"),
]
"""Kubernetes' ``NodeRules()``: the ``system:node`` ClusterRole, and the static rules the Node
authorizer (``node_authorizer``) applies to every node for what its graph does not guard."""

CLUSTER_ROLES: list[Obj] = [
    _role(
        "cluster-admin",
        [_rule(("*",), ("*",), "*"), _urls(("*",), "*")],
    ),
    _aggregated("admin"),
    _aggregated("edit", labels=_aggregate_to("admin")),
    _aggregated("view", labels=_aggregate_to("edit")),
    _role("system:aggregate-to-admin", _ADMIN_RULES, labels=_aggregate_to("admin")),
    _role("system:aggregate-to-edit", _EDIT_RULES, labels=_aggregate_to("edit")),
    _role("system:aggregate-to-view", _VIEW_RULES, labels=_aggregate_to("view")),
    _role(
        "system:discovery",
        [
            _urls(
                ("get",),
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
                "/healthz",
                "/livez",
                "/openapi",
                "/openapi/*",
                "/readyz",
                "/version",
                "/version/",
            )
        ],
    ),
    _role(
        "system:basic-user",
        [
            _rule(("create",), ("authorization.k8s.io",), "selfsubjectaccessreviews"),
            _rule(("create",), ("authorization.k8s.io",), "selfsubjectrulesreviews"),
            _rule(("create",), ("authentication.k8s.io",), "selfsubjectreviews"),
        ],
    ),
    _role("system:public-info-viewer", [_urls(("get",), *_PUBLIC_URLS)]),
    _role(
        "system:monitoring",
        [
            _urls(
                ("get",),
                "/metrics",
                "/metrics/slis",
                "/livez",
                "/readyz",
                "/healthz",
                "/livez/*",
                "/readyz/*",
                "/healthz/*",
            )
        ],
    ),
    _role(
        "system:auth-delegator",
        [
            _rule(("create",), ("authentication.k8s.io",), "tokenreviews"),
            _rule(("create",), ("authorization.k8s.io",), "subjectaccessreviews"),
        ],
    ),
    _role(
        "system:node-proxier",
        [
            _rule(("list", "watch"), _CORE, "services", "endpoints"),
            _rule(("get", "list", "watch"), _CORE, "nodes"),
            _EVENTS,
            _rule(("list", "watch"), ("discovery.k8s.io",), "endpointslices"),
        ],
    ),
    _role("system:kube-dns", [_rule(("list", "watch"), _CORE, "endpoints", "services")]),
    _role(
        "system:coredns",
        [
            _rule(("list", "watch"), _CORE, "endpoints", "namespaces", "pods", "services"),
            _rule(("list", "watch"), ("discovery.k8s.io",), "endpointslices"),
            # kubelite's DNS registers its own Service and its slice (kubeadm's addon manifest
            # makes the Service; the endpointslice controller its slice)
            _rule(("create",), _CORE, "services"),
            _rule(("create",), ("discovery.k8s.io",), "endpointslices"),
            _named(_rule(("delete", "get", "update"), _CORE, "services"), "kube-dns"),
            _named(
                _rule(("delete", "get", "update"), ("discovery.k8s.io",), "endpointslices"),
                "kube-dns",
            ),
        ],
    ),
    _role("system:node", NODE_RULES),
    _role(
        "system:kube-scheduler",
        [
            _EVENTS,
            # its leader election: any new lease, then only its own
            _rule(("create",), ("coordination.k8s.io",), "leases"),
            _named(_rule(("get", "update"), ("coordination.k8s.io",), "leases"), "kube-scheduler"),
            _rule(READ, _CORE, "nodes"),
            _rule(("delete", "get", "list", "watch"), _CORE, "pods"),
            _rule(("create",), _CORE, "bindings", "pods/binding"),
            _rule(("patch", "update"), _CORE, "pods/status"),
            _rule(READ, _CORE, "replicationcontrollers", "services"),
            _rule(READ, ("apps",), "replicasets", "statefulsets"),
            _rule(READ, ("policy",), "poddisruptionbudgets"),
            _rule(READ, _CORE, "persistentvolumeclaims", "persistentvolumes", "namespaces"),
            _rule(READ, ("storage.k8s.io",), "csidrivers", "csinodes", "csistoragecapacities"),
            _rule(("create",), ("authentication.k8s.io",), "tokenreviews"),
            _rule(("create",), ("authorization.k8s.io",), "subjectaccessreviews"),
        ],
    ),
    # the scheduler's VolumeBinding pre-binds volumes and marks claims with their node
    _role(
        "system:volume-scheduler",
        [
            _rule((*READ, "patch", "update"), _CORE, "persistentvolumes", "persistentvolumeclaims"),
            _rule(READ, ("storage.k8s.io",), "storageclasses"),
        ],
    ),
    _role(
        "system:kube-controller-manager",
        [
            _EVENTS,
            _rule(("create",), ("coordination.k8s.io",), "leases"),
            _rule(("get", "update"), ("coordination.k8s.io",), "leases"),
            _rule(("create",), _CORE, "secrets", "serviceaccounts"),
            _rule(("delete",), _CORE, "secrets"),
            _rule(("get",), _CORE, "configmaps", "namespaces", "secrets", "serviceaccounts"),
            _rule(("update",), _CORE, "secrets", "serviceaccounts"),
            _rule(("create",), ("authentication.k8s.io",), "tokenreviews"),
            _rule(("create",), ("authorization.k8s.io",), "subjectaccessreviews"),
            _rule(("list", "watch"), ("*",), "*"),
            _rule(("create",), _CORE, "serviceaccounts/token"),
            # what each of its controllers writes (Kubernetes' per-controller roles, in one)
            _rule(READ + WRITE, ("", "apps", "batch", "policy", "discovery.k8s.io"), "*"),
            _rule(READ + WRITE, ("coordination.k8s.io", "storage.k8s.io"), "*"),
            # horizontal-pod-autoscaler: its autoscalers' status, and the metrics it reads
            _rule(READ + WRITE, ("autoscaling",), "horizontalpodautoscalers/status"),
            _rule(("get", "list"), ("metrics.k8s.io",), "pods"),
            # clusterrole-aggregation (system:controller:clusterrole-aggregation-controller)
            _rule(
                ("escalate", "get", "list", "patch", "update", "watch"), (GROUP,), "clusterroles"
            ),
        ],
    ),
]
"""Kubernetes' default ClusterRoles (name, rules, labels, aggregationRule)."""


def _subjects(kind: str, *names: str) -> list[Obj]:
    api_group = GROUP if kind in ("User", "Group") else ""
    return [{"kind": kind, "apiGroup": api_group, "name": name} for name in names]


CLUSTER_ROLE_BINDINGS: list[Obj] = [
    {
        "name": "cluster-admin",
        "role": "cluster-admin",
        "subjects": _subjects("Group", "system:masters"),
    },
    {
        "name": "system:discovery",
        "role": "system:discovery",
        "subjects": _subjects("Group", "system:authenticated"),
    },
    {
        "name": "system:basic-user",
        "role": "system:basic-user",
        "subjects": _subjects("Group", "system:authenticated"),
    },
    {
        "name": "system:public-info-viewer",
        "role": "system:public-info-viewer",
        "subjects": _subjects("Group", "system:authenticated", "system:unauthenticated"),
    },
    {
        "name": "system:monitoring",
        "role": "system:monitoring",
        "subjects": _subjects("Group", "system:monitoring"),
    },
    {
        "name": "system:node-proxier",
        "role": "system:node-proxier",
        "subjects": _subjects("User", "system:kube-proxy"),
    },
    {
        "name": "system:kube-controller-manager",
        "role": "system:kube-controller-manager",
        "subjects": _subjects("User", "system:kube-controller-manager"),
    },
    {
        "name": "system:kube-scheduler",
        "role": "system:kube-scheduler",
        "subjects": _subjects("User", "system:kube-scheduler"),
    },
    {
        "name": "system:volume-scheduler",
        "role": "system:volume-scheduler",
        "subjects": _subjects("User", "system:kube-scheduler"),
    },
    {
        "name": "system:kube-dns",
        "role": "system:kube-dns",
        "subjects": [{"kind": "ServiceAccount", "name": "kube-dns", "namespace": "kube-system"}],
    },
    {
        "name": "system:coredns",
        "role": "system:coredns",
        "subjects": [{"kind": "ServiceAccount", "name": "coredns", "namespace": "kube-system"}],
    },
    {"name": "system:node", "role": "system:node", "subjects": []},
]
"""Kubernetes' default ClusterRoleBindings (``system:node`` to nobody: see above)."""

RETIRED_SUBJECTS: dict[str, list[Obj]] = {
    "system:node": _subjects("Group", "system:nodes"),
    "system:kube-dns": _subjects("User", "system:kube-dns"),
}
"""Subjects earlier kubelite versions bound and reconciliation now removes: the group of every
node held the whole ``system:node`` role through RBAC, which would let any kubelet read every
Secret past the Node authorizer (Kubernetes removed the same binding in 1.8)."""


def _meta(name: str, labels: dict[str, str]) -> Obj:
    return {
        "name": name,
        "labels": {**BOOTSTRAP_LABEL, **labels},
        "annotations": {AUTOUPDATE_ANNOTATION: "true"},
    }


def _cluster_role(spec: Obj) -> Obj:
    obj: Obj = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ClusterRole",
        "metadata": _meta(spec["name"], spec["labels"]),
        "rules": spec["rules"],
    }
    if "aggregationRule" in spec:
        obj["aggregationRule"] = spec["aggregationRule"]
    return obj


def _cluster_role_binding(spec: Obj) -> Obj:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": _meta(spec["name"], {}),
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": spec["role"]},
        "subjects": spec["subjects"],
    }


def _reconcile_role(current: Obj, wanted: Obj) -> Obj | None:
    """``current`` with ``wanted``'s missing rules, labels and aggregation; None if unchanged."""
    held = [Rule.from_dict(r) for r in current.get("rules") or []]
    missing = [r for r in wanted["rules"] if missing_rules(held, [Rule.from_dict(r)])]
    new = dict(current)
    if missing and "aggregationRule" not in wanted:
        new["rules"] = [*(current.get("rules") or []), *missing]
    if "aggregationRule" in wanted and current.get("aggregationRule") != wanted["aggregationRule"]:
        new["aggregationRule"] = wanted["aggregationRule"]
    labels = dict((current.get("metadata") or {}).get("labels") or {})
    wanted_labels = wanted["metadata"]["labels"]
    if any(labels.get(k) != v for k, v in wanted_labels.items()):
        new["metadata"] = {**current["metadata"], "labels": {**labels, **wanted_labels}}
    return None if new == current else new


def _reconcile_binding(current: Obj, wanted: Obj) -> Obj | None:
    retired = RETIRED_SUBJECTS.get(wanted["metadata"]["name"], [])
    subjects = [s for s in current.get("subjects") or [] if s not in retired]
    missing = [s for s in wanted["subjects"] if s not in subjects]
    if not missing and subjects == list(current.get("subjects") or []):
        return None
    return {**current, "subjects": subjects + missing}


def _autoupdate(obj: Obj) -> bool:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return annotations.get(AUTOUPDATE_ANNOTATION) != "false"


async def _ensure(ctx: ApiContext, kind: str, wanted: Obj) -> None:
    """Create ``wanted`` or reconcile the stored one, in one ``guaranteed_update`` (a
    compare-and-swap retried on Conflict by re-reading; absent → created, and an object another
    apiserver creates meanwhile is reconciled instead). A binding whose ``roleRef`` differs
    cannot be updated: it is deleted and made again."""
    rt = ctx.registry.require(GROUP, kind)
    storage = ctx.storage(rt)
    name = wanted["metadata"]["name"]
    reconcile = _reconcile_role if kind == "ClusterRole" else _reconcile_binding

    async def mutate(current: Obj) -> Obj | None:
        if not _autoupdate(current):
            return None
        if kind == "ClusterRoleBinding" and current.get("roleRef") != wanted["roleRef"]:
            raise Conflict(f"{name} refers to another role")
        return reconcile(current, wanted)

    async def create() -> Obj:
        obj = dict(wanted)
        prepare_for_create(rt, obj)
        default_object(rt, obj)
        return obj

    try:
        result = await storage.guaranteed_update(None, name, mutate, create=create)
    except Conflict:
        current = await storage.get_or_none(None, name)
        if current is not None:
            await storage.delete(
                None, name, expected_rv=int(current["metadata"]["resourceVersion"])
            )
        result = await storage.guaranteed_update(None, name, mutate, create=create)
    if result.created:
        log.info("created bootstrap %s %s", kind, name)
    elif result.changed:
        log.info("reconciled bootstrap %s %s", kind, name)


async def ensure_bootstrap_policy(ctx: ApiContext) -> None:
    """Create or reconcile every default ClusterRole and ClusterRoleBinding (see above)."""
    for spec in CLUSTER_ROLES:
        await _ensure(ctx, "ClusterRole", _cluster_role(spec))
    for spec in CLUSTER_ROLE_BINDINGS:
        await _ensure(ctx, "ClusterRoleBinding", _cluster_role_binding(spec))
