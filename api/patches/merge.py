"""JSON merge patch (RFC 7386): what ``kubectl label``, ``annotate`` and ``scale`` send.

``Content-Type: application/merge-patch+json``. A patch object is merged into the target key by
key: ``null`` removes a key, an object merges recursively, anything else (arrays included)
replaces the value wholesale. A patch that is not an object replaces the whole target.

Limits and differences from the apiserver:

* This is the RFC, exactly: a non-object patch (``null``, a string, an array) yields that value.
  Kubernetes answers 400 ``BadRequest`` for a ``null`` or scalar top-level patch and 422 for an
  array one (the result no longer decodes into the kind); that check belongs to the caller,
  which knows it needs an object back.
* Arrays in the patch are taken verbatim, as the RFC says. (The Go library the apiserver uses
  also drops ``null`` members inside objects nested in a *new* array; for typed objects the
  decoded result is the same.)
* The result shares no container with ``target`` or ``patch``; neither input is modified.
"""

from __future__ import annotations

from api.patches.values import JSONValue, clone

__all__ = ["apply_merge_patch"]


def apply_merge_patch(target: JSONValue, patch: JSONValue) -> JSONValue:
    """Apply an RFC 7386 merge ``patch`` to ``target``; return a new value."""
    if not isinstance(patch, dict):
        return clone(patch)
    base = target if isinstance(target, dict) else {}
    out: dict[str, JSONValue] = {}
    for key, value in base.items():
        if key not in patch:
            out[key] = clone(value)
            continue
        change = patch[key]
        if change is not None:
            out[key] = apply_merge_patch(value, change)
    for key, change in patch.items():
        if change is not None and key not in base:
            out[key] = apply_merge_patch(None, change)
    return out
