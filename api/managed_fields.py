"""Field ownership for server-side apply: field sets, FieldsV1, merge, prune and conflicts.

Why: Kubernetes records, on every object, which *manager* owns which field
(``metadata.managedFields``), so that two writers of one object — a person's ``kubectl apply``,
an HPA, an operator — learn when they fight over a field instead of silently undoing each other.
sigs.k8s.io/structured-merge-diff does the work upstream; this module is that engine over plain
JSON values, with no knowledge of HTTP or of the store.

What it owns:

* ``Shape``: what the schema says about a value — a struct or a map (``x-kubernetes-map-type``
  granular/atomic), a list that is ``atomic``, a ``set`` or a ``map`` keyed by
  ``x-kubernetes-list-map-keys`` (with key defaults, as ``ports[].protocol: TCP``).
  ``shape_from_schema`` reads a CRD's structural schema; ``shape_for_builtin`` reads the
  strategic-merge tables (``api.patches.schema``) with Kubernetes' own list-map keys where they
  differ from the patch merge key.
* Paths in FieldsV1's spelling: a tuple of ``f:<field>``, ``k:<json keys>``, ``v:<json value>``,
  ``i:<index>`` elements; ``field_set`` (structured-merge-diff's ``ToFieldSet``), ``compare``
  (added / modified / removed), ``fields_v1`` / ``from_fields_v1`` (the wire form, ``".": {}``
  marking a node that is itself owned) and ``path_string`` (``.spec.containers[name="app"].image``).
* ``Managers``: the decoded ``managedFields`` list, keyed by (manager, operation, subresource),
  with ``update`` (an Update takes the fields it changed from everyone) and ``apply`` (the
  applier's configuration is its whole intent: fields it applied before and omits now are
  removed unless someone else owns them; a change to a field another manager owns is a
  ``ApplyConflicts`` unless forced, which takes it over). Decoding keeps the field sets of the
  FieldsV1 trees it read last (``_DecodedTrees``: 512 KiB of their text, 12 MiB at most),
  keyed by their content: the stored entries are read again on every write of an object, and
  objects of one template share them.

Limits: unions and version conversion of field sets are not modelled (a CRD's versions share
one schema shape here); Update managers are never collapsed into ``ancient-changes`` as
Kubernetes does past ten; list items whose keys are missing are addressed by value.
"""

from __future__ import annotations

import copy
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache, lru_cache
from types import MappingProxyType
from typing import Any

import orjson

from api.patches.schema import PatchMeta, for_kind

__all__ = [
    "APPLY",
    "UPDATE",
    "ApplyConflicts",
    "Comparison",
    "Conflict",
    "Key",
    "Managers",
    "Path",
    "Shape",
    "compare",
    "created_fields_v1",
    "field_set",
    "fields_v1",
    "from_fields_v1",
    "merge",
    "path_string",
    "shape_for_builtin",
    "shape_from_schema",
    "wire_entry",
]

Path = tuple[str, ...]
Obj = dict[str, Any]

APPLY = "Apply"
UPDATE = "Update"


# -- shapes ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Shape:
    """What the schema says about one value (the deduced rules where it says nothing)."""

    fields: Mapping[str, Shape] = field(default_factory=lambda: _NO_SHAPES)
    elements: Shape | None = None
    """The shape of a map's values or a list's items."""
    list_type: str = "atomic"
    keys: tuple[str, ...] = ()
    key_defaults: Mapping[str, Any] = field(default_factory=lambda: _NO_DEFAULTS)
    atomic_map: bool = False
    is_map: bool = False
    """A map of arbitrary keys (labels, a schema's ``additionalProperties``), not a struct."""
    builtin: bool = False
    """Unknown children get the built-in deduced rules (``labels`` and friends are maps)."""

    def child(self, name: str) -> Shape:
        found = self.fields.get(name)
        if found is not None:
            return found
        if self.elements is not None and self.is_map:
            return self.elements
        if self.builtin:
            return _BUILTIN_MAP if name in _BUILTIN_MAP_FIELDS else _BUILTIN_DEDUCED
        return _DEDUCED

    def item(self) -> Shape:
        if self.elements is not None:
            return self.elements
        return _BUILTIN_DEDUCED if self.builtin else _DEDUCED


_NO_SHAPES: Mapping[str, Shape] = MappingProxyType({})
_NO_DEFAULTS: Mapping[str, Any] = MappingProxyType({})
_DEDUCED = Shape()
_BUILTIN_DEDUCED = Shape(builtin=True)
_BUILTIN_MAP = Shape(is_map=True, elements=_DEDUCED)

_BUILTIN_MAP_FIELDS = frozenset(
    {
        "labels",
        "annotations",
        "data",
        "binaryData",
        "stringData",
        "matchLabels",
        "nodeSelector",
        "limits",
        "requests",
        "capacity",
        "allocatable",
        "hard",
        "used",
        "parameters",
    }
)
"""Fields of built-in kinds that are ``map[string]...`` upstream: their keys are owned one by one
and a new map is itself a member of an Update's fields (``f:labels: {".": {}, ...}``)."""

_BUILTIN_LIST_KEYS: Mapping[tuple[str, str | None], tuple[str, ...]] = MappingProxyType(
    {
        ("ports", "containerPort"): ("containerPort", "protocol"),
        ("ports", "port"): ("port", "protocol"),
        ("topologySpreadConstraints", "topologyKey"): ("topologyKey", "whenUnsatisfiable"),
    }
)
"""Kubernetes' ``+listMapKey`` markers where they name more keys than the patch merge key."""

_BUILTIN_KEY_DEFAULTS: Mapping[str, Any] = MappingProxyType({"protocol": "TCP"})


def _from_patch_meta(name: str, meta: PatchMeta) -> Shape:
    children = MappingProxyType({k: _from_patch_meta(k, v) for k, v in meta.fields.items()})
    if not meta.merges:
        return Shape(fields=children, builtin=True)
    item = Shape(fields=children, builtin=True)
    if meta.merge_key is None:
        return Shape(list_type="set", elements=item, builtin=True)
    keys = _BUILTIN_LIST_KEYS.get((name, meta.merge_key), (meta.merge_key,))
    defaults = {k: v for k, v in _BUILTIN_KEY_DEFAULTS.items() if k in keys}
    return Shape(
        list_type="map",
        keys=keys,
        key_defaults=MappingProxyType(defaults),
        elements=item,
        builtin=True,
    )


@cache
def shape_for_builtin(kind: str) -> Shape:
    """A built-in kind's shape, from its strategic-merge metadata (other lists are atomic)."""
    return _from_patch_meta("", for_kind(kind))


def shape_from_schema(schema: Mapping[str, Any], *, root: bool = True) -> Shape:
    """A structural schema's shape (``properties``, ``additionalProperties``, ``items`` and the
    ``x-kubernetes-*`` list and map types); the root's ``metadata`` follows ObjectMeta's rules."""
    fields = {k: shape_from_schema(v, root=False) for k, v in _props(schema).items()}
    if root:
        fields["metadata"] = shape_for_builtin("").child("metadata")
    if schema.get("type") == "array":
        items = schema.get("items")
        element = shape_from_schema(items, root=False) if isinstance(items, Mapping) else None
        list_type = str(schema.get("x-kubernetes-list-type") or "atomic")
        keys = tuple(schema.get("x-kubernetes-list-map-keys") or ())
        defaults = {
            k: v["default"]
            for k, v in _props(items if isinstance(items, Mapping) else {}).items()
            if k in keys and isinstance(v, Mapping) and "default" in v
        }
        return Shape(
            list_type=list_type if list_type in ("set", "map") else "atomic",
            keys=keys,
            key_defaults=MappingProxyType(defaults),
            elements=element,
        )
    additional = schema.get("additionalProperties")
    atomic = schema.get("x-kubernetes-map-type") == "atomic"
    if isinstance(additional, Mapping) and not fields:
        return Shape(
            elements=shape_from_schema(additional, root=False), is_map=True, atomic_map=atomic
        )
    return Shape(fields=MappingProxyType(fields), atomic_map=atomic)


def _props(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    props = schema.get("properties")
    return props if isinstance(props, Mapping) else {}


# -- paths ---------------------------------------------------------------------------------------


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _key_element(key: list[tuple[str, Any]]) -> str:
    """``k:`` and the keys' JSON; the same few keys (``{"name":"main"}``, a container port)
    recur in every object of a kind, so their text is cached — keyed by value *and* type,
    as ``1``, ``1.0`` and ``True`` are equal keys of a dict but not the same JSON."""
    try:
        return _cached_key_element(tuple((k, type(v), v) for k, v in key))
    except TypeError:  # a list or a map as a key's value: unhashable, not cached
        return "k:" + _dumps(dict(key))


@lru_cache(maxsize=4096)
def _cached_key_element(key: tuple[tuple[str, type, Any], ...]) -> str:
    return "k:" + _dumps({k: v for k, _, v in key})


def _item_element(shape: Shape, index: int, item: Any) -> str:
    """The path element naming one item of a ``set`` or ``map`` list (``dict`` is checked
    before the ``Mapping`` ABC: JSON gives dicts, and the ABC's check is slow)."""
    if shape.list_type == "map" and isinstance(item, dict | Mapping):
        key = []
        for name in shape.keys:
            value = item.get(name, shape.key_defaults.get(name))
            if value is not None:
                key.append((name, value))
        if key:
            return _key_element(key)
    if shape.list_type == "set" or not isinstance(item, dict | list | Mapping):
        return "v:" + _dumps(item)
    return f"i:{index}"


def _granular_list(shape: Shape, value: Any) -> bool:
    return isinstance(value, list) and shape.list_type != "atomic" and bool(value)


def _granular_map(shape: Shape, value: Any) -> bool:
    return isinstance(value, dict) and not shape.atomic_map and bool(value)


def _items(shape: Shape, value: list[Any]) -> dict[str, Any]:
    """A granular list's items by path element (a repeated element keeps its first item)."""
    out: dict[str, Any] = {}
    for index, item in enumerate(value):
        out.setdefault(_item_element(shape, index, item), item)
    return out


def field_set(shape: Shape, value: Any, prefix: Path = ()) -> set[Path]:
    """The fields ``value`` sets (structured-merge-diff's ``ToFieldSet``): leaves, list items,
    map entries, empty or null values; not the structs on the way to them."""
    out: set[Path] = set()
    _collect(shape, value, prefix, out)
    return out


def _collect(shape: Shape, value: Any, path: Path, out: set[Path]) -> None:
    """A leaf, an empty value or a scalar child is added where it is met, not walked into:
    that is all ``_collect`` would do with it (and most children are leaves)."""
    if _granular_map(shape, value):
        for key, child in value.items():
            child_path = (*path, "f:" + key)
            if child and isinstance(child, dict | list):
                if shape.is_map and isinstance(child, dict):
                    out.add(child_path)
                _collect(shape.child(key), child, child_path, out)
            else:
                out.add(child_path)
    elif _granular_list(shape, value):
        item_shape = shape.item()
        for element, item in _items(shape, value).items():
            item_path = (*path, element)
            out.add(item_path)
            if item and isinstance(item, dict | list):
                _collect(item_shape, item, item_path, out)
    elif path:
        out.add(path)


@dataclass(slots=True)
class Comparison:
    """How ``new`` differs from ``old``, as field paths."""

    added: set[Path] = field(default_factory=set)
    modified: set[Path] = field(default_factory=set)
    removed: set[Path] = field(default_factory=set)

    @property
    def changed(self) -> set[Path]:
        return self.added | self.modified

    def same(self) -> bool:
        return not (self.added or self.modified or self.removed)


def compare(shape: Shape, old: Any, new: Any) -> Comparison:
    out = Comparison()
    if not _identical(old, new):
        _compare(shape, old, new, (), out)
    return out


def _identical(old: Any, new: Any) -> bool:
    """Nothing below can differ: equal, and for objects and lists the same JSON too, since
    ``==`` says ``1 == 1.0 == True``, which name different items of a ``set`` or ``map`` list.
    Both checks run in C, so the walk skips what a write leaves as it was (a status write's
    unchanged conditions, an update's whole spec)."""
    if old is new:
        return True
    if old != new:
        return False
    if not isinstance(old, dict | list):
        return True  # equal scalars: ``_compare`` finds no change there either
    try:
        return orjson.dumps(old) == orjson.dumps(new)
    except (TypeError, orjson.JSONEncodeError):
        return False


def _subtree(shape: Shape, value: Any, path: Path, *, member: bool) -> set[Path]:
    paths = field_set(shape, value, path)
    if member and path:
        paths.add(path)
    return paths


def _compare(shape: Shape, old: Any, new: Any, path: Path, out: Comparison) -> None:
    """Children in both ``old`` and ``new`` are walked only when not ``_identical``."""
    if isinstance(old, dict) and isinstance(new, dict) and not shape.atomic_map and (old or new):
        for key, old_child in old.items():
            child_path = (*path, "f:" + key)
            if key not in new:
                out.removed |= _subtree(shape.child(key), old_child, child_path, member=True)
            elif not _identical(old_child, new[key]):
                _compare(shape.child(key), old_child, new[key], child_path, out)
        for key, new_child in new.items():
            if key not in old:
                child = shape.child(key)
                member = shape.is_map or child.is_map
                out.added |= _subtree(child, new_child, (*path, "f:" + key), member=member)
        return
    if (
        isinstance(old, list)
        and isinstance(new, list)
        and shape.list_type != "atomic"
        and (old or new)
    ):
        old_items, new_items = _items(shape, old), _items(shape, new)
        item = shape.item()
        for element, old_item in old_items.items():
            item_path = (*path, element)
            if element not in new_items:
                out.removed |= _subtree(item, old_item, item_path, member=True)
            elif not _identical(old_item, new_items[element]):
                _compare(item, old_item, new_items[element], item_path, out)
        for element, new_item in new_items.items():
            if element not in old_items:
                out.added |= _subtree(item, new_item, (*path, element), member=True)
        return
    if old != new and path:
        out.modified.add(path)
        if isinstance(new, dict | list):
            out.added |= field_set(shape, new, path) - {path}


# -- merge and prune --------------------------------------------------------------------------


def merge(shape: Shape, live: Any, config: Any) -> Any:
    """``config`` merged onto ``live``: structs and granular maps field by field, ``map`` lists
    item by item on their keys, ``set`` lists as a union, anything else replaced by ``config``."""
    if isinstance(live, dict) and isinstance(config, dict) and not shape.atomic_map:
        out = dict(live)
        for key, value in config.items():
            if value is None:
                out.pop(key, None)
            elif key in live:
                out[key] = merge(shape.child(key), live[key], value)
            else:
                out[key] = copy.deepcopy(value)
        return out
    if isinstance(live, list) and isinstance(config, list) and shape.list_type != "atomic":
        applied = _items(shape, config)
        merged = []
        for index, item in enumerate(live):
            element = _item_element(shape, index, item)
            if element in applied:
                merged.append(merge(shape.item(), item, applied.pop(element)))
            else:
                merged.append(item)
        merged.extend(copy.deepcopy(v) for v in applied.values())
        return merged
    return copy.deepcopy(config)


def _remove(shape: Shape, value: Any, path: Path) -> bool:
    """Remove the node at ``path`` from ``value`` in place; True when something went."""
    head, rest = path[0], path[1:]
    if isinstance(value, dict) and head.startswith("f:"):
        key = head[2:]
        if key not in value:
            return False
        if not rest:
            del value[key]
            return True
        return _remove(shape.child(key), value[key], rest)
    if isinstance(value, list):
        for index, item in enumerate(value):
            if _item_element(shape, index, item) == head:
                if not rest:
                    del value[index]
                    return True
                return _remove(shape.item(), item, rest)
    return False


def _get(shape: Shape, value: Any, path: Path) -> tuple[bool, Any]:
    for element in path:
        if isinstance(value, dict) and element.startswith("f:") and element[2:] in value:
            shape, value = shape.child(element[2:]), value[element[2:]]
        elif isinstance(value, list):
            found = _items(shape, value)
            if element not in found:
                return False, None
            shape, value = shape.item(), found[element]
        else:
            return False, None
    return True, value


def _owned_under(owned: AbstractSet[Path], path: Path) -> bool:
    return any(p[: len(path)] == path for p in owned)


def prune(shape: Shape, obj: Obj, *, drop: AbstractSet[Path], keep: AbstractSet[Path]) -> None:
    """Remove the ``drop`` paths from ``obj`` (outermost first: a list item goes whole, while its
    keys still name it) unless ``keep`` owns them or anything under them; a struct they leave
    empty goes too when nobody owns anything in it."""
    for path in sorted(drop, key=len):
        if _owned_under(keep, path) or not _remove(shape, obj, path):
            continue
        parent = path[:-1]
        while parent and parent[-1].startswith("f:") and not _owned_under(keep, parent):
            found, value = _get(shape, obj, parent)
            if not found or value not in ({}, []):
                break
            _remove(shape, obj, parent)
            parent = parent[:-1]


# -- FieldsV1 ------------------------------------------------------------------------------------


def fields_v1(paths: Iterable[Path]) -> Obj:
    """The FieldsV1 tree of a field set (``".": {}`` marks an owned node that has children).

    Built in one pass over the paths in sorted order, which gives every node its keys in sorted
    order (``"."`` sorts before every element) and visits an owned path before the paths under
    it: a node that already existed, empty, when a child is added under it was itself a path,
    so it gets its ``"."`` first."""
    ordered = sorted(paths)
    root: Obj = {}
    for path in ordered:
        node, made = root, not (ordered and ordered[0] == ())
        for element in path:
            child = node.get(element)
            if child is None:
                if not node and not made:
                    node["."] = {}
                child = node[element] = {}
                made = True
            else:
                made = False
            node = child
    return root


def created_fields_v1(shape: Shape, value: Obj) -> Obj:
    """``fields_v1(compare(shape, {}, value).changed)`` — what an Update that creates ``value``
    owns — built in one walk of ``value``, without the field set in between (a create's
    managedFields are the whole object's fields; this is that common case, made cheap)."""
    if shape.atomic_map:
        return {}
    return {
        "f:" + key: _created_node(
            shape.child(key), value[key], member=shape.is_map or shape.child(key).is_map
        )
        for key in sorted(value)
    }


def _created_node(shape: Shape, value: Any, *, member: bool) -> Obj:
    """One node of ``created_fields_v1``, keys in FieldsV1's sorted order (``"."`` sorts
    before every ``f:``/``k:``/``v:``/``i:`` element); ``member``: the node is itself in the
    field set, which FieldsV1 marks with ``"."`` when it has children. A scalar child is a
    leaf (``{}``) whatever its shape, so it is not walked into."""
    if _granular_map(shape, value):
        node: Obj = {".": {}} if member else {}
        for key in sorted(value):
            child = value[key]
            if isinstance(child, dict | list):
                owned = shape.is_map and isinstance(child, dict)
                node["f:" + key] = _created_node(shape.child(key), child, member=owned)
            else:
                node["f:" + key] = {}
        return node
    if _granular_list(shape, value):
        items = _items(shape, value)
        node = {".": {}} if member else {}
        for element in sorted(items):
            node[element] = _created_node(shape.item(), items[element], member=True)
        return node
    return {}


def from_fields_v1(tree: Any, prefix: Path = ()) -> set[Path]:
    """The field set a FieldsV1 tree names (leaves, and nodes marked ``"."``)."""
    out: set[Path] = set()
    if not isinstance(tree, dict):
        return out
    for element, child in tree.items():
        if element == ".":
            if prefix:
                out.add(prefix)
            continue
        path = (*prefix, element)
        if isinstance(child, dict) and child:
            out |= from_fields_v1(child, path)
        else:
            out.add(path)
    return out


class _DecodedTrees:
    """The field sets of recently read FieldsV1 trees, keyed by the tree's JSON text (orjson
    keeps key order, which ``canonical`` depends on): a changed tree is another key, never a
    stale hit. Bounded by the texts' total size, least recently used out first: text and field
    set together take 6 (a pod's entries) to 24 times (trees of one field each) the text, so the
    apiserver's 512 KiB of text is at most about 12 MiB (measured with tracemalloc).
    Field sets are frozensets: every ``Managers`` decoded from one tree shares its set."""

    def __init__(self, *, max_bytes: int, max_tree_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.max_tree_bytes = max_tree_bytes
        self.size = 0
        self._trees: OrderedDict[bytes, tuple[frozenset[Path], bool]] = OrderedDict()
        self._lock = threading.Lock()

    def read(self, tree: Any) -> tuple[AbstractSet[Path], bool]:
        """``_read_fields_v1(tree)``, from the kept trees when ``tree`` was read before."""
        try:
            text = orjson.dumps(tree)
        except (TypeError, orjson.JSONEncodeError):  # not JSON (an int past 64 bits)
            return _read_fields_v1(tree)
        if len(text) > self.max_tree_bytes:
            return _read_fields_v1(tree)
        with self._lock:
            found = self._trees.get(text)
            if found is not None:
                self._trees.move_to_end(text)
                return found
        fields, canonical = _read_fields_v1(tree)
        decoded = frozenset(fields), canonical
        with self._lock:
            if text not in self._trees:
                # a copy: orjson's own bytes keep the whole buffer they were written into (4 KiB)
                self._trees[bytes(memoryview(text))] = decoded
                self.size += len(text)
                while self.size > self.max_bytes:
                    dropped, _ = self._trees.popitem(last=False)
                    self.size -= len(dropped)
        return decoded


_DECODED = _DecodedTrees(max_bytes=512 << 10, max_tree_bytes=32 << 10)
"""The stored entries are decoded again on every write of their object, and many objects carry
the same tree (every pod of one template has its creator's): a pod's entry is about 1 KiB, so
the last five hundred or so distinct trees are kept; one past 32 KiB is read each time."""


def _read_fields_v1(tree: Any) -> tuple[set[Path], bool]:
    """``from_fields_v1(tree)``, and whether ``tree`` is exactly ``fields_v1`` of that set —
    the same keys in the same order — so that an entry whose fields stay as read can be written
    back as it came, without building and sorting the tree again."""
    out: set[Path] = set()
    if not isinstance(tree, dict):
        return out, False
    return out, _read_node(tree, (), out) and "." not in tree


def _read_node(node: Obj, prefix: Path, out: set[Path]) -> bool:
    """Add the paths under ``node`` (a non-empty dict at ``prefix``) to ``out``; True when the
    node is in ``fields_v1``'s form: keys sorted, every value a dict, ``"."`` (if any) ``{}``
    beside other keys."""
    canonical = list(node) == sorted(node)
    for element, child in node.items():
        if element == ".":
            if prefix:
                out.add(prefix)
            canonical = canonical and child == {} and len(node) > 1
            continue
        path = (*prefix, element)
        if isinstance(child, dict) and child:
            canonical = _read_node(child, path, out) and canonical
        else:
            out.add(path)
            canonical = canonical and isinstance(child, dict)
    return canonical


def path_string(path: Path) -> str:
    """A path as structured-merge-diff prints it: ``.spec.ports[containerPort=80,protocol="TCP"]``."""
    parts = []
    for element in path:
        kind, text = element[:1], element[2:]
        if kind == "f":
            parts.append("." + text)
        elif kind == "k":
            keys = json.loads(text)
            parts.append("[" + ",".join(f"{k}={_dumps(v)}" for k, v in keys.items()) + "]")
        elif kind == "v":
            parts.append(f"[={text}]")
        else:
            parts.append(f"[{text}]")
    return "".join(parts)


# -- managers ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Conflict:
    manager: str
    """As the conflict message prints it: ``"name"``, or ``"name" using apps/v1`` for Update."""
    path: Path


class ApplyConflicts(Exception):
    """An apply would change fields other managers own (409 unless forced)."""

    def __init__(self, conflicts: list[Conflict]) -> None:
        super().__init__(conflict_message(conflicts))
        self.conflicts = conflicts


def conflict_message(conflicts: list[Conflict]) -> str:
    """Kubernetes' wording: one conflict on one line, several grouped by manager."""
    if len(conflicts) == 1:
        only = conflicts[0]
        return (
            f"Apply failed with 1 conflict: conflict with {only.manager}: {path_string(only.path)}"
        )
    lines: list[str] = []
    for manager in sorted({c.manager for c in conflicts}):
        lines.append(f"conflicts with {manager}:")
        lines += [f"- {path_string(c.path)}" for c in conflicts if c.manager == manager]
    return f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)


Key = tuple[str, str, str]
"""(manager, operation, subresource): one managedFields entry."""


@dataclass(slots=True)
class Entry:
    api_version: str
    time: str | None
    fields: AbstractSet[Path]
    """Shared with other ``Managers`` when decoded (see ``_DecodedTrees``): replaced,
    never changed in place."""
    wire: Obj | None = None
    """``fields_v1(fields)`` when already at hand (the entry's fieldsV1 as read, in that exact
    form); None once ``fields`` change."""


def _rfc3339(value: Any) -> str | None:
    """A managedFields ``time`` in Kubernetes' own form (``2026-01-02T03:04:05Z``): clients
    send it back as they serialise times (the official client writes ``+00:00``), and an update
    that only re-spells it must not count as a change."""
    return _rfc3339_text(value) if isinstance(value, str) else None


@lru_cache(maxsize=256)
def _rfc3339_text(value: str) -> str | None:
    """Kept per text: entries written in the same second share it, and parsing and formatting
    a time costs more than the rest of an entry's decoding."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def wire_entry(key: Key, *, api_version: str, time: str | None, fields: Obj) -> Obj:
    """One ``managedFields`` item as Kubernetes writes it (its keys in Kubernetes' order)."""
    manager, operation, subresource = key
    item: Obj = {"manager": manager, "operation": operation, "apiVersion": api_version}
    if time:
        item["time"] = time
    item["fieldsType"] = "FieldsV1"
    item["fieldsV1"] = fields
    if subresource:
        item["subresource"] = subresource
    return item


@dataclass(slots=True)
class Managers:
    """The managedFields of one object, decoded."""

    entries: dict[Key, Entry] = field(default_factory=dict)

    @classmethod
    def decode(cls, raw: Any) -> Managers:
        """Read ``metadata.managedFields``; entries that are not well-formed are dropped."""
        out = cls()
        for item in raw if isinstance(raw, list) else []:
            if not isinstance(item, dict) or item.get("operation") not in (APPLY, UPDATE):
                continue
            key = (
                str(item.get("manager") or ""),
                item["operation"],
                str(item.get("subresource") or ""),
            )
            raw = item.get("fieldsV1")
            fields, canonical = _DECODED.read(raw)
            out.entries[key] = Entry(
                api_version=str(item.get("apiVersion") or ""),
                time=_rfc3339(item.get("time")),
                fields=fields,
                wire=raw if canonical else None,
            )
        return out

    def encode(self) -> list[Obj]:
        """The wire list, Apply entries first, then by time and manager (Kubernetes' order)."""
        ordered = sorted(
            self.entries.items(),
            key=lambda kv: (kv[0][1], kv[1].time or "", kv[0][0], kv[0][2]),
        )
        return [
            wire_entry(
                key,
                api_version=entry.api_version,
                time=entry.time,
                fields=fields_v1(entry.fields) if entry.wire is None else entry.wire,
            )
            for key, entry in ordered
        ]

    def _printed(self, key: Key) -> str:
        manager, operation, subresource = key
        printed = json.dumps(manager)
        if subresource:
            printed += f" with subresource {json.dumps(subresource)}"
        if operation == UPDATE:
            printed += f" using {self.entries[key].api_version}"
        return printed

    def _take(self, compared: Comparison, *, but: Key, force: bool) -> None:
        """Others lose what ``compared`` changed or removed; unforced, a change is a conflict
        (forced — every Update — the conflicts are not even listed)."""
        changed = compared.changed
        if not force:
            conflicts = [
                Conflict(self._printed(key), path)
                for key, entry in sorted(self.entries.items())
                if key != but
                for path in sorted(entry.fields & changed)
            ]
            if conflicts:
                raise ApplyConflicts(conflicts)
        lost = changed | compared.removed
        for key, entry in list(self.entries.items()):
            if key == but:
                continue
            if not entry.fields.isdisjoint(lost):
                entry.fields = entry.fields - lost
                entry.wire = None
            if not entry.fields:
                del self.entries[key]

    def update(
        self, shape: Shape, old: Any, new: Any, *, key: Key, api_version: str, now: str
    ) -> None:
        """Record an Update by ``key``'s manager from ``old`` to ``new`` (tracked parts only)."""
        compared = compare(shape, old, new)
        if compared.same():
            return
        self._take(compared, but=key, force=True)
        previous = self.entries.get(key)
        owned = (previous.fields if previous else set()) - compared.removed | compared.changed
        self._set(key, owned, api_version=api_version, now=now)
        if previous is not None and previous.fields == owned and owned:
            self.entries[key].wire = previous.wire  # the same fields, written at a new time

    def apply(
        self,
        shape: Shape,
        live: Any,
        config: Any,
        *,
        key: Key,
        api_version: str,
        now: str,
        force: bool,
    ) -> Any:
        """The object after ``key``'s manager applies ``config`` to ``live`` (tracked parts
        only); raises ``ApplyConflicts`` unless ``force``."""
        applied = field_set(shape, config)
        previous = self.entries.get(key)
        merged = merge(shape, live, config)
        if previous is not None:
            others = set().union(*(e.fields for k, e in self.entries.items() if k != key))
            prune(shape, merged, drop=previous.fields - applied, keep=applied | others)
        compared = compare(shape, live, merged)
        self._take(compared, but=key, force=force)
        changed = previous is None or previous.fields != applied or not compared.same()
        if changed:
            self._set(key, applied, api_version=api_version, now=now)
        return merged

    def _set(self, key: Key, fields: AbstractSet[Path], *, api_version: str, now: str) -> None:
        if fields:
            self.entries[key] = Entry(api_version=api_version, time=now, fields=fields)
        else:
            self.entries.pop(key, None)
