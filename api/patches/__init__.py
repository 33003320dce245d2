"""Patches: how a PATCH request body changes a stored object.

Three patch types, one module each, all pure functions over plain JSON values (``dict``/
``list``/scalars as ``json.loads`` returns them). None modifies its inputs; each returns a new
value sharing no container with them, so the caller may mutate the result freely.

* ``apply_merge_patch`` — ``application/merge-patch+json`` (RFC 7386), ``kubectl label``;
* ``apply_json_patch`` — ``application/json-patch+json`` (RFC 6902), ``kubectl patch --type=json``;
* ``apply_strategic_merge_patch`` — ``application/strategic-merge-patch+json``, ``kubectl apply``,
  driven by the per-kind metadata in ``api.patches.schema``.

Bad patches raise ``api.errors`` exceptions with the status Kubernetes gives the same patch
(see each module). The apiserver maps Content-Type to function; anything else is its 415.
"""

from api.patches.jsonpatch import apply_json_patch
from api.patches.merge import apply_merge_patch
from api.patches.strategic import apply_strategic_merge_patch

__all__ = ["apply_json_patch", "apply_merge_patch", "apply_strategic_merge_patch"]
