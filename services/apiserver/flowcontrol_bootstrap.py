"""The default FlowSchemas and PriorityLevelConfigurations, written at every apiserver start.

Why: priority and fairness needs its configuration from the first request on. Kubernetes'
``pkg/apis/flowcontrol/bootstrap`` (``default.go``) defines it and the apiserver's
``apf-configuration`` post-start hook writes it; kubelite writes the same objects, with the same
names, levels, precedences, shares and queues:

* *mandatory*: the ``exempt`` level (no limits) with the ``exempt`` schema (group
  ``system:masters``), and ``catch-all`` (5 shares, Reject) with its schema for every user;
* *suggested*: ``system`` (30 shares), ``node-high`` (40: nodes' Node, Node status and Lease
  writes), ``leader-election`` (10), ``workload-high`` (40: controller-manager, scheduler,
  kube-system service accounts), ``workload-low`` (100: every other service account) and
  ``global-default`` (20: everybody else), with the ``probes`` schema putting ``/healthz``,
  ``/livez`` and ``/readyz`` in ``exempt``.

Each object is created if missing and annotated ``apf.kubernetes.io/autoupdate-spec: "true"``;
an existing one whose annotation says ``"true"`` gets its spec put back to the default, one
saying anything else is left as the cluster's operator wrote it (Kubernetes' rule). The
``Dangling`` condition of the schemas is kept by ``services.apiserver.flowcontrol``.

Not here: Kubernetes' ``endpoint-controller`` schema (kubelite has no per-controller identities;
its controller-manager's requests fall in ``kube-controller-manager``). Objects deleted while
the server runs come back at its next start only (Kubernetes re-checks every minute or so).
"""

from __future__ import annotations

import copy
import logging
from typing import Any, Final

from api.flowcontrol import GROUP
from services.apiserver.context import ApiContext
from services.apiserver.strategy import default_object, prepare_for_create

__all__ = [
    "AUTOUPDATE_ANNOTATION",
    "FLOW_SCHEMAS",
    "PRIORITY_LEVELS",
    "ensure_flowcontrol_defaults",
]

log = logging.getLogger(__name__)

AUTOUPDATE_ANNOTATION: Final = "apf.kubernetes.io/autoupdate-spec"

Obj = dict[str, Any]

_EVERYTHING: Final[Obj] = {
    "resourceRules": [
        {
            "verbs": ["*"],
            "apiGroups": ["*"],
            "resources": ["*"],
            "clusterScope": True,
            "namespaces": ["*"],
        }
    ],
    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
}


def _queued(shares: int, lendable: int, *, queues: int, hand: int, limit: int = 50) -> Obj:
    return {
        "type": "Limited",
        "limited": {
            "nominalConcurrencyShares": shares,
            "lendablePercent": lendable,
            "limitResponse": {
                "type": "Queue",
                "queuing": {"queues": queues, "handSize": hand, "queueLengthLimit": limit},
            },
        },
    }


PRIORITY_LEVELS: Final[dict[str, Obj]] = {
    "exempt": {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}},
    "catch-all": {
        "type": "Limited",
        "limited": {
            "nominalConcurrencyShares": 5,
            "lendablePercent": 0,
            "limitResponse": {"type": "Reject"},
        },
    },
    "system": _queued(30, 33, queues=64, hand=6),
    "node-high": _queued(40, 25, queues=64, hand=6),
    "leader-election": _queued(10, 0, queues=16, hand=4),
    "workload-high": _queued(40, 50, queues=128, hand=6),
    "workload-low": _queued(100, 90, queues=128, hand=6),
    "global-default": _queued(20, 50, queues=128, hand=6),
}
"""Spec of each default level (``default.go``, flowcontrol v1)."""


def _users(*names: str) -> list[Obj]:
    return [{"kind": "User", "user": {"name": n}} for n in names]


def _groups(*names: str) -> list[Obj]:
    return [{"kind": "Group", "group": {"name": n}} for n in names]


_KUBE_SYSTEM_ACCOUNTS: Final = [
    {"kind": "ServiceAccount", "serviceAccount": {"namespace": "kube-system", "name": "*"}}
]
_EVERYONE: Final = _groups("system:unauthenticated", "system:authenticated")


def _leader_election(namespaces: list[str]) -> list[Obj]:
    verbs = ["get", "create", "update"]
    return [
        {
            "verbs": verbs,
            "apiGroups": [""],
            "resources": ["endpoints", "configmaps"],
            "namespaces": namespaces,
        },
        {
            "verbs": verbs,
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "namespaces": ["*"],
        },
    ]


def _schema(level: str, precedence: int, method: str | None, *rules: Obj) -> Obj:
    spec: Obj = {
        "priorityLevelConfiguration": {"name": level},
        "matchingPrecedence": precedence,
        "rules": list(rules),
    }
    if method is not None:
        spec["distinguisherMethod"] = {"type": method}
    return spec


FLOW_SCHEMAS: Final[dict[str, Obj]] = {
    "exempt": _schema("exempt", 1, None, {"subjects": _groups("system:masters"), **_EVERYTHING}),
    "probes": _schema(
        "exempt",
        2,
        None,
        {
            "subjects": _EVERYONE,
            "nonResourceRules": [
                {"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}
            ],
        },
    ),
    "system-leader-election": _schema(
        "leader-election",
        100,
        "ByUser",
        {
            "subjects": [
                *_users("system:kube-controller-manager", "system:kube-scheduler"),
                *_KUBE_SYSTEM_ACCOUNTS,
            ],
            "resourceRules": _leader_election(["kube-system"]),
        },
    ),
    "workload-leader-election": _schema(
        "leader-election",
        200,
        "ByUser",
        {"subjects": _KUBE_SYSTEM_ACCOUNTS, "resourceRules": _leader_election(["*"])},
    ),
    "system-node-high": _schema(
        "node-high",
        400,
        "ByUser",
        {
            "subjects": _groups("system:nodes"),
            "resourceRules": [
                {
                    "verbs": ["*"],
                    "apiGroups": [""],
                    "resources": ["nodes", "nodes/status"],
                    "clusterScope": True,
                    "namespaces": ["*"],
                },
                {
                    "verbs": ["*"],
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "namespaces": ["*"],
                },
            ],
        },
    ),
    "system-nodes": _schema(
        "system", 500, "ByUser", {"subjects": _groups("system:nodes"), **_EVERYTHING}
    ),
    "kube-controller-manager": _schema(
        "workload-high",
        800,
        "ByNamespace",
        {"subjects": _users("system:kube-controller-manager"), **_EVERYTHING},
    ),
    "kube-scheduler": _schema(
        "workload-high",
        800,
        "ByNamespace",
        {"subjects": _users("system:kube-scheduler"), **_EVERYTHING},
    ),
    "kube-system-service-accounts": _schema(
        "workload-high", 900, "ByNamespace", {"subjects": _KUBE_SYSTEM_ACCOUNTS, **_EVERYTHING}
    ),
    "service-accounts": _schema(
        "workload-low",
        9000,
        "ByUser",
        {"subjects": _groups("system:serviceaccounts"), **_EVERYTHING},
    ),
    "global-default": _schema(
        "global-default", 9900, "ByUser", {"subjects": _EVERYONE, **_EVERYTHING}
    ),
    "catch-all": _schema("catch-all", 10000, "ByUser", {"subjects": _EVERYONE, **_EVERYTHING}),
}
"""Spec of each default schema (``default.go``, flowcontrol v1)."""


async def ensure_flowcontrol_defaults(ctx: ApiContext) -> None:
    """Create or restore every default level, then every default schema (see above)."""
    for name, spec in PRIORITY_LEVELS.items():
        await _ensure(ctx, "PriorityLevelConfiguration", name, spec)
    for name, spec in FLOW_SCHEMAS.items():
        await _ensure(ctx, "FlowSchema", name, spec)


async def _ensure(ctx: ApiContext, kind: str, name: str, spec: Obj) -> None:
    rt = ctx.registry.require(GROUP, kind)
    storage = ctx.storage(rt)
    wanted: Obj = {
        "apiVersion": rt.api_version,
        "kind": kind,
        "metadata": {"name": name, "annotations": {AUTOUPDATE_ANNOTATION: "true"}},
        "spec": copy.deepcopy(spec),  # defaulting fills it in place; the table stays as written
    }
    default_object(rt, wanted)

    async def restore(current: Obj) -> Obj | None:
        annotations = (current.get("metadata") or {}).get("annotations") or {}
        if (
            annotations.get(AUTOUPDATE_ANNOTATION) != "true"
            or current.get("spec") == wanted["spec"]
        ):
            return None
        return {**current, "spec": wanted["spec"]}

    async def create() -> Obj:
        prepare_for_create(rt, wanted)
        return wanted

    # absent: created (if another apiserver creates it meanwhile, that one is restored)
    result = await storage.guaranteed_update(None, name, restore, create=create)
    if result.created:
        log.info("created default %s %s", kind, name)
    elif result.changed:
        log.info("restored the default spec of %s %s", kind, name)
