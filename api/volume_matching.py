"""Which PersistentVolume a claim may bind to: the rules the PV controller, the provisioner and
the scheduler's VolumeBinding share.

Why: binding is a decision over two kinds at once, and Kubernetes spreads its rules over
``pkg/controller/volume/persistentvolume/index.go`` (``findMatchingVolume``),
``pv_controller.go`` (``checkVolumeSatisfyClaim``) and ``component-helpers/storage/volume``
(classes, access modes, the annotations). They are pure functions of the two objects (and the
selected node), kept here so the binder reads as the state machine it is and the rules can be
tested on their own.

* ``claim_class`` / ``volume_class``: the beta class annotation if present, else
  ``spec.storageClassName``; unset and ``""`` are both "no class" and only match each other.
* ``is_bound_to(volume, claim)``: the volume's ``claimRef`` names the claim (namespace, name,
  and uid unless the ref has none — a user's pre-binding by name).
* ``unsatisfied_by(volume, claim)``: why a volume cannot serve a claim that names it
  (``spec.volumeName``), in Kubernetes' words, or None.
* ``best_match(claim, volumes, ...)``: a volume pre-bound to the claim wins; otherwise the
  smallest free volume (no ``claimRef``, ``Available`` or still ``Pending``) that fits — same class, access modes a superset of the claim's
  (fewest extra modes first, as Kubernetes' access-mode index orders its search), capacity at
  least the request, the claim's label selector, the same ``volumeMode``, not being deleted, and
  (given a node) node affinity matching that node. With ``delay_binding`` (a
  WaitForFirstConsumer claim no node was selected for yet) only a pre-bound volume is taken.
* ``claim_reference(claim)``: the ``claimRef`` a bound volume carries.
* ``volume_admits(volume, node_name, labels)``: the volume's ``spec.nodeAffinity.required``
  admits the node (a volume without one admits every node).

Limits: no ``dataSource`` or ``volumeAttributesClassName`` matching; quantities that do not parse
make a volume not fit (validation rejects them on the way in).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any, TypeVar

from api.quantity import parse_quantity
from api.selectors import label_selector_from_dict, node_selector_terms_match
from api.storage import SELECTED_NODE_ANNOTATION

__all__ = [
    "ANN_BIND_COMPLETED",
    "ANN_BOUND_BY_CONTROLLER",
    "ANN_PROVISIONED_BY",
    "ANN_SELECTED_NODE",
    "ANN_STORAGE_PROVISIONER",
    "ANN_STORAGE_PROVISIONER_BETA",
    "best_match",
    "claim_class",
    "claim_key",
    "claim_reference",
    "is_bound_to",
    "unsatisfied_by",
    "volume_admits",
    "volume_class",
]

Obj = dict[str, Any]
V = TypeVar("V", bound=Mapping[str, Any])

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
"""On a claim: the controller finished binding it (``"yes"``)."""
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
"""On either side: the controller, not the user, set the link (``claimRef`` / ``volumeName``)."""
ANN_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
"""On a volume: the provisioner that made it (and must delete it)."""
ANN_SELECTED_NODE = SELECTED_NODE_ANNOTATION
ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
"""On a claim: the provisioner asked to make its volume."""
ANN_STORAGE_PROVISIONER_BETA = "volume.beta.kubernetes.io/storage-provisioner"
_BETA_CLASS = "volume.beta.kubernetes.io/storage-class"


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(_map(obj.get("metadata")).get("annotations"))


def claim_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def claim_class(claim: Mapping[str, Any]) -> str:
    annotations = _annotations(claim)
    if _BETA_CLASS in annotations:
        return str(annotations[_BETA_CLASS])
    return str(_map(claim.get("spec")).get("storageClassName") or "")


volume_class = claim_class
"""A volume's class follows the same rule (annotation first, then the spec field)."""


def _mode(obj: Mapping[str, Any]) -> str:
    return str(_map(obj.get("spec")).get("volumeMode") or "Filesystem")


def _access_modes(obj: Mapping[str, Any]) -> set[str]:
    modes = _map(obj.get("spec")).get("accessModes")
    return {m for m in modes if isinstance(m, str)} if isinstance(modes, list) else set()


def _quantity(value: Any) -> Fraction | None:
    try:
        return parse_quantity(value)
    except (TypeError, ValueError):
        return None


def _requested(claim: Mapping[str, Any]) -> Fraction | None:
    requests = _map(_map(_map(claim.get("spec")).get("resources")).get("requests"))
    return _quantity(requests.get("storage"))


def _capacity(volume: Mapping[str, Any]) -> Fraction | None:
    return _quantity(_map(_map(volume.get("spec")).get("capacity")).get("storage"))


def is_bound_to(volume: Mapping[str, Any], claim: Mapping[str, Any]) -> bool:
    ref = _map(_map(volume.get("spec")).get("claimRef"))
    meta = _map(claim.get("metadata"))
    if not ref or ref.get("name") != meta.get("name"):
        return False
    if (ref.get("namespace") or "") != (meta.get("namespace") or ""):
        return False
    return not ref.get("uid") or ref.get("uid") == meta.get("uid")


def volume_admits(volume: Mapping[str, Any], node_name: str, labels: Mapping[str, str]) -> bool:
    required = _map(_map(_map(volume.get("spec")).get("nodeAffinity")).get("required"))
    if not required:
        return True
    return node_selector_terms_match(required.get("nodeSelectorTerms"), labels, node_name=node_name)


def _node_admits(volume: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    meta = _map(node.get("metadata"))
    return volume_admits(volume, str(meta.get("name") or ""), _map(meta.get("labels")))


def unsatisfied_by(volume: Mapping[str, Any], claim: Mapping[str, Any]) -> str | None:
    """``checkVolumeSatisfyClaim``: the reason a named volume cannot serve the claim, or None."""
    requested, capacity = _requested(claim), _capacity(volume)
    if requested is None or capacity is None or capacity < requested:
        return "requested PV is too small"
    if volume_class(volume) != claim_class(claim):
        return "storageClassName does not match"
    if _mode(volume) != _mode(claim):
        return "incompatible volumeMode"
    if not _access_modes(claim) <= _access_modes(volume):
        return "incompatible accessMode"
    return None


def _phase(volume: Mapping[str, Any]) -> str:
    return str(_map(volume.get("status")).get("phase") or "")


_FREE_PHASES = ("Available", "Pending", "")
"""A new volume is ``Pending`` until the controller's volume sync marks it ``Available``; without
a ``claimRef`` it is just as free, and a claim synced first need not wait for that write."""


def best_match(
    claim: Mapping[str, Any],
    volumes: Iterable[V],
    *,
    delay_binding: bool = False,
    node: Mapping[str, Any] | None = None,
) -> V | None:
    """The volume ``claim`` should bind to, or None (see the module docstring)."""
    wanted_modes = _access_modes(claim)
    requested = _requested(claim)
    selector_spec = _map(claim.get("spec")).get("selector")
    selector = label_selector_from_dict(selector_spec) if selector_spec else None
    wanted_class, wanted_mode = claim_class(claim), _mode(claim)
    fitting: list[tuple[int, Fraction, str, V]] = []
    for volume in volumes:
        meta = _map(volume.get("metadata"))
        modes = _access_modes(volume)
        if not wanted_modes <= modes or _mode(volume) != wanted_mode:
            continue
        if meta.get("deletionTimestamp"):
            continue
        affinity_ok = node is None or _node_admits(volume, node)
        if is_bound_to(volume, claim):
            return volume if affinity_ok else None
        if delay_binding and node is None:
            continue  # the scheduler picks the node first; only a pre-bound volume binds now
        if _phase(volume) not in _FREE_PHASES or _map(volume.get("spec")).get("claimRef"):
            continue
        if selector is not None and not selector.matches(_map(meta.get("labels"))):
            continue
        if volume_class(volume) != wanted_class or not affinity_ok:
            continue
        capacity = _capacity(volume)
        if capacity is None or requested is None or capacity < requested:
            continue
        fitting.append((len(modes), capacity, str(meta.get("name") or ""), volume))
    if not fitting:
        return None
    return min(fitting, key=lambda entry: entry[:3])[3]


def claim_reference(claim: Mapping[str, Any]) -> Obj:
    """The ``claimRef`` a volume bound to ``claim`` carries (``GetReference``)."""
    meta = _map(claim.get("metadata"))
    return {
        "kind": "PersistentVolumeClaim",
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "apiVersion": "v1",
        "resourceVersion": meta.get("resourceVersion"),
    }
