"""The clusterrole-aggregation controller: a ClusterRole with an ``aggregationRule`` holds the
rules of every ClusterRole its selectors pick.

Why: Kubernetes' default ``admin``, ``edit`` and ``view`` roles carry no rules of their own,
only ``aggregationRule.clusterRoleSelectors`` (``rbac.authorization.k8s.io/aggregate-to-view:
"true"`` and so on). Whoever adds a resource — a new API group, a CRD's author — labels a small
ClusterRole and every ``view`` binding in the cluster can read it. kube-controller-manager's
``clusterrole-aggregation`` controller (``pkg/controller/clusterroleaggregation``) keeps the
aggregated ``rules`` true; this is that controller:

* one informer on ClusterRoles; any add, change or delete enqueues *every* ClusterRole that has
  an ``aggregationRule`` (as upstream: the set is small and who selects whom is not indexed,
  so each is re-derived and only the changed ones are written);
* ``sync(name)`` (level-triggered, from the cache): for each selector in order, the matching
  ClusterRoles sorted by name (the role itself excluded), their rules appended unless an equal
  rule is already there. If that list differs from the role's ``rules``, it is written with a
  compare-and-swap update that re-reads on Conflict (``retry_on_conflict``); equal rules mean
  no write at all, so the controller settles.

Rules compare as Kubernetes' ``equality.Semantic`` does for them: an absent field, ``null`` and
``[]`` are the same rule.

Limits: Kubernetes writes with a forced server-side apply under the field manager
``clusterrole-aggregation-controller``; kubelite updates the whole ``rules`` list (the effect on
the object is the same: the controller owns ``rules`` of an aggregated role, and edits to them
are overwritten). A selector that does not parse is logged and retried with backoff.
"""

from __future__ import annotations

import logging
from typing import Any

from api.errors import NotFound
from api.registry import REGISTRY
from api.selectors import label_selector_from_dict
from client.controller import Controller
from client.rest import ApiClient
from client.workqueue import WorkQueue
from services.controller_manager.informers import SharedInformers
from services.controller_manager.retry_on_conflict import update_with_retry

__all__ = ["ClusterRoleAggregationController", "aggregated_rules"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

_RULE_FIELDS = ("verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs")


def _normalised(rule: Obj) -> Obj:
    """The rule with empty or absent fields dropped: the form two rules are compared in."""
    return {f: list(rule[f]) for f in _RULE_FIELDS if rule.get(f)}


def aggregated_rules(role: Obj, cluster_roles: list[Obj]) -> list[Obj]:
    """The rules ``role``'s aggregationRule selects from ``cluster_roles``, deduplicated, in
    selector order then name order (``syncClusterRole`` upstream)."""
    name = role["metadata"]["name"]
    selectors = (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []
    rules: list[Obj] = []
    for spec in selectors:
        selector = label_selector_from_dict(spec)
        picked = [
            r
            for r in cluster_roles
            if r["metadata"]["name"] != name and selector.matches(r["metadata"].get("labels"))
        ]
        for source in sorted(picked, key=lambda r: str(r["metadata"]["name"])):
            for rule in source.get("rules") or []:
                rule = _normalised(rule)
                if rule not in rules:
                    rules.append(rule)
    return rules


def _same_rules(a: list[Obj] | None, b: list[Obj]) -> bool:
    return [_normalised(r) for r in a or []] == b


class ClusterRoleAggregationController:
    def __init__(self, *, client: ApiClient, informers: SharedInformers) -> None:
        self.name = "clusterrole-aggregation"
        self.client = client
        self.rt = REGISTRY.require("rbac.authorization.k8s.io", "ClusterRole")
        self.roles = informers.get(self.rt)
        self.queue: WorkQueue[str] = WorkQueue(name="ClusterRoleAggregator")
        self.roles.add_handler(on_change=self._changed)

    async def run(self) -> None:
        await Controller(
            name=self.name, queue=self.queue, reconcile=self.sync, wait_for=[self.roles]
        ).run()

    def _changed(self, _role: Obj) -> None:
        for role in self.roles.list():
            if role.get("aggregationRule") is not None:
                self.queue.add(str(role["metadata"]["name"]))

    async def sync(self, name: str) -> float | None:
        role = self.roles.get(name)
        if role is None or role.get("aggregationRule") is None:
            return None
        rules = aggregated_rules(role, self.roles.list())
        if _same_rules(role.get("rules"), rules):
            return None

        def mutate(fresh: Obj) -> bool:
            if fresh.get("aggregationRule") is None or _same_rules(fresh.get("rules"), rules):
                return False
            fresh["rules"] = rules
            return True

        try:
            await update_with_retry(self.client, self.rt, namespace=None, name=name, mutate=mutate)
        except NotFound:
            return None
        log.info("clusterrole %s: aggregated %d rules", name, len(rules))
        return None
