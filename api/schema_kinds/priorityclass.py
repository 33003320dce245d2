"""scheduling.k8s.io/v1 PriorityClass, served from its schema (``priorityclass.json``).

The schema carries the shape, ``value``'s int32 range and default 0 (Go's zero), and
``preemptionPolicy``'s enum and default (``SetDefaults_PriorityClass``). ``PriorityClassRules`` is
the rest of ``ValidatePriorityClass``/``ValidatePriorityClassUpdate``
(``pkg/apis/scheduling/validation``): names starting ``system-`` are reserved for the two system
classes, exactly as Kubernetes defines them; a user's class may not exceed one billion; ``value``
and ``preemptionPolicy`` never change. The strategy sets ``generation`` 1 and never moves it.

``SYSTEM_PRIORITY_CLASSES`` are the classes the apiserver creates at start, as Kubernetes'
scheduling post-start hook does.

Not here: the Priority admission plugin (a pod's ``priorityClassName`` into ``spec.priority``,
one ``globalDefault`` class) — it reads other objects: ``services/apiserver/priority_admission.py``.
"""

from __future__ import annotations

import json
from typing import Any

from api.apiextensions import PrinterColumn
from api.errors import Cause
from api.schema_kinds.base import AGE, Rules, SchemaKind

__all__ = [
    "HIGHEST_USER_DEFINABLE_PRIORITY",
    "KIND",
    "SYSTEM_PRIORITY_CLASSES",
    "PriorityClassRules",
]

Obj = dict[str, Any]

HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_CRITICAL_PRIORITY = 2 * HIGHEST_USER_DEFINABLE_PRIORITY
SYSTEM_PREFIX = "system-"

SYSTEM_PRIORITY_CLASSES: tuple[Obj, ...] = tuple(
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "description": description,
    }
    for name, value, description in (
        (
            "system-node-critical",
            SYSTEM_CRITICAL_PRIORITY + 1000,
            "Used for system critical pods that must not be moved from their current node.",
        ),
        (
            "system-cluster-critical",
            SYSTEM_CRITICAL_PRIORITY,
            "Used for system critical pods that must run in the cluster, but can be moved to"
            " another node if necessary.",
        ),
    )
)
"""Kubernetes' ``SystemPriorityClasses()``: the only classes whose names may start ``system-``."""


def _forbidden(field: str, detail: str) -> Cause:
    return {"reason": "FieldValueForbidden", "message": f"Forbidden: {detail}", "field": field}


def _system_class_error(name: str, value: Any, global_default: bool) -> str | None:
    """``IsKnownSystemPriorityClass``'s error, or None for a system class as defined."""
    for known in SYSTEM_PRIORITY_CLASSES:
        if known["metadata"]["name"] == name:
            if value != known["value"]:
                return f"value of {name} PriorityClass must be {known['value']}"
            if global_default:
                return f"globalDefault of {name} PriorityClass must be false"
            return None
    return f"{name} is not a known system priority class"


class PriorityClassRules(Rules):
    def validate(self, obj: Obj, *, old: Obj | None) -> list[Cause]:
        if old is not None:
            return self._update(obj, old)
        name = str((obj.get("metadata") or {}).get("name") or "")
        value = obj.get("value", 0)
        if name.startswith(SYSTEM_PREFIX):
            error = _system_class_error(name, value, obj.get("globalDefault") is True)
            if error is None:
                return []
            return [
                _forbidden(
                    "metadata.name",
                    f"priority class names with '{SYSTEM_PREFIX}' prefix are reserved for system"
                    f" use only. error: {error}",
                )
            ]
        if isinstance(value, int) and value > HIGHEST_USER_DEFINABLE_PRIORITY:
            return [
                _forbidden(
                    "value",
                    "maximum allowed value of a user defined priority is"
                    f" {HIGHEST_USER_DEFINABLE_PRIORITY}",
                )
            ]
        return []

    @staticmethod
    def _update(new: Obj, old: Obj) -> list[Cause]:
        causes = []
        if new.get("value") != old.get("value"):
            causes.append(_forbidden("value", "may not be changed in an update."))
        policy = new.get("preemptionPolicy")
        if policy != old.get("preemptionPolicy"):
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "message": f"Invalid value: {json.dumps(policy)}: field is immutable",
                    "field": "preemptionPolicy",
                }
            )
        return causes


KIND = SchemaKind(
    group="scheduling.k8s.io",
    version="v1",
    kind="PriorityClass",
    plural="priorityclasses",
    namespaced=False,
    schema_file="priorityclass.json",
    short_names=("pc",),
    printer_columns=(
        PrinterColumn("Value", "integer", ".value"),
        PrinterColumn("Global-Default", "boolean", ".globalDefault"),
        AGE,
        PrinterColumn("PreemptionPolicy", "string", ".preemptionPolicy"),
    ),
    rules=PriorityClassRules(),
)
