"""A StatefulSet's members: ordinals, stable identity, stable storage, revisions, pod state.

Why a module of its own: what makes a pod *the* ``web-1`` of StatefulSet ``web`` — its name,
labels, hostname, and the claims its volumes name — is a set of pure rules the controller,
its update algorithm and the tests all ask about. Kubernetes keeps them in
``pkg/controller/statefulset/stateful_set_utils.go``; these are the same rules on the
informer's dicts:

* **ordinals** — a member is named ``<set>-<ordinal>``; the set covers ordinals
  ``spec.ordinals.start`` .. ``start + replicas - 1``. A pod of the set outside that range is
  *condemned* (scale-down removes it, highest ordinal first).
* **identity** — a member carries ``statefulset.kubernetes.io/pod-name=<name>`` and
  ``apps.kubernetes.io/pod-index=<ordinal>``; a new pod also gets ``spec.hostname`` = its name
  and ``spec.subdomain`` = ``serviceName`` (set once: a pod's spec does not change after).
* **storage** — each ``volumeClaimTemplates`` entry ``T`` gives ordinal ``i`` the claim
  ``T-<set>-i`` (labelled with the set's ``matchLabels`` over the template's labels), and the
  pod a volume ``T`` naming that claim; a template volume of the same name is replaced.
* **revisions** — a pod's ``controller-revision-hash`` label names the ControllerRevision
  its template came from; ``apply_revision`` is the set with that revision's template
  (the revision holds ``spec.template`` with ``$patch: replace``: applying it replaces the
  template whole); ``new_versioned_pod`` picks the current or the update revision for a pod
  being (re)created, by ``partition`` (``currentReplicas`` for a RollingUpdate set without
  ``rollingUpdate``).
* **state** — *created* (has a phase: the apiserver gives every pod one), *running and
  ready*, *available* (ready for ``minReadySeconds``), *terminating*, *unavailable* (not
  healthy or not available: a terminating pod is unavailable).

Limits: ordinals are parsed from names as Kubernetes does (``(.*)-([0-9]+)$``), so a pod named
``web-01`` counts as ordinal 1 and then fails the identity check; nothing here writes.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from api.registry import REGISTRY
from services.controller_manager.controller_ref import labels_of, new_controller_ref
from services.controller_manager.pod_state import is_available, is_ready

__all__ = [
    "POD_INDEX_LABEL",
    "POD_NAME_LABEL",
    "REVISION_LABEL",
    "STATEFULSETS",
    "apply_revision",
    "claim_name",
    "claims_for",
    "end_ordinal",
    "identity_matches",
    "in_ordinal_range",
    "is_created",
    "is_member",
    "is_terminating",
    "is_unavailable",
    "new_versioned_pod",
    "ordinal_of",
    "phase_of",
    "pod_name",
    "revision_of",
    "running_and_available",
    "running_and_ready",
    "start_ordinal",
    "storage_matches",
    "update_identity",
    "update_storage",
]

Obj = dict[str, Any]

STATEFULSETS = REGISTRY.require("apps", "StatefulSet")

POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
REVISION_LABEL = "controller-revision-hash"
"""Kubernetes' ``StatefulSetRevisionLabel``: the name of the pod's ControllerRevision."""

_MEMBER_NAME = re.compile(r"(.*)-([0-9]+)$")


# -- ordinals and names ----------------------------------------------------------------------


def _parent_and_ordinal(pod: Mapping[str, Any]) -> tuple[str, int]:
    match = _MEMBER_NAME.match(str((pod.get("metadata") or {}).get("name") or ""))
    if match is None:
        return "", -1
    return match.group(1), int(match.group(2))


def ordinal_of(pod: Mapping[str, Any]) -> int:
    """The ordinal in the pod's name, -1 when it has none."""
    return _parent_and_ordinal(pod)[1]


def is_member(sts: Obj, pod: Mapping[str, Any]) -> bool:
    """Named like one of ``sts``'s pods (``<set>-<ordinal>``)."""
    return _parent_and_ordinal(pod)[0] == str(sts["metadata"]["name"])


def _spec(sts: Obj) -> Obj:
    return sts.get("spec") or {}


def start_ordinal(sts: Obj) -> int:
    return int((_spec(sts).get("ordinals") or {}).get("start") or 0)


def end_ordinal(sts: Obj) -> int:
    """The last ordinal of the range (inclusive): ``start - 1`` when scaled to zero."""
    return start_ordinal(sts) + int(_spec(sts).get("replicas", 1)) - 1


def in_ordinal_range(pod: Mapping[str, Any], sts: Obj) -> bool:
    return start_ordinal(sts) <= ordinal_of(pod) <= end_ordinal(sts)


def pod_name(sts: Obj, ordinal: int) -> str:
    return f"{sts['metadata']['name']}-{ordinal}"


def claim_name(template: str, sts: Obj, ordinal: int) -> str:
    return f"{template}-{sts['metadata']['name']}-{ordinal}"


# -- identity and storage --------------------------------------------------------------------


def identity_matches(sts: Obj, pod: Mapping[str, Any]) -> bool:
    """The pod's name, namespace and identity labels are those of its ordinal in ``sts``."""
    meta = pod.get("metadata") or {}
    ordinal = ordinal_of(pod)
    labels = meta.get("labels") or {}
    return (
        ordinal >= 0
        and is_member(sts, pod)
        and meta.get("name") == pod_name(sts, ordinal)
        and meta.get("namespace") == sts["metadata"].get("namespace")
        and labels.get(POD_NAME_LABEL) == meta.get("name")
        and labels.get(POD_INDEX_LABEL) == str(ordinal)
    )


def update_identity(sts: Obj, pod: Obj) -> None:
    """Give ``pod`` (a dict this caller owns) its ordinal's name, namespace and labels."""
    ordinal = ordinal_of(pod)
    meta = pod.setdefault("metadata", {})
    meta["name"] = pod_name(sts, ordinal)
    meta["namespace"] = sts["metadata"].get("namespace")
    labels = meta.setdefault("labels", {})
    labels[POD_NAME_LABEL] = meta["name"]
    labels[POD_INDEX_LABEL] = str(ordinal)


def _claim_templates(sts: Obj) -> list[Obj]:
    return [t for t in _spec(sts).get("volumeClaimTemplates") or [] if isinstance(t, dict)]


def claims_for(sts: Obj, ordinal: int) -> dict[str, Obj]:
    """The claims ordinal ``ordinal`` needs, by template name (not yet created)."""
    match_labels = (_spec(sts).get("selector") or {}).get("matchLabels") or {}
    claims: dict[str, Obj] = {}
    for template in _claim_templates(sts):
        tmeta = template.get("metadata") or {}
        name = str(tmeta.get("name") or "")
        meta: Obj = {
            "name": claim_name(name, sts, ordinal),
            "namespace": sts["metadata"].get("namespace"),
            "labels": {**(tmeta.get("labels") or {}), **match_labels},
        }
        if tmeta.get("annotations"):
            meta["annotations"] = dict(tmeta["annotations"])
        claims[name] = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": meta,
            "spec": copy.deepcopy(template.get("spec") or {}),
        }
    return claims


def storage_matches(sts: Obj, pod: Mapping[str, Any]) -> bool:
    """Every claim template has a volume of its name naming this ordinal's claim."""
    ordinal = ordinal_of(pod)
    if ordinal < 0:
        return False
    volumes = {
        v.get("name"): v
        for v in (pod.get("spec") or {}).get("volumes") or []
        if isinstance(v, dict)
    }
    for template in _claim_templates(sts):
        name = (template.get("metadata") or {}).get("name")
        source = (volumes.get(name) or {}).get("persistentVolumeClaim") or {}
        if source.get("claimName") != claim_name(str(name), sts, ordinal):
            return False
    return True


def update_storage(sts: Obj, pod: Obj) -> None:
    """Point ``pod``'s volumes at its ordinal's claims (a same-named volume is replaced)."""
    claims = claims_for(sts, ordinal_of(pod))
    spec = pod.setdefault("spec", {})
    volumes = [
        {"name": name, "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}}
        for name, claim in claims.items()
    ]
    volumes += [v for v in spec.get("volumes") or [] if v.get("name") not in claims]
    spec["volumes"] = volumes


# -- new pods and revisions ------------------------------------------------------------------


def revision_of(pod: Mapping[str, Any]) -> str:
    return str(labels_of(dict(pod)).get(REVISION_LABEL) or "")


def apply_revision(sts: Obj, revision: Obj) -> Obj:
    """``sts`` with the template ``revision`` snapshots (its patch replaces the template)."""
    out = copy.deepcopy(sts)
    template = dict(((revision.get("data") or {}).get("spec") or {}).get("template") or {})
    template.pop("$patch", None)
    out.setdefault("spec", {})["template"] = copy.deepcopy(template)
    return out


def _new_pod(sts: Obj, ordinal: int) -> Obj:
    """Kubernetes' ``newStatefulSetPod``: the template's pod with the ordinal's identity."""
    meta = sts["metadata"]
    template = _spec(sts).get("template") or {}
    tmeta = template.get("metadata") or {}
    name = pod_name(sts, ordinal)
    pod_meta: Obj = {
        "name": name,
        "namespace": meta.get("namespace"),
        "labels": dict(tmeta.get("labels") or {}),
        "ownerReferences": [new_controller_ref(sts, STATEFULSETS)],
    }
    if tmeta.get("annotations"):
        pod_meta["annotations"] = dict(tmeta["annotations"])
    if tmeta.get("finalizers"):
        pod_meta["finalizers"] = list(tmeta["finalizers"])
    pod: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": pod_meta,
        "spec": copy.deepcopy(template.get("spec") or {}),
    }
    update_identity(sts, pod)
    pod["spec"]["hostname"] = name
    service = _spec(sts).get("serviceName")
    if service:
        pod["spec"]["subdomain"] = service
    update_storage(sts, pod)
    return pod


def new_versioned_pod(
    *, current_set: Obj, update_set: Obj, current_revision: str, update_revision: str, ordinal: int
) -> Obj:
    """A new pod for ``ordinal``: from the current revision below the partition, else from
    the update revision, labelled with the revision it came from."""
    strategy = _spec(current_set).get("updateStrategy") or {}
    rolling = strategy.get("rollingUpdate")
    start = start_ordinal(current_set)
    if rolling is not None:
        keep_current = ordinal < start + int(rolling.get("partition") or 0)
    else:
        current_replicas = int((current_set.get("status") or {}).get("currentReplicas") or 0)
        keep_current = (
            strategy.get("type") == "RollingUpdate" and ordinal < start + current_replicas
        )
    source, revision = (
        (current_set, current_revision) if keep_current else (update_set, update_revision)
    )
    pod = _new_pod(source, ordinal)
    pod["metadata"]["labels"][REVISION_LABEL] = revision
    return pod


# -- pod state -------------------------------------------------------------------------------


def phase_of(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def is_created(pod: Mapping[str, Any]) -> bool:
    """The apiserver has it (every stored pod has a phase; one being built here has none)."""
    return phase_of(pod) != ""


def is_terminating(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def running_and_ready(pod: Mapping[str, Any]) -> bool:
    return phase_of(pod) == "Running" and is_ready(pod)


def running_and_available(pod: Mapping[str, Any], min_ready_seconds: int) -> bool:
    return is_available(pod, min_ready_seconds=min_ready_seconds)


def is_unavailable(pod: Mapping[str, Any], min_ready_seconds: int) -> bool:
    healthy = running_and_ready(pod) and not is_terminating(pod)
    return not healthy or not running_and_available(pod, min_ready_seconds)
