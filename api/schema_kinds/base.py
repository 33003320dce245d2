"""What a built-in kind served from its schema is made of (see ``api.schema_kinds``).

``SchemaKind`` is the data (names, scope, schema file, printer columns) and ``Rules`` the
strategy base every kind's rules extend; ``load_schema`` reads a schema file of this package.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from api.apiextensions import CustomResource, KindRules, PrinterColumn
from api.errors import Cause

__all__ = ["AGE", "Rules", "SchemaKind", "load_schema"]

Obj = dict[str, Any]

AGE = PrinterColumn("Age", "date", ".metadata.creationTimestamp")
"""The column every Kubernetes table printer has."""


class Rules:
    """A kind's strategy beyond its schema; subclass and override what the kind does more."""

    def default(self, obj: Obj) -> None:
        """Defaults the schema's ``default`` values cannot express (in place); none here."""

    def validate(self, obj: Obj, *, old: Obj | None) -> list[Cause]:
        """Causes beyond the schema's on create (``old`` None) and update; none here."""
        return []

    def generation_moves(self, new: Obj, old: Obj) -> bool:
        """Whether an update bumps ``metadata.generation``: never here (set to 1 on create)."""
        return False


@cache
def load_schema(file: str) -> dict[str, Any]:
    """The structural schema ``api/schema_kinds/<file>`` (read once; do not mutate it)."""
    text = resources.files("api.schema_kinds").joinpath(file).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@dataclass(frozen=True)
class SchemaKind:
    """A built-in kind as data: what ``api.registry`` needs to register it."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    schema_file: str
    printer_columns: tuple[PrinterColumn, ...]
    rules: KindRules = field(default_factory=Rules)
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()

    def custom_resource(self) -> CustomResource:
        """What the apiserver's schema path serves the kind from."""
        return CustomResource(
            crd_name="",
            storage_version=self.version,
            schema=load_schema(self.schema_file),
            printer_columns=self.printer_columns,
            rules=self.rules,
        )
