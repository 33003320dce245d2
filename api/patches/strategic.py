"""Strategic merge patch: what ``kubectl apply`` (client-side) and ``kubectl patch`` send.

``Content-Type: application/strategic-merge-patch+json``. A JSON merge patch that knows, from
``api.patches.schema``, which lists are keyed sets to merge item by item rather than replace,
plus the directives kubectl's three-way diff emits. This re-implements what the apiserver runs
(``StrategicMergeMapPatch`` with ``MergeParallelList`` and ``IgnoreUnmatchedNulls``, i.e.
``apimachinery/pkg/util/strategicpatch/patch.go``):

* ``null`` deletes a key; a value of another JSON type replaces the live one;
* merge lists of objects: items matched by merge key merge recursively; unmatched patch items
  are added; ``{"<key>": v, "$patch": "delete"}`` removes every item with that key;
  ``{"$patch": "replace"}`` makes the list exactly the other patch items; ``"$patch": "merge"``
  is refused; merge lists of scalars are set unions;
* in an object, ``"$patch": "replace"`` replaces it with the rest of the patch object,
  ``"$patch": "delete"`` empties it;
* ``"$deleteFromPrimitiveList/<f>": [..]`` removes scalars from list ``f``;
* ``"$setElementOrder/<f>": [..]`` orders list ``f``: the listed items in that order, live
  items not listed keep their relative place. Without it, a merged list puts the patch's items
  in patch order and interleaves live-only items by their live position — so a *new* item
  with no order directive lands before the live items it is not anchored to, as upstream;
* ``"$retainKeys": [..]`` drops live keys not listed (``volumes[].emptyDir`` -> ``hostPath``)
  and refuses patch keys outside the list.

No directive is ever stored: a value with no live counterpart is the patch applied to nothing,
so ``null`` members vanish and ``$patch: delete`` items disappear (upstream's
``discardNullValuesFromPatch`` + ``removeDirectives``); leftover ``$setElementOrder`` and
``$retainKeys`` keys, which upstream leaves for the typed decode to drop, are stripped here.

Errors: a malformed patch (not an object, a bad directive, a merge-key item without its key, a
``$setElementOrder`` list that contradicts the patch list) -> 400 ``BadRequest``; a list of lists
-> 422 ``Invalid`` (upstream's ``ErrNoListOfLists``). Upstream answers some of the 400 cases with
a 500 (plain Go errors); a 400 is what they mean.

Cost: one pass over the patch plus one copy of the live sub-trees it does not touch; nothing is
deep-copied twice. The result shares no container with ``target`` or ``patch``.

Checked against kubectl 1.32's own merge code (``tests/api/test_patches_match_kubectl.py``,
``test_patches_fuzz_against_kubectl.py``), down to upstream's list order after an in-place merge.

Deliberate differences, all in corners where upstream stores patch syntax as data: a new list
item (no live item with its key, or under ``$patch: replace``) is applied to nothing here,
where upstream appends it verbatim — so a ``$patch: delete`` entry nested in it vanishes instead
of becoming e.g. an empty env var; adding and deleting the same scalar in one patch deletes it
(upstream depends on Go map order); ``$setElementOrder`` over two empty lists is accepted
(upstream: 500). ``$patch: delete`` removes every item with the merge key (upstream 1.32);
order directives on atomic lists are ignored; ``$deleteFromPrimitiveList`` on an absent list
is a no-op.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from api.errors import BadRequest, Invalid
from api.patches.schema import PatchMeta, for_kind
from api.patches.values import JSONValue, clone, identity, json_type, render

__all__ = ["apply_strategic_merge_patch", "merge_with_meta"]

PATCH = "$patch"
RETAIN_KEYS = "$retainKeys"
SET_ELEMENT_ORDER = "$setElementOrder"
DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList"

_BAD_ORDER = "invalid patch format of setElementOrder list"
_BAD_PRIMITIVE_LIST = "invalid patch format of primitive list"
_BAD_RETAIN_KEYS = "invalid patch format of retainKeys"
_REJECTED = "the server rejected our request due to an error in our request"

_MISSING: Any = object()
_NO_KEY = (object, "no merge key")  # identity of an item that lacks its merge key


def apply_strategic_merge_patch(target: dict[str, Any], patch: Any, *, kind: str) -> dict[str, Any]:
    """Apply a strategic merge ``patch`` to ``target``, an object of ``kind``; return a new one.

    Unknown kinds get ObjectMeta rules only (lists elsewhere atomic; directives still work).
    """
    if not isinstance(patch, dict):
        raise BadRequest(
            f"json: cannot unmarshal {json_type(patch)} into Go value of type "
            "map[string]interface {}"
        )
    return merge_with_meta(target, patch, meta=for_kind(kind))


def merge_with_meta(
    target: dict[str, Any], patch: dict[str, Any], *, meta: PatchMeta
) -> dict[str, Any]:
    """Apply ``patch`` to ``target`` under explicit patch metadata (for tests and sub-objects)."""
    if not isinstance(target, dict):
        raise TypeError(f"target must be a JSON object, not {type(target).__name__}")
    return _merge_map(target, patch, meta)


# --- objects ---------------------------------------------------------------------------------


def _merge_map(live: dict[str, Any], patch: dict[str, Any], meta: PatchMeta) -> dict[str, Any]:
    """``patch`` merged into ``live``; every container in the result is new."""
    directive = patch.get(PATCH, _MISSING)
    if directive is not _MISSING:
        if directive == "replace":
            return _merge_map({}, {k: v for k, v in patch.items() if k != PATCH}, meta)
        if directive == "delete":
            return {}
        raise BadRequest(f"unknown patch type: {directive} in map: {render(patch)}")

    if RETAIN_KEYS in patch:
        keep = _retain_keys(patch)
        live = {k: v for k, v in live.items() if k in keep}

    orders: list[tuple[str, Any]] = []
    deletions: list[tuple[str, Any]] = []
    fields: list[tuple[str, Any]] = []
    for key, value in patch.items():
        if key[:1] != "$":
            fields.append((key, value))
        elif key.startswith(SET_ELEMENT_ORDER):
            orders.append((key, value))
        elif key.startswith(DELETE_FROM_PRIMITIVE_LIST):
            deletions.append((key, value))
        elif key != RETAIN_KEYS:
            fields.append((key, value))  # not a directive we know: plain data

    out = dict(live)
    fresh: set[str] = set()  # keys of `out` whose value was built here (others still shared)

    for key, order in orders:
        name = _directive_target(key, SET_ELEMENT_ORDER, _BAD_ORDER)
        if _apply_element_order(out, patch, name, order, meta.child(name)):
            fresh.add(name)

    for key, value in fields:
        if key in fresh:
            continue
        fresh.add(key)
        if value is None:
            out.pop(key, None)
            continue
        current = out.get(key, _MISSING)
        child = meta.child(key)
        if isinstance(value, dict):
            if isinstance(current, dict) and not child.replaces:
                out[key] = _merge_map(current, value, child)
            elif value.get(PATCH) == "delete":
                out.pop(key, None)  # a deletion of something absent leaves nothing behind
            else:
                out[key] = _merge_map({}, value, child)
        elif isinstance(value, list):
            out[key] = _merge_list(current if isinstance(current, list) else [], value, child)
        else:
            out[key] = value

    for key, value in deletions:
        name = _directive_target(key, DELETE_FROM_PRIMITIVE_LIST, _BAD_PRIMITIVE_LIST)
        if value is None:  # upstream: a null deletion list removes the field itself
            out.pop(name, None)
            fresh.add(name)
            continue
        if not isinstance(value, list):
            raise BadRequest(_BAD_PRIMITIVE_LIST)
        current = out.get(name)
        if isinstance(current, list):
            doomed = {identity(v) for v in value}
            out[name] = [clone(v) for v in current if identity(v) not in doomed]
            fresh.add(name)

    for key, value in out.items():
        if key not in fresh:
            out[key] = clone(value)
    return out


def _directive_target(key: str, prefix: str, message: str) -> str:
    head, sep, name = key.partition("/")
    if head != prefix or not sep:
        raise BadRequest(message)
    return name


def _retain_keys(patch: dict[str, Any]) -> set[str]:
    listed = patch[RETAIN_KEYS]
    if not isinstance(listed, list) or any(isinstance(k, dict | list) for k in listed):
        raise BadRequest(_BAD_RETAIN_KEYS)
    keep = {k for k in listed if isinstance(k, str)}
    for key, value in patch.items():
        if value is None or key == RETAIN_KEYS:
            continue
        if key.startswith((DELETE_FROM_PRIMITIVE_LIST, SET_ELEMENT_ORDER)):
            continue
        if key not in keep:
            raise BadRequest(_BAD_RETAIN_KEYS)
    return keep


# --- lists -----------------------------------------------------------------------------------


def _merge_list(live: list[Any], patch: list[Any], meta: PatchMeta) -> list[Any]:
    """``patch`` merged into the list ``live`` according to ``meta``; a new list."""
    if not meta.merges:
        return [_fresh(item, meta) for item in patch]
    if not live and not patch:
        return []
    if not _items_are_objects(live, patch):
        union = _unique_scalars(live + patch)
        return _normalize_order(
            union,
            order=[identity(v) for v in patch],
            server=[identity(v) for v in live],
            key=identity,
        )
    return _merge_objects(live, patch, meta)[0]


def _merge_objects(
    live: list[Any], patch: list[Any], meta: PatchMeta
) -> tuple[list[Any], list[Hashable]]:
    """Merge a list of objects by merge key; also return ``live`` as upstream sees it after.

    Upstream merges in place in the live slice's backing array (Go ``append`` on a sub-slice),
    so deletions shift live items left and new items overwrite the tail that deletions freed.
    A ``$setElementOrder`` pass afterwards reads that mutated array as "the live order"; the
    second value reproduces it (as merge-key identities) so ordering matches upstream exactly.
    """
    merge_key = meta.merge_key
    if merge_key is None:
        raise BadRequest("cannot merge lists without merge key for type map")
    key = _merge_key_identity(merge_key)

    view = [key(item) for item in live]  # the live backing array, as upstream will read it
    length = len(view)  # length of upstream's working slice over that array
    base = live
    plain: list[dict[str, Any]] = []
    replace = False
    for item in patch:
        directive = item.get(PATCH, _MISSING)
        if directive is _MISSING:
            plain.append(item)
        elif directive == "delete":
            if merge_key not in item:
                raise BadRequest(_no_merge_key(item, merge_key))
            doomed = identity(item[merge_key])
            base = [o for o in base if key(o) != doomed]
            while doomed in view[:length]:
                gone = view.index(doomed, 0, length)
                view[gone : length - 1] = view[gone + 1 : length]
                length -= 1
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise BadRequest("merging lists cannot yet be specified in the patch")
        else:
            raise BadRequest(f"unknown patch type: {directive} in map: {render(item)}")
    for item in plain:
        if merge_key not in item:
            raise BadRequest(_no_merge_key(item, merge_key))
    if replace:
        return [_merge_map({}, item, meta) for item in plain], [key(item) for item in live]

    merged: list[Any] = list(base)
    built = [False] * len(merged)
    position: dict[Hashable, int] = {}
    for i, item in enumerate(merged):
        position.setdefault(key(item), i)
    for item in plain:
        ident = identity(item[merge_key])
        at = position.get(ident)
        if at is None:
            position[ident] = len(merged)
            merged.append(_merge_map({}, item, meta))
            built.append(True)
            if length < len(view):  # upstream's append still fits the live array: overwrite
                view[length] = ident
            length += 1
        else:
            merged[at] = _merge_map(merged[at], item, meta)
            built[at] = True
    merged = [m if done else clone(m) for m, done in zip(merged, built, strict=True)]
    ordered = _normalize_order(
        merged, order=[key(p) for p in plain], server=[key(b) for b in base], key=key
    )
    return ordered, view


def _fresh(value: JSONValue, meta: PatchMeta) -> JSONValue:
    """A patch value with no live counterpart: the patch applied to nothing."""
    if isinstance(value, dict):
        return _merge_map({}, value, meta)
    if isinstance(value, list):
        return _merge_list([], value, meta)
    return value


def _items_are_objects(live: list[Any], patch: list[Any]) -> bool:
    """True for a list of objects, False for scalars; refuse lists of lists and mixtures."""
    seen: type | None = None
    for item in (*live, *patch):
        if isinstance(item, list):
            raise Invalid(_REJECTED) from ValueError("lists of lists are not supported")
        kind = dict if isinstance(item, dict) else type(item)
        if seen is None:
            seen = kind
        elif kind is not seen:
            raise BadRequest(
                f"list element types are not identical: {render(live)} {render(patch)}"
            )
    return seen is dict


def _unique_scalars(items: list[Any]) -> list[Any]:
    seen: set[Hashable] = set()
    out = []
    for item in items:
        ident = identity(item)
        if ident not in seen:
            seen.add(ident)
            out.append(item)
    return out


def _merge_key_identity(merge_key: str) -> Callable[[Any], Hashable]:
    def key(item: Any) -> Hashable:
        if isinstance(item, dict) and merge_key in item:
            return identity(item[merge_key])
        return _NO_KEY

    return key


def _no_merge_key(item: Any, merge_key: str) -> str:
    return f"map: {render(item)} does not contain declared merge key: {merge_key}"


# --- ordering --------------------------------------------------------------------------------


def _normalize_order(
    merged: list[Any],
    *,
    order: list[Hashable],
    server: list[Hashable],
    key: Callable[[Any], Hashable],
) -> list[Any]:
    """Upstream's ``normalizeElementOrder``: ``merged`` ordered by ``order`` then ``server``.

    ``order`` and ``server`` are identities (merge-key values, or the scalars themselves).
    Items named in ``order`` come in that order; the others keep their order in ``server``
    (the live list). The two runs are then interleaved: a live-only item goes before a patch
    item exactly when both are in the live list and it came first there.
    """
    order_at: dict[Hashable, int] = {}
    for i, ident in enumerate(order):
        order_at.setdefault(ident, i)
    server_at: dict[Hashable, int] = {}
    for i, ident in enumerate(server):
        server_at.setdefault(ident, i)
    keyed = [(key(item), item) for item in merged]
    patch_items = sorted((p for p in keyed if p[0] in order_at), key=lambda p: order_at[p[0]])
    server_only = sorted(
        (p for p in keyed if p[0] not in order_at), key=lambda p: server_at.get(p[0], len(server))
    )
    out: list[Any] = []
    i = j = 0
    while i < len(server_only) and j < len(patch_items):
        left = server_at.get(server_only[i][0], -1)
        right = server_at.get(patch_items[j][0], -1)
        if left >= 0 and right >= 0 and left < right:
            out.append(server_only[i][1])
            i += 1
        else:
            out.append(patch_items[j][1])
            j += 1
    out.extend(item for _, item in server_only[i:])
    out.extend(item for _, item in patch_items[j:])
    return out


def _apply_element_order(
    out: dict[str, Any], patch: dict[str, Any], name: str, order: Any, meta: PatchMeta
) -> bool:
    """Merge list ``name`` now and order it by ``order``; False if left to the main pass."""
    if not isinstance(order, list):
        raise BadRequest(_BAD_ORDER)
    if not meta.merges:
        return False  # ordering an atomic list means nothing; the list replaces as usual
    patch_list = patch.get(name, _MISSING)
    if patch_list is not _MISSING and not isinstance(patch_list, list):
        raise BadRequest(f"{_BAD_ORDER}: {name} is not a list")
    current = out.get(name, _MISSING)
    live = current if isinstance(current, list) else None
    if patch_list is _MISSING and live is None:
        return False

    given: list[Any] = [] if patch_list is _MISSING else patch_list
    objects = any(isinstance(x, dict) for x in (*order, *(live or ()), *given))
    if objects:
        if meta.merge_key is None:
            raise BadRequest("cannot merge lists without merge key for type map")
        key = _merge_key_identity(meta.merge_key)
        for item in order:
            if not isinstance(item, dict) or meta.merge_key not in item:
                raise BadRequest(_no_merge_key(item, meta.merge_key))
    else:
        key = identity
    if patch_list is not _MISSING:
        _check_order_matches(patch_list, order, key)

    server = [key(item) for item in live or ()]
    if patch_list is _MISSING:
        merged = [clone(item) for item in live or ()]
    elif objects:
        merged, server = _merge_objects(live or [], patch_list, meta)
    else:
        merged = _merge_list(live or [], patch_list, meta)
    out[name] = _normalize_order(merged, order=[key(o) for o in order], server=server, key=key)
    return True


def _check_order_matches(
    patch_list: list[Any], order: list[Any], key: Callable[[Any], Hashable]
) -> None:
    """The patch's own items must appear in ``order``, in the same relative order."""
    items = [p for p in patch_list if not (isinstance(p, dict) and PATCH in p)]
    wanted = [key(o) for o in order]
    at = 0
    for item in items:
        ident = key(item)
        while at < len(wanted) and wanted[at] != ident:
            at += 1
        if at == len(wanted):
            raise BadRequest(
                f"the order in patch list:\n{render(patch_list)}\n doesn't match "
                f"{SET_ELEMENT_ORDER} list:\n{render(order)}"
            )
        at += 1
