"""apiextensions.k8s.io/v1 CustomResourceDefinition: the kind, its rules, and the kinds it defines.

Why: a CRD is data that becomes an API. This module holds what Kubernetes' apiextensions
apiserver knows about a CRD as a document — its validation (``ValidateCustomResourceDefinition``:
names, a group with a dot, exactly one storage version, a served version, a structural schema per
version, scope and the names' kind immutable once established...), its defaults (``Age`` as the
printer column when none is given, ``listKind``, ``singular``), the conditions the apiserver sets
(``NamesAccepted``, ``Established``, ``Terminating``) — and what each served version of a CRD needs
to be served: a ``CustomResource`` (the schema, the
subresources, the printer columns, the deprecation warning) so the apiserver serves the kind from
the schema alone (``api.schema_validation``).

What it does not own: watching CRDs and adding or removing their kinds while the apiserver runs
and building their registry entries (``services/apiserver/crd.py``); how objects are stored.

Limits: conversion strategy ``None`` only (``Webhook`` is refused) — versions differ by
``apiVersion`` alone; ``x-kubernetes-validations`` rules are compiled and evaluated by
``api.validation_rules``, not here; ``selectableFields`` are not offered (``metadata.name``/``metadata.namespace`` are).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import Field

from api.errors import Cause
from api.meta import KubeModel, ObjectMeta
from api.names import is_dns1035_label, is_dns1123_label, is_dns1123_subdomain
from api.schema_validation import structural_problems

__all__ = [
    "CLEANUP_FINALIZER",
    "GROUP",
    "CustomObject",
    "CustomResource",
    "CustomResourceDefinition",
    "KindRules",
    "PrinterColumn",
    "ScalePaths",
    "condition",
    "custom_resource",
    "default_crd",
    "names_of",
    "served_versions",
    "set_condition",
    "storage_version",
    "validate_crd",
    "validate_crd_update",
]

GROUP = "apiextensions.k8s.io"
CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
"""Set on every CRD; the apiserver removes it once the CRD's objects are all deleted."""

_KIND = re.compile(r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$")
_KIND_MSG = "may have mixed case, but should otherwise match: [a-z]([-a-z0-9]*[a-z0-9])?"
_SCOPES = ("Cluster", "Namespaced")
_COLUMN_TYPES = ("integer", "number", "string", "boolean", "date")


class CustomResourceDefinition(KubeModel):
    api_version: str = f"{GROUP}/v1"
    kind: str = "CustomResourceDefinition"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: dict[str, Any] = Field(default_factory=dict)
    """group, names, scope, versions[] (name, served, storage, schema.openAPIV3Schema,
    subresources, additionalPrinterColumns, deprecated, deprecationWarning), conversion."""
    status: dict[str, Any] | None = None
    """conditions, acceptedNames, storedVersions — the apiserver's to write."""


class CustomObject(KubeModel):
    """Any custom object: the schema (``CustomResource.schema``) describes the rest."""

    api_version: str
    kind: str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)


# -- what a served version carries ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PrinterColumn:
    name: str
    type: str
    json_path: str
    format: str = ""
    description: str = ""
    priority: int = 0


@dataclass(frozen=True, slots=True)
class ScalePaths:
    """The ``scale`` subresource: where the replica counts and the selector live (JSON paths)."""

    spec_replicas: str
    status_replicas: str
    label_selector: str | None = None


class KindRules(Protocol):
    """What a built-in kind served from its schema (``api.schema_kinds``) checks and sets beyond
    the schema: its registry strategy's defaults, validation and generation rule."""

    def default(self, obj: dict[str, Any]) -> None:
        """Defaults the schema's ``default`` values cannot express (in place)."""

    def validate(self, obj: dict[str, Any], *, old: dict[str, Any] | None) -> list[Cause]:
        """Causes beyond the schema's: semantic rules on create, immutable fields on update."""

    def generation_moves(self, new: dict[str, Any], old: dict[str, Any]) -> bool:
        """Whether an update bumps ``metadata.generation`` (it starts at 1)."""


@dataclass(frozen=True)
class CustomResource:
    """What the apiserver needs, beyond a ``ResourceType``, to serve one version of a kind from
    its schema: a CRD's, or a built-in one's (``rules`` set, ``crd_name`` empty)."""

    crd_name: str
    storage_version: str
    schema: Mapping[str, Any]
    printer_columns: tuple[PrinterColumn, ...]
    scale: ScalePaths | None = None
    deprecation_warning: str | None = None
    """Sent as a ``Warning`` header on every request to a deprecated version."""
    has_status: bool = False
    rules: KindRules | None = None
    """A built-in kind's strategy (``api.schema_kinds``); None for a CRD's kind."""

    @property
    def builtin(self) -> bool:
        """A built-in kind served from its schema: it takes strategic merge patches, its names
        are reserved against CRDs, and its table prints Go's zero value for a missing field."""
        return self.rules is not None


# -- defaults, names, conditions ---------------------------------------------------------------


def _spec(crd: Mapping[str, Any]) -> dict[str, Any]:
    spec = crd.get("spec")
    return spec if isinstance(spec, dict) else {}


def _versions(crd: Mapping[str, Any]) -> list[dict[str, Any]]:
    versions = _spec(crd).get("versions")
    return [v for v in versions if isinstance(v, dict)] if isinstance(versions, list) else []


def default_crd(crd: dict[str, Any]) -> None:
    """``SetDefaults_CustomResourceDefinition``: ``singular`` and ``listKind`` from the
    names, conversion ``None``, and the ``Age`` printer column where a version has none."""
    spec = _spec(crd)
    names = spec.get("names")
    if isinstance(names, dict):
        if not names.get("singular") and isinstance(names.get("kind"), str):
            names["singular"] = names["kind"].lower()
        if not names.get("listKind") and isinstance(names.get("kind"), str):
            names["listKind"] = names["kind"] + "List"
    if isinstance(spec, dict) and spec and "conversion" not in spec:
        spec["conversion"] = {"strategy": "None"}
    for version in _versions(crd):
        if not version.get("additionalPrinterColumns"):
            version["additionalPrinterColumns"] = [
                {
                    "name": "Age",
                    "type": "date",
                    "jsonPath": ".metadata.creationTimestamp",
                }
            ]


def names_of(crd: Mapping[str, Any]) -> dict[str, Any]:
    names = _spec(crd).get("names")
    return names if isinstance(names, dict) else {}


def condition(crd: Mapping[str, Any], type_: str) -> dict[str, Any] | None:
    status = crd.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    for c in conditions if isinstance(conditions, list) else ():
        if isinstance(c, dict) and c.get("type") == type_:
            return c
    return None


def set_condition(
    crd: dict[str, Any], type_: str, status: str, *, reason: str, message: str, now: str
) -> None:
    """Set one condition in place; its ``lastTransitionTime`` moves only when ``status`` does."""
    st = crd.get("status")
    if not isinstance(st, dict):
        st = crd["status"] = {}
    conditions = st.get("conditions")
    if not isinstance(conditions, list):
        conditions = st["conditions"] = []
    old = condition(crd, type_)
    new = {
        "type": type_,
        "status": status,
        "lastTransitionTime": (
            old["lastTransitionTime"]
            if old is not None and old.get("status") == status and old.get("lastTransitionTime")
            else now
        ),
        "reason": reason,
        "message": message,
    }
    if old is None:
        conditions.append(new)
    else:
        conditions[conditions.index(old)] = new


# -- validation ---------------------------------------------------------------------------------


def _cause(reason: str, field: str, message: str) -> Cause:
    return {"reason": reason, "message": message, "field": field}


def _invalid(field: str, value: Any, detail: str) -> Cause:
    shown = f'"{value}"' if isinstance(value, str) else str(value)
    return _cause("FieldValueInvalid", field, f"Invalid value: {shown}: {detail}")


def _required(field: str, detail: str = "") -> Cause:
    return _cause("FieldValueRequired", field, "Required value" + (f": {detail}" if detail else ""))


def _not_supported(field: str, value: Any, supported: tuple[str, ...]) -> Cause:
    values = ", ".join(f'"{s}"' for s in supported)
    return _cause(
        "FieldValueNotSupported",
        field,
        f'Unsupported value: "{value}": supported values: {values}',
    )


def _label_causes(field: str, value: Any, check: Any) -> list[Cause]:
    if not isinstance(value, str) or not value:
        return []
    return [_invalid(field, value, msg) for msg in check(value)]


def _names_causes(names: Mapping[str, Any], field: str) -> list[Cause]:
    causes: list[Cause] = []
    plural = names.get("plural")
    if not plural:
        causes.append(_required(f"{field}.plural"))
    causes += _label_causes(f"{field}.plural", plural, is_dns1123_label)
    causes += _label_causes(f"{field}.singular", names.get("singular"), is_dns1123_label)
    kind, list_kind = names.get("kind"), names.get("listKind")
    if not kind:
        causes.append(_required(f"{field}.kind"))
    elif not isinstance(kind, str) or not _KIND.match(kind):
        causes.append(_invalid(f"{field}.kind", kind, _KIND_MSG))
    if not list_kind:
        causes.append(_required(f"{field}.listKind"))
    elif not isinstance(list_kind, str) or not _KIND.match(list_kind):
        causes.append(_invalid(f"{field}.listKind", list_kind, _KIND_MSG))
    if kind and kind == list_kind:
        causes.append(
            _invalid(f"{field}.listKind", list_kind, "kind and listKind may not be the same")
        )
    for i, short in enumerate(names.get("shortNames") or ()):
        causes += _label_causes(f"{field}.shortNames[{i}]", short, is_dns1035_label)
    for i, category in enumerate(names.get("categories") or ()):
        causes += _label_causes(f"{field}.categories[{i}]", category, is_dns1035_label)
    return causes


def _version_causes(version: dict[str, Any], field: str) -> list[Cause]:
    causes: list[Cause] = []
    name = version.get("name")
    if not name:
        causes.append(_required(f"{field}.name"))
    causes += _label_causes(f"{field}.name", name, is_dns1035_label)
    schema = (version.get("schema") or {}).get("openAPIV3Schema")
    schema_field = f"{field}.schema.openAPIV3Schema"
    if not isinstance(schema, dict):
        causes.append(_required(schema_field, "schemas are required"))
    else:
        causes += structural_problems(schema, path=schema_field)
    subresources = version.get("subresources") or {}
    scale = subresources.get("scale") if isinstance(subresources, dict) else None
    if isinstance(scale, dict):
        for key in ("specReplicasPath", "statusReplicasPath"):
            path = scale.get(key)
            if not path:
                causes.append(_required(f"{field}.subresources.scale.{key}"))
            elif not str(path).startswith("."):
                causes.append(
                    _invalid(
                        f"{field}.subresources.scale.{key}",
                        path,
                        "should be a json path under .spec or .status",
                    )
                )
    for i, column in enumerate(version.get("additionalPrinterColumns") or ()):
        where = f"{field}.additionalPrinterColumns[{i}]"
        if not isinstance(column, dict):
            continue
        for key in ("name", "type", "jsonPath"):
            if not column.get(key):
                causes.append(_required(f"{where}.{key}"))
        if column.get("type") and column["type"] not in _COLUMN_TYPES:
            causes.append(_not_supported(f"{where}.type", column["type"], _COLUMN_TYPES))
    return causes


def validate_crd(crd: Mapping[str, Any]) -> list[Cause]:
    """Why ``crd`` (defaults applied) is invalid, as ``ValidateCustomResourceDefinition`` says."""
    causes: list[Cause] = []
    spec = _spec(crd)
    names = names_of(crd)
    group = spec.get("group")
    meta = crd.get("metadata") or {}
    if meta.get("name") != f"{names.get('plural')}.{group}":
        causes.append(
            _invalid(
                "metadata.name", meta.get("name") or "", 'must be spec.names.plural+"."+spec.group'
            )
        )
    if not group:
        causes.append(_required("spec.group"))
    elif not isinstance(group, str) or "." not in group:
        causes.append(_invalid("spec.group", group, "should be a domain with at least one dot"))
    else:
        causes += _label_causes("spec.group", group, is_dns1123_subdomain)
    scope = spec.get("scope")
    if not scope:
        causes.append(_required("spec.scope"))
    elif scope not in _SCOPES:
        causes.append(_not_supported("spec.scope", scope, _SCOPES))
    causes += _names_causes(names, "spec.names")
    versions = _versions(crd)
    if not versions:
        causes.append(_required("spec.versions", "must have at least one version"))
    seen: set[str] = set()
    for i, version in enumerate(versions):
        causes += _version_causes(version, f"spec.versions[{i}]")
        name = version.get("name")
        if isinstance(name, str) and name in seen:
            causes.append(
                _cause(
                    "FieldValueDuplicate", f"spec.versions[{i}].name", f'Duplicate value: "{name}"'
                )
            )
        if isinstance(name, str):
            seen.add(name)
    if versions:
        storage = [v for v in versions if v.get("storage") is True]
        if len(storage) != 1:
            causes.append(
                _cause(
                    "FieldValueInvalid",
                    "spec.versions",
                    "Invalid value: []apiextensions.CustomResourceDefinitionVersion{...}: "
                    "must have exactly one version marked as storage version",
                )
            )
        if not any(v.get("served") is True for v in versions):
            causes.append(
                _cause(
                    "FieldValueInvalid",
                    "spec.versions",
                    "Invalid value: []apiextensions.CustomResourceDefinitionVersion{...}: "
                    "must have at least one version marked as served",
                )
            )
    strategy = (spec.get("conversion") or {}).get("strategy")
    if strategy not in (None, "None"):
        causes.append(_not_supported("spec.conversion.strategy", strategy, ("None",)))
    return causes


def validate_crd_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
    """``validate_crd(new)`` plus what may not change: the scope, and the group."""
    causes = validate_crd(new)
    new_spec, old_spec = _spec(new), _spec(old)
    if new_spec.get("scope") != old_spec.get("scope"):
        causes.append(_invalid("spec.scope", new_spec.get("scope"), "field is immutable"))
    if new_spec.get("group") != old_spec.get("group"):
        causes.append(_invalid("spec.group", new_spec.get("group"), "field is immutable"))
    return causes


# -- CRD -> registry entries -------------------------------------------------------------------


def _printer_columns(version: Mapping[str, Any]) -> tuple[PrinterColumn, ...]:
    return tuple(
        PrinterColumn(
            name=str(c.get("name")),
            type=str(c.get("type")),
            json_path=str(c.get("jsonPath")),
            format=str(c.get("format") or ""),
            description=str(c.get("description") or ""),
            priority=int(c.get("priority") or 0),
        )
        for c in version.get("additionalPrinterColumns") or ()
        if isinstance(c, dict)
    )


def _scale(version: Mapping[str, Any]) -> ScalePaths | None:
    scale = (version.get("subresources") or {}).get("scale")
    if not isinstance(scale, dict):
        return None
    return ScalePaths(
        spec_replicas=str(scale.get("specReplicasPath")),
        status_replicas=str(scale.get("statusReplicasPath")),
        label_selector=scale.get("labelSelectorPath") or None,
    )


def _deprecation(group: str, kind: str, version: Mapping[str, Any]) -> str | None:
    if not version.get("deprecated"):
        return None
    warning = version.get("deprecationWarning")
    if isinstance(warning, str) and warning:
        return warning
    return f"{group}/{version.get('name')} {kind} is deprecated"


def storage_version(crd: Mapping[str, Any]) -> str:
    return next((str(v["name"]) for v in _versions(crd) if v.get("storage") is True), "")


def served_versions(crd: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [v for v in _versions(crd) if v.get("served") is True]


def custom_resource(crd: Mapping[str, Any], version: Mapping[str, Any]) -> CustomResource:
    """What serving ``version`` of a valid CRD takes beyond its names."""
    group, kind = str(_spec(crd).get("group")), str(names_of(crd).get("kind"))
    return CustomResource(
        crd_name=str((crd.get("metadata") or {}).get("name")),
        storage_version=storage_version(crd),
        schema=(version.get("schema") or {}).get("openAPIV3Schema") or {},
        printer_columns=_printer_columns(version),
        scale=_scale(version),
        deprecation_warning=_deprecation(group, kind, version),
        has_status="status" in (version.get("subresources") or {}),
    )


# -- printer columns ---------------------------------------------------------------------------

_STEP = re.compile(
    r"""\.(?P<name>[A-Za-z0-9_\-/]+)
      | \[(?P<index>-?\d+|\*)\]
      | \[\?\(@\.(?P<field>[A-Za-z0-9_\-.]+)\s*==\s*(?P<quote>["'])(?P<value>.*?)(?P=quote)\)\]
      | \.?\[\s*(?P<qq>["'])(?P<key>.*?)(?P=qq)\s*\]""",
    re.VERBOSE,
)


def json_path_values(obj: Any, path: str) -> list[Any]:
    """The values a printer column's ``jsonPath`` selects (the simple JSONPath Kubernetes
    allows there: ``.a.b``, ``.a[0]``, ``.a[*].b``, ``.a[?(@.type=="Ready")].status``).
    An unsupported path selects nothing."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    text = text.removeprefix("$")
    current = [obj]
    pos = 0
    while pos < len(text):
        step = _STEP.match(text, pos)
        if step is None:
            return []
        pos = step.end()
        current = [v for value in current for v in _step(value, step)]
    return current


def _step(value: Any, step: re.Match[str]) -> list[Any]:
    name = step.group("name") or step.group("key")
    if name is not None:
        return [value[name]] if isinstance(value, dict) and name in value else []
    if not isinstance(value, list):
        return []
    index = step.group("index")
    if index == "*":
        return list(value)
    if index is not None:
        i = int(index)
        return [value[i]] if -len(value) <= i < len(value) else []
    field, wanted = str(step.group("field")), step.group("value")
    out = []
    for item in value:
        found = json_path_values(item, "." + field)
        if found and str(found[0]) == wanted:
            out.append(item)
    return out
