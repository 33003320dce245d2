"""The resource registry: every kind kubelite serves, and how it is addressed.

One ``ResourceType`` per served resource holds what discovery, routing, storage and the field
selector need to know about it: group/version/kind, plural/singular/short names, scope, verbs,
subresources, the pydantic model that validates it, and its selectable fields. The apiserver
routes and discovers from this table alone; clients resolve kinds and paths from it.

Store keys: ``/registry/{group or "core"}/{plural}/{namespace}/{name}`` for namespaced kinds and
``/registry/{group or "core"}/{plural}/{name}`` for cluster-scoped ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

__all__ = ["ALL_VERBS", "Registry", "ResourceType", "Subresource"]

ALL_VERBS: tuple[str, ...] = (
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
)

FieldGetter = Callable[[Mapping[str, Any]], str]
"""Reads one selectable field off an object dict; a missing field reads as ``""``."""


@dataclass(frozen=True, slots=True)
class Subresource:
    name: str
    kind: str
    group: str = ""
    version: str = "v1"
    verbs: tuple[str, ...] = ("get", "patch", "update")


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    model: type[BaseModel]
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    subresources: tuple[Subresource, ...] = ()
    field_getters: Mapping[str, FieldGetter] = field(default_factory=dict)
    """Selectable fields (``fieldSelector``) beyond ``metadata.name``/``metadata.namespace``."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def has_status(self) -> bool:
        return any(s.name == "status" for s in self.subresources)

    def prefix(self, namespace: str | None = None) -> str:
        """Store prefix of all objects (``namespace`` None) or of one namespace; ends with ``/``."""
        base = f"/registry/{self.group or 'core'}/{self.plural}/"
        if self.namespaced and namespace:
            return f"{base}{namespace}/"
        return base

    def key(self, namespace: str | None, name: str) -> str:
        if self.namespaced:
            return f"/registry/{self.group or 'core'}/{self.plural}/{namespace}/{name}"
        return f"/registry/{self.group or 'core'}/{self.plural}/{name}"

    def field_value(self, obj: Mapping[str, Any], path: str) -> str | None:
        """The value of a selectable field, or None if the field is not selectable."""
        meta = obj.get("metadata") or {}
        if path == "metadata.name":
            return str(meta.get("name") or "")
        if path == "metadata.namespace":
            return str(meta.get("namespace") or "")
        getter = self.field_getters.get(path)
        return None if getter is None else getter(obj)


class Registry:
    """Resource types by (group, version, plural), by (group, kind) and by any of their names."""

    def __init__(self, types: list[ResourceType] | None = None) -> None:
        self._by_path: dict[tuple[str, str, str], ResourceType] = {}
        self._by_kind: dict[tuple[str, str], ResourceType] = {}
        for rt in types or []:
            self.register(rt)

    def register(self, rt: ResourceType) -> None:
        self._by_path[(rt.group, rt.version, rt.plural)] = rt
        self._by_kind[(rt.group, rt.kind)] = rt

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def by_kind(self, group: str, kind: str) -> ResourceType | None:
        return self._by_kind.get((group, kind))

    def by_api_version(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        rt = self._by_kind.get((group, kind))
        return rt if rt is not None and rt.version == version else None

    def resolve(self, name: str) -> ResourceType | None:
        """Find a type by plural, singular, short name or kind (case-insensitive), as kubectl does."""
        name = name.lower()
        for rt in self:
            if name in (rt.plural, rt.singular, rt.kind.lower(), *rt.short_names):
                return rt
        return None

    def groups(self) -> dict[str, list[str]]:
        """Group name -> its versions, core ("") first, in registration order."""
        out: dict[str, list[str]] = {}
        for rt in self:
            versions = out.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        return out

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(self._by_path.values())

    def __len__(self) -> int:
        return len(self._by_path)
