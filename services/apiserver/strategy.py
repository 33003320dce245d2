"""Per-kind rules for create, update and status update: what the server sets, keeps and checks.

Why: Kubernetes' registry gives every kind a *strategy* — on create it fills in uid,
creationTimestamp and generation and resets status where clients may not set it; on update it
keeps what clients may not change (uid, creationTimestamp, deletionTimestamp, status when the
kind has a status subresource) and bumps ``generation`` when the spec changes; a status update
changes status alone. Handlers call these functions and never make those decisions themselves.

What it owns: ``prepare_for_create``, ``prepare_for_update``, ``prepare_for_status_update``,
``default_object`` (``api.defaults``), ``validate_object`` (``api.validation``'s shape and
semantic rules, plus ``admission_cel``'s checks of admission expressions, as one 422
``Invalid`` with field causes), ``validate_status_object`` (the same for a status write, which
leaves the spec as stored), and the kind facts handlers ask about (``allows_create_on_update``,
``returns_deleted_object``, ``is_graceful``).

managedFields are ``apply``'s: a create keeps those the client sent for it to build on.

Limits: kinds unknown to this module get the generic rules; no field-level immutability beyond
what ``api.validation`` checks.
"""

from __future__ import annotations

import copy
from typing import Any

from api.defaults import apply_defaults, fill_serialised
from api.errors import BadRequest, Cause, Invalid
from api.meta import now_time
from api.registry import ResourceType
from api.uids import new_uid
from api.validation import (
    only_status_differs,
    validate,
    validate_status_update,
    validate_update,
)
from services.apiserver.admission_cel import configuration_problems
from services.apiserver.custom_objects import (
    custom_generation,
    default_custom,
    is_crd,
    prepare_custom_create,
    validate_custom,
)

__all__ = [
    "allows_create_on_update",
    "default_object",
    "has_spec",
    "is_graceful",
    "prepare_for_create",
    "prepare_for_status_update",
    "prepare_for_update",
    "returns_deleted_object",
    "validate_object",
    "validate_status_object",
]

Obj = dict[str, Any]

# Metadata only the server writes; an update keeps the stored values.
_SYSTEM_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds")

# Kinds whose REST storage answers DELETE with the object itself (ReturnDeletedObject upstream);
# the others answer with a Status naming what was deleted.
_RETURN_DELETED = {("", "Pod"), ("", "Namespace"), ("", "Service")}

# Kinds a PUT may create (AllowCreateOnUpdate upstream).
_CREATE_ON_UPDATE = {("", "Event"), ("coordination.k8s.io", "Lease"), ("", "Endpoints")}

# Kinds whose create keeps the status the client sent (a kubelet registers its Node with status).
_STATUS_ON_CREATE = {("", "Node"), ("", "Event")}


def has_spec(rt: ResourceType) -> bool:
    return "spec" in rt.model.model_fields


def allows_create_on_update(rt: ResourceType) -> bool:
    return (rt.group, rt.kind) in _CREATE_ON_UPDATE


def returns_deleted_object(rt: ResourceType) -> bool:
    return (rt.group, rt.kind) in _RETURN_DELETED


def is_graceful(rt: ResourceType) -> bool:
    """Pods are deleted in two steps (deletionTimestamp first, the kubelet confirms)."""
    return rt.group == "" and rt.kind == "Pod"


def _meta(obj: Obj) -> dict[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    return meta


def prepare_for_create(rt: ResourceType, obj: Obj) -> None:
    """Fill in what the server owns on a new object (name and namespace are already set)."""
    meta = _meta(obj)
    if meta.pop("resourceVersion", None):
        raise BadRequest("resourceVersion should not be set on objects to be created")
    meta["uid"] = new_uid()
    meta["creationTimestamp"] = now_time()
    for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
        meta.pop(key, None)
    if has_spec(rt):
        meta["generation"] = 1
    else:
        meta.pop("generation", None)
    kind = (rt.group, rt.kind)
    if kind == ("", "Namespace"):
        spec = obj.setdefault("spec", {})
        finalizers = list(spec.get("finalizers") or [])
        if "kubernetes" not in finalizers:
            finalizers.append("kubernetes")
        spec["finalizers"] = finalizers
        obj["status"] = {"phase": "Active"}
    elif kind == ("", "Pod"):
        obj["status"] = {}  # defaulting sets phase Pending and the QoS class
    elif kind == ("", "PersistentVolume"):
        obj["status"] = {"phase": "Pending", "lastPhaseTransitionTime": now_time()}
    elif rt.has_status and kind not in _STATUS_ON_CREATE:
        obj["status"] = {}
    if kind == ("apps", "DaemonSet"):
        _set_template_generation(obj, 1)
    if rt.custom is not None or is_crd(rt):
        prepare_custom_create(rt, obj)


def _names(value: Any) -> set[str]:
    """The strings of a list (what validation will insist ``finalizers`` is)."""
    return {v for v in value if isinstance(v, str)} if isinstance(value, list) else set()


def prepare_for_update(rt: ResourceType, new: Obj, old: Obj) -> None:
    """Make ``new`` (a client's PUT/PATCH result) keep what the client may not change."""
    meta, old_meta = _meta(new), _meta(old)
    for key in _SYSTEM_META:
        if key in old_meta:
            meta[key] = old_meta[key]
        else:
            meta.pop(key, None)
    meta.pop("selfLink", None)
    meta["namespace"] = old_meta.get("namespace")
    if meta["namespace"] is None:
        meta.pop("namespace")
    if old_meta.get("deletionTimestamp"):
        added = _names(meta.get("finalizers")) - _names(old_meta.get("finalizers"))
        if added:
            raise Invalid.of(
                rt.kind,
                str(old_meta.get("name")),
                [
                    {
                        "reason": "FieldValueForbidden",
                        "message": "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers "
                        + repr(sorted(added)),
                        "field": "metadata.finalizers",
                    }
                ],
                group=rt.group,
            )
    if rt.has_status:
        if "status" in old:
            new["status"] = copy.deepcopy(old["status"])
        else:
            new.pop("status", None)
    if (rt.group, rt.kind) == ("", "Namespace"):
        # spec.finalizers change only through .../finalize
        new["spec"] = copy.deepcopy(old.get("spec") or {})
    if rt.custom is not None:
        meta["generation"] = custom_generation(rt, new, old)
    elif has_spec(rt):
        generation = int(old_meta.get("generation") or 1)
        if new.get("spec") != old.get("spec"):
            generation += 1
        meta["generation"] = generation
    else:
        meta.pop("generation", None)
    if (rt.group, rt.kind) == ("apps", "DaemonSet"):
        template_changed = (new.get("spec") or {}).get("template") != (old.get("spec") or {}).get(
            "template"
        )
        _set_template_generation(new, _template_generation(old) + int(template_changed))


_TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"
"""A DaemonSet's ``spec.templateGeneration`` as apps/v1 carries it: the server's to set (1 on
create, one more whenever the template changes); the controller labels pods with it."""


def _template_generation(obj: Obj) -> int:
    value = (_meta(obj).get("annotations") or {}).get(_TEMPLATE_GENERATION)
    try:
        return int(value) if value is not None else 1
    except ValueError:
        return 1


def _set_template_generation(obj: Obj, generation: int) -> None:
    annotations = _meta(obj).get("annotations")
    if not isinstance(annotations, dict):
        annotations = _meta(obj)["annotations"] = {}
    annotations[_TEMPLATE_GENERATION] = str(generation)


def prepare_for_status_update(rt: ResourceType, new: Obj, old: Obj) -> Obj:
    """The stored object with only its status taken from ``new``.

    The result has its own ``metadata`` (shallow) and ``new``'s status itself, changed in place
    (``qosClass`` ...): the caller gives it up — a request body or a patch result, used for
    nothing else. A retried write may hand the same ``new`` again; every change made here is
    worked out from ``old`` again, so the retry's result is what a fresh body would give.
    Everything else is ``old``'s own values, shared, not copied — ``old`` is the caller's
    freshly decoded object, and nothing downstream of a status write changes a spec in place (a
    webhook's patch works on a copy)."""
    out = {**old, "metadata": dict(old.get("metadata") or {})}
    if "status" in new:
        out["status"] = new["status"]
    else:
        out.pop("status", None)
    if (rt.group, rt.kind) == ("", "Pod") and isinstance(out.get("status"), dict):
        # qosClass is computed from the spec and cannot be changed
        qos = (old.get("status") or {}).get("qosClass")
        if qos is not None:
            out["status"]["qosClass"] = qos
    if (rt.group, rt.kind) == ("", "PersistentVolume") and isinstance(out.get("status"), dict):
        # the time of the last phase change is the server's to stamp
        old_status = old.get("status") or {}
        if out["status"].get("phase") != old_status.get("phase"):
            out["status"]["lastPhaseTransitionTime"] = now_time()
        elif "lastPhaseTransitionTime" in old_status:
            out["status"]["lastPhaseTransitionTime"] = old_status["lastPhaseTransitionTime"]
    fill_serialised(rt.kind, out)  # a status written without status.replicas still carries it
    return out


def default_object(rt: ResourceType, obj: Obj) -> None:
    """Apply Kubernetes' defaults (``restartPolicy: Always``, ``dnsPolicy`` ...) in place; a
    custom object's come from its schema (``custom_objects``)."""
    if rt.custom is not None or is_crd(rt):
        default_custom(rt, obj)
        return
    apply_defaults(rt.kind, obj)


def validate_object(rt: ResourceType, obj: Obj, *, old: Obj | None = None) -> None:
    """422 ``Invalid`` naming every bad field (``api.validation``), or nothing."""
    if rt.custom is not None or is_crd(rt):
        causes = validate_custom(rt, obj, old=old)
    else:
        causes = validate(rt, obj) if old is None else validate_update(rt, obj, old)
        if rt.group == "admissionregistration.k8s.io":
            causes += configuration_problems(rt.kind, obj)
    _refuse_invalid(rt, obj, causes)


def validate_status_object(rt: ResourceType, obj: Obj, *, old: Obj) -> None:
    """``validate_object`` for a status write (``prepare_for_status_update``'s result, then
    admission's): its metadata and status, not the spec it shares with ``old``
    (``api.validation.validate_status_update``) — the same 422 for a bad status, at a fraction of
    the cost. A custom object's schema is checked whole, as before."""
    if rt.custom is not None or is_crd(rt):
        causes = validate_custom(rt, obj, old=old)
    else:
        causes = validate_status_update(rt, obj, old)
        if rt.group == "admissionregistration.k8s.io" and not only_status_differs(obj, old):
            causes += configuration_problems(rt.kind, obj)
    _refuse_invalid(rt, obj, causes)


def _refuse_invalid(rt: ResourceType, obj: Obj, causes: list[Cause]) -> None:
    if causes:
        meta = _meta(obj)
        name = str(meta.get("name") or meta.get("generateName") or "")
        raise Invalid.of(rt.kind, name, causes, group=rt.group)
