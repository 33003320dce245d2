"""The write rules of CustomResourceDefinitions and of the custom objects they define.

Why: ``strategy`` gives every built-in kind its create/update rules from ``api.defaults`` and
``api.validation``; a custom kind has no code of its own, only its CRD's schema. These are the
rules Kubernetes' apiextensions apiserver applies instead (``customresource/strategy.go`` and
``customresourcedefinition/strategy.go``), for ``strategy`` to call:

* a custom object is defaulted from its schema (``default``), validated against it (422 with
  Kubernetes' field causes) after its ObjectMeta is checked, and stored under the storage
  version's ``apiVersion``;
* every read (GET, LIST, WATCH; ``served_as``) answers the asked version's ``apiVersion``
  (conversion ``None``; a built-in version with a ``Conversion``, autoscaling/v1, is
  converted) and fills in its schema's defaults, as Kubernetes defaults objects it decodes
  from storage: one stored before a default was added gets it. Nothing is copied when nothing
  changes (a watch then sends the cache's shared frame);
* its ``metadata.generation`` starts at 1 and moves when anything but metadata (and, with a
  status subresource, status) changes; with a status subresource a create drops ``status``;
* a CRD gets ``singular``/``listKind``/conversion/``Age`` column defaults, Kubernetes'
  validation, the cleanup finalizer on create, and an empty status (the apiserver's CRD
  controller, ``crd``, writes its conditions).

A built-in kind served from its schema (``api.schema_kinds``) takes the same path, with its
``Rules`` (``CustomResource.rules``) adding its defaults, its validation after the schema's and
its generation rule.

Unknown fields (pruning) are ``fieldvalidation``'s: it asks ``api.schema_validation`` for them.

``x-kubernetes-validations`` rules (``api.validation_rules``) are compiled when a CRD is
written (one that does not compile refuses the CRD) and evaluated on every write of a custom
object, after the schema's checks — unless those found a value of the wrong type, when Kubernetes
refuses without evaluating them.

Limits: defaults on read come from the schema of the version read (Kubernetes takes those of
the version the object is stored as; they differ only where versions' defaults differ); a LIST
or GET walks the schema per object per request (a watch event is served once per version,
``CacheEvent.served``); unknown fields are pruned when written, not again when read.
"""

from __future__ import annotations

from typing import Any

from api.apiextensions import (
    CLEANUP_FINALIZER,
    default_crd,
    json_path_values,
    validate_crd,
    validate_crd_update,
)
from api.errors import Cause
from api.registry import ResourceType
from api.schema_validation import apply_defaults, defaulted, validate
from api.validation import validate_object_meta
from api.validation_rules import BLOCKED, rule_failures, rule_problems

__all__ = [
    "custom_generation",
    "custom_scale",
    "default_custom",
    "is_crd",
    "prepare_custom_create",
    "served_as",
    "set_custom_replicas",
    "validate_custom",
]

Obj = dict[str, Any]


def is_crd(rt: ResourceType) -> bool:
    return (rt.group, rt.kind) == ("apiextensions.k8s.io", "CustomResourceDefinition")


def default_custom(rt: ResourceType, obj: Obj) -> None:
    """Schema defaults for a custom object, CRD defaults for a CRD (in place)."""
    if rt.custom is not None:
        apply_defaults(rt.custom.schema, obj)
        if rt.custom.rules is not None:
            rt.custom.rules.default(obj)
        obj["apiVersion"] = f"{rt.group}/{rt.custom.storage_version}"
    elif is_crd(rt):
        default_crd(obj)


def validate_custom(rt: ResourceType, obj: Obj, *, old: Obj | None) -> list[Cause]:
    """The causes why a custom object or a CRD is invalid (ObjectMeta first, as Kubernetes)."""
    meta = obj.get("metadata")
    causes = validate_object_meta(rt, meta if isinstance(meta, dict) else {})
    if rt.custom is not None:
        body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
        causes += validate(rt.custom.schema, body)
        if any(cause["reason"] == "FieldValueTypeInvalid" for cause in causes):
            causes.append(BLOCKED)
        else:
            causes += rule_failures(rt.custom.schema, obj, old)
        if rt.custom.rules is not None:
            causes += rt.custom.rules.validate(obj, old=old)
    elif is_crd(rt):
        causes += validate_crd(obj) if old is None else validate_crd_update(obj, old)
        causes += _crd_rule_problems(obj)
    return causes


def _crd_rule_problems(crd: Obj) -> list[Cause]:
    """Every version's CEL rules compiled: a CRD whose rule does not compile is refused."""
    causes: list[Cause] = []
    for i, version in enumerate((crd.get("spec") or {}).get("versions") or ()):
        schema = ((version or {}).get("schema") or {}).get("openAPIV3Schema")
        if isinstance(schema, dict):
            path = f"spec.versions[{i}].schema.openAPIV3Schema"
            causes += rule_problems(schema, path=path)
    return causes


def prepare_custom_create(rt: ResourceType, obj: Obj) -> None:
    """What a create of a custom object or CRD sets beyond the generic rules."""
    meta = obj["metadata"]
    meta["generation"] = 1
    if rt.custom is not None and rt.custom.has_status:
        obj.pop("status", None)
    if is_crd(rt):
        finalizers = list(meta.get("finalizers") or [])
        if CLEANUP_FINALIZER not in finalizers:
            finalizers.append(CLEANUP_FINALIZER)
        meta["finalizers"] = finalizers


def custom_generation(rt: ResourceType, new: Obj, old: Obj) -> int:
    """The generation after an update: one more when anything outside metadata (and status,
    where status is a subresource) changed; as its rules say for a built-in kind."""
    generation = int((old.get("metadata") or {}).get("generation") or 1)
    if rt.custom is not None and rt.custom.rules is not None:
        return generation + int(rt.custom.rules.generation_moves(new, old))
    ignored = {"metadata", "apiVersion"} | ({"status"} if rt.has_status else set())
    old = served_as(rt, old)  # as read: a default added to the schema since is no change
    changed = {k: v for k, v in new.items() if k not in ignored} != {
        k: v for k, v in old.items() if k not in ignored
    }
    return generation + int(changed)


def served_as(rt: ResourceType, obj: Obj) -> Obj:
    """A stored custom object as ``rt``'s version serves it: its schema's defaults filled in
    (Kubernetes defaults on read as well as on write, so an object stored before a default was
    added gets it) and its ``apiVersion`` rewritten (conversion ``None``). ``obj`` itself when
    nothing changes; else a copy sharing what did not change (``obj`` may be the watch cache's).
    A built-in version served from another's storage (``rt.conversion``) is converted."""
    if rt.conversion is not None:
        return rt.conversion.from_storage(obj)
    if rt.custom is None:
        return obj
    served: Obj = defaulted(rt.custom.schema, obj)
    if served.get("apiVersion") != rt.api_version:
        served = {**served, "apiVersion": rt.api_version}
    return served


def custom_scale(rt: ResourceType, obj: Obj) -> Obj | None:
    """The ``autoscaling/v1`` Scale of a custom object, read through its CRD's scale paths
    (None for other kinds)."""
    if rt.custom is None or rt.custom.scale is None:
        return None
    paths = rt.custom.scale
    meta = obj.get("metadata") or {}
    spec_replicas = json_path_values(obj, paths.spec_replicas)
    status_replicas = json_path_values(obj, paths.status_replicas)
    selector = json_path_values(obj, paths.label_selector) if paths.label_selector else []
    status: Obj = {"replicas": status_replicas[0] if status_replicas else 0}
    if selector and isinstance(selector[0], str):
        status["selector"] = selector[0]
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": spec_replicas[0] if spec_replicas else 0},
        "status": status,
    }


def set_custom_replicas(rt: ResourceType, obj: Obj, replicas: int) -> bool:
    """Write ``replicas`` at the CRD's ``specReplicasPath`` (a dotted path) in place; False for
    kinds without custom scale paths."""
    if rt.custom is None or rt.custom.scale is None:
        return False
    *parents, leaf = rt.custom.scale.spec_replicas.lstrip(".").split(".")
    node = obj
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[leaf] = replicas
    return True
