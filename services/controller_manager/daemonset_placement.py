"""Which nodes a DaemonSet runs on, and the pod it puts there — pure functions over dicts.

Why a module of its own: "should this node run the daemon pod?" is asked on every node event
and every sync, and it is where a DaemonSet is right or wrong. It follows
``pkg/controller/daemon/util`` and ``NodeShouldRunDaemonPod`` in ``daemon_controller.go``:

* A daemon pod carries, besides its template's tolerations, the ones Kubernetes adds to every
  daemon pod (``DAEMON_TOLERATIONS``: it stays on not-ready and unreachable nodes, ignores
  disk/memory/PID pressure and cordoning; with ``hostNetwork``, a network-unavailable node too).
* ``node_should_run(node, ds)`` is ``(should_run, should_continue_running)``: a template
  ``nodeName`` naming another node, a ``nodeSelector`` or required node affinity the node does
  not match, means neither; a NoSchedule or NoExecute taint the pod does not tolerate means it
  should not start there, and it should keep running only if no NoExecute taint is untolerated.
  Node readiness is not consulted (the tolerations above say why).
* ``daemon_pod(ds, ds_rt, node=..., hash_=...)`` is the pod for one node: ``generateName
  <ds>-``, the template's labels plus ``controller-revision-hash`` and
  ``pod-template-generation``, and a required node affinity replaced by the single term
  ``matchFields metadata.name In [<node>]`` — the default scheduler binds it (Kubernetes
  ≥ 1.12), and ``target_node(pod)`` reads the node back from it before the pod is bound.
* ``is_updated(pod, hash_, generation)``: a pod runs the current template when its hash label
  or its template-generation label says so.

Limits: a node's resources are not checked (the scheduler does that, and a pod that does not
fit stays Pending, as in Kubernetes); no other predicates (ports, volumes) are evaluated here.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from api.registry import ResourceType
from api.selectors import node_selector_terms_match
from api.taints import tolerates_taint
from services.controller_manager.controller_ref import new_controller_ref

__all__ = [
    "DAEMON_TOLERATIONS",
    "REVISION_HASH_LABEL",
    "TEMPLATE_GENERATION_ANNOTATION",
    "TEMPLATE_GENERATION_LABEL",
    "daemon_pod",
    "daemon_tolerations",
    "is_updated",
    "node_should_run",
    "target_node",
    "template_generation",
]

Obj = dict[str, Any]

REVISION_HASH_LABEL = "controller-revision-hash"
"""apps/v1 ``DefaultDaemonSetUniqueLabelKey``: on pods and on the DaemonSet's revisions."""
TEMPLATE_GENERATION_LABEL = "pod-template-generation"
TEMPLATE_GENERATION_ANNOTATION = "deprecated.daemonset.template.generation"
"""Set by the apiserver: 1 on create, one more each time the template changes."""

_NO_EXECUTE, _NO_SCHEDULE = "NoExecute", "NoSchedule"


def _exists(key: str, effect: str) -> Obj:
    return {"key": key, "operator": "Exists", "effect": effect}


DAEMON_TOLERATIONS: tuple[Obj, ...] = (
    _exists("node.kubernetes.io/not-ready", _NO_EXECUTE),
    _exists("node.kubernetes.io/unreachable", _NO_EXECUTE),
    _exists("node.kubernetes.io/disk-pressure", _NO_SCHEDULE),
    _exists("node.kubernetes.io/memory-pressure", _NO_SCHEDULE),
    _exists("node.kubernetes.io/pid-pressure", _NO_SCHEDULE),
    _exists("node.kubernetes.io/unschedulable", _NO_SCHEDULE),
)
"""``AddOrUpdateDaemonPodTolerations``: what every daemon pod tolerates."""
NETWORK_UNAVAILABLE = _exists("node.kubernetes.io/network-unavailable", _NO_SCHEDULE)
"""Added for ``hostNetwork`` pods only."""


def daemon_tolerations(pod_spec: Mapping[str, Any]) -> list[Obj]:
    """The template's tolerations plus the daemon ones (one per key and effect)."""
    tolerations = [dict(t) for t in pod_spec.get("tolerations") or []]
    wanted = list(DAEMON_TOLERATIONS)
    if pod_spec.get("hostNetwork"):
        wanted.append(NETWORK_UNAVAILABLE)
    for extra in wanted:
        tolerations = [
            t
            for t in tolerations
            if (t.get("key"), t.get("effect")) != (extra["key"], extra["effect"])
        ]
        tolerations.append(dict(extra))
    return tolerations


def template_generation(ds: Obj) -> int | None:
    value = ((ds.get("metadata") or {}).get("annotations") or {}).get(
        TEMPLATE_GENERATION_ANNOTATION
    )
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _required_terms(pod_spec: Mapping[str, Any]) -> list[Any] | None:
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms")
    return list(terms) if terms is not None else None


def _untolerated(
    taints: Iterable[Mapping[str, Any]], tolerations: list[Obj], effects: tuple[str, ...]
) -> bool:
    return any(
        t.get("effect") in effects and not any(tolerates_taint(tol, t) for tol in tolerations)
        for t in taints
    )


def node_should_run(node: Obj, ds: Obj) -> tuple[bool, bool]:
    """(should a daemon pod start on ``node``, may one already there keep running)."""
    spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    name = (node.get("metadata") or {}).get("name") or ""
    if spec.get("nodeName") and spec["nodeName"] != name:
        return False, False
    labels = _labels(node)
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False, False
    terms = _required_terms(spec)
    if terms is not None and not node_selector_terms_match(terms, labels, node_name=name):
        return False, False
    taints = (node.get("spec") or {}).get("taints") or []
    tolerations = daemon_tolerations(spec)
    if _untolerated(taints, tolerations, (_NO_SCHEDULE, _NO_EXECUTE)):
        return False, not _untolerated(taints, tolerations, (_NO_EXECUTE,))
    return True, True


def _pin_to_node(pod_spec: Obj, node: str) -> None:
    """``ReplaceDaemonSetPodNodeNameNodeAffinity``: the required terms become one term."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    affinity = pod_spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [term]}


def daemon_pod(ds: Obj, ds_rt: ResourceType, *, node: str, hash_: str) -> Obj:
    """The pod ``ds`` runs on ``node``, labelled with the revision ``hash_``."""
    meta = ds["metadata"]
    template = (ds.get("spec") or {}).get("template") or {}
    tmeta = template.get("metadata") or {}
    labels = {**(tmeta.get("labels") or {}), REVISION_HASH_LABEL: hash_}
    generation = template_generation(ds)
    if generation is not None:
        labels[TEMPLATE_GENERATION_LABEL] = str(generation)
    pod_meta: Obj = {
        "generateName": f"{meta['name']}-",
        "namespace": meta.get("namespace"),
        "labels": labels,
        "ownerReferences": [new_controller_ref(ds, ds_rt)],
    }
    if tmeta.get("annotations"):
        pod_meta["annotations"] = dict(tmeta["annotations"])
    if tmeta.get("finalizers"):
        pod_meta["finalizers"] = list(tmeta["finalizers"])
    spec: Obj = copy.deepcopy(template.get("spec") or {})
    spec["tolerations"] = daemon_tolerations(spec)
    _pin_to_node(spec, node)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}


def target_node(pod: Obj) -> str | None:
    """``GetTargetNodeName``: the node a daemon pod is bound or pinned to."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    for term in _required_terms(spec) or []:
        for field in (term or {}).get("matchFields") or []:
            values = field.get("values") or []
            if field.get("key") == "metadata.name" and field.get("operator") == "In":
                if len(values) == 1:
                    return str(values[0])
    return None


def is_updated(pod: Obj, hash_: str, generation: int | None) -> bool:
    """``IsPodUpdated``: the pod runs the DaemonSet's current template."""
    labels = _labels(pod)
    if hash_ and labels.get(REVISION_HASH_LABEL) == hash_:
        return True
    return generation is not None and labels.get(TEMPLATE_GENERATION_LABEL) == str(generation)
