"""meta/v1: the base model every kubelite kind is built on, and the metadata types they share.

Why this module exists: every object on the wire carries the same ``metadata`` block, lists carry
``ListMeta``, errors are ``Status``, deletes take ``DeleteOptions`` and watches emit
``WatchEvent``. They live here once, with ``KubeModel``, the single base class whose
configuration decides how all our models read and write Kubernetes JSON.

Choices made here, on purpose, for every model in ``api/``:

* **camelCase on the wire.** Python attributes are snake_case; the alias generator turns them
  into Kubernetes' camelCase, and explicit aliases cover the names Kubernetes spells otherwise
  (``podIP``, ``hostIPs``, ``podCIDR``, ``uid`` ...). Both spellings are accepted on input;
  dumps use aliases (``serialize_by_alias``), and ``model_dump(by_alias=True,
  exclude_none=True, mode="json")`` gives back Kubernetes JSON.
* **Unknown fields are kept, never silently lost** (``extra="allow"``). kubelite models the
  fields it acts on; a manifest that also carries volumes, probes, securityContext ... must
  round-trip unchanged through the apiserver, as it would through a real cluster. The unknown
  keys are kept verbatim (under their wire spelling) and dumped back as they came.
* **Strict types** (``strict=True``): a string where Kubernetes wants an integer, or a boolean
  where it wants a string (YAML's unquoted ``true`` as a label value), is an error, as Go's JSON
  decoder makes it one. Quantities are the exception: ``cpu: 1`` and ``cpu: "1"`` are both
  accepted and kept as the string ``"1"`` (see ``core.Quantity``).
* **Empty means absent.** Optional fields default to ``None`` and are omitted on dump with
  ``exclude_none``; a few containers (``metadata``, ``spec``, ``status``) default to empty
  objects so components can read ``pod.spec.node_name`` without a None check.
* **Except what Kubernetes always writes.** A Go field without ``omitempty`` is on the wire
  even at its zero value (``ReplicaSetStatus.replicas: 0``, ``ContainerStatus.imageID: ""``,
  ``NodeStatus.nodeInfo``), and the official clients refuse a response without it. Such a field
  has its zero value (or an empty object) as its default here, so dumps carry it, and
  ``Model.fill_serialised(d)`` adds the missing ones to a plain dict cheaply (the apiserver
  does that to everything it stores and reads).
  Kubernetes writes a few empty times as explicit ``null`` (``lastProbeTime``, ``eventTime``);
  a model dump drops them, which every client reads the same way.
* **Times are strings**, exactly as on the wire: RFC 3339 seconds (``2026-11-30T02:09:45Z``)
  for ``Time``, microseconds (``2026-11-30T02:09:45.123456Z``) for ``MicroTime``. Keeping the
  string avoids a lossy parse/format round trip; ``now_time()``/``now_micro_time()`` format the
  current time and ``parse_time()`` reads either form back.

Limits: models validate shape and types only; semantic rules (name syntax, enums, cross-field
checks) live in ``api.validation``, and defaults in ``api.defaults``.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

__all__ = [
    "Condition",
    "DeleteOptions",
    "KubeList",
    "KubeModel",
    "LabelSelectorRequirement",
    "LabelSelectorSpec",
    "ListMeta",
    "ManagedFieldsEntry",
    "ObjectMeta",
    "OwnerReference",
    "Preconditions",
    "Status",
    "StatusCause",
    "StatusDetails",
    "WatchEvent",
    "format_micro_time",
    "format_time",
    "now_micro_time",
    "now_time",
    "parse_time",
]


class KubeModel(BaseModel):
    """Base of every kubelite model: camelCase aliases, unknown fields kept, strict types."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="allow",
        strict=True,
    )

    def to_dict(self) -> dict[str, Any]:
        """Kubernetes JSON (as a dict): aliases, None fields omitted, unknown fields kept."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")

    @classmethod
    def fill_serialised(cls, data: Any) -> None:
        """Give ``data`` (this model's JSON, changed in place) the fields Kubernetes always writes.

        A Go field without ``omitempty`` is on the wire even at its zero value
        (``ReplicaSetStatus.replicas: 0``, ``ContainerStatus.imageID: ""``, a non-pointer struct
        as ``{}``), and the official clients require many of them. Our models say which by
        giving those fields a non-None default; this sets each one ``data`` lacks to that
        default, at every depth where its parent is present, without validating anything —
        the same fields ``Model.model_validate(data).to_dict()`` would add, at a fraction of
        the cost (the apiserver does it for every object it reads from the store).
        Idempotent; present values, wrong-typed ones included, are left alone.
        """
        if isinstance(data, dict):
            _fill(_serialised_plan(cls), data)


# -- always-serialised fields ----------------------------------------------------------------
# A plan per model: the keys of the fields with a default (one set, so an object that has them
# all costs one C-level comparison), their zero values, and the nested models to descend into
# (the model's plan, whether the field is a list of them). Only fields with a default and the
# paths leading to them are kept: filling a pod touches spec.containers and the container
# statuses, not the hundred optional fields.

_Plan = tuple[
    frozenset[str],
    tuple[tuple[str, Any], ...],
    tuple[tuple[str, "_Plan", bool], ...],
]
_EMPTY_PLAN: _Plan = (frozenset(), (), ())
_PLANS: dict[type[BaseModel], _Plan] = {}


def _nested_model(annotation: Any) -> tuple[type[KubeModel] | None, bool]:
    """``(M, many)`` for ``M``, ``M | None``, ``list[M]`` or ``list[M] | None``; else None."""
    args = [annotation]
    if get_origin(annotation) in (Union, UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
    if len(args) != 1:
        return None, False
    inner = args[0]
    many = get_origin(inner) is list
    if many:
        inner = get_args(inner)[0]
    if isinstance(inner, type) and issubclass(inner, KubeModel):
        return inner, many
    return None, False


def _serialised_plan(model: type[BaseModel]) -> _Plan:
    plan = _PLANS.get(model)
    if plan is not None:
        return plan
    _PLANS[model] = _EMPTY_PLAN  # a model nested in itself ends the recursion there
    zeros, children = [], []
    for name, field in model.model_fields.items():
        key = field.alias or name
        if not field.is_required():
            zero = field.get_default(call_default_factory=True)
            if isinstance(zero, KubeModel):
                zero = zero.to_dict()
            if zero is not None:
                zeros.append((key, zero))
        nested, many = _nested_model(field.annotation)
        if nested is not None:
            child = _serialised_plan(nested)
            if child != _EMPTY_PLAN:
                children.append((key, child, many))
    plan = (frozenset(key for key, _ in zeros), tuple(zeros), tuple(children))
    _PLANS[model] = plan
    return plan


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _fill(plan: _Plan, data: dict[str, Any]) -> None:
    keys, zeros, children = plan
    if not data.keys() >= keys:
        for key, zero in zeros:
            if key not in data:
                data[key] = _copy(zero)  # {} and [] are new for every object
    for key, child, many in children:
        value = data.get(key)
        if many:
            if isinstance(value, list):
                for element in value:
                    if isinstance(element, dict):
                        _fill(child, element)
        elif isinstance(value, dict):
            _fill(child, value)


# -- time ------------------------------------------------------------------------------------


def format_time(t: datetime) -> str:
    """``metav1.Time``: RFC 3339 in UTC with whole seconds, ``2026-11-30T02:09:45Z``."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(t: datetime) -> str:
    """``metav1.MicroTime``: RFC 3339 in UTC with microseconds, ``2026-11-30T02:09:45.123456Z``."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_this_second: tuple[int, str] = (-1, "")
"""The last second ``now_time`` formatted, and its text: one ``strftime`` per second, not per
object created."""


def now_time() -> str:
    global _this_second
    second = int(time.time())  # what strftime's whole seconds of datetime.now(UTC) are
    if second != _this_second[0]:
        _this_second = (second, format_time(datetime.fromtimestamp(second, UTC)))
    return _this_second[1]


def now_micro_time() -> str:
    return format_micro_time(datetime.now(UTC))


def parse_time(s: str) -> datetime:
    """Read a ``Time`` or ``MicroTime`` string (``Z`` or a numeric offset) as an aware datetime."""
    return datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))


# -- object metadata -------------------------------------------------------------------------


class OwnerReference(KubeModel):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ManagedFieldsEntry(KubeModel):
    manager: str | None = None
    operation: str | None = None
    api_version: str | None = None
    time: str | None = None
    fields_type: str | None = None
    fields_v1: dict[str, Any] | None = Field(default=None, alias="fieldsV1")
    subresource: str | None = None


class ObjectMeta(KubeModel):
    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    self_link: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None
    managed_fields: list[ManagedFieldsEntry] | None = None

    def controller_ref(self) -> OwnerReference | None:
        """The owner reference with ``controller: true``, if any."""
        for ref in self.owner_references or []:
            if ref.controller:
                return ref
        return None


class ListMeta(KubeModel):
    self_link: str | None = None
    resource_version: str | None = None
    continue_: str | None = Field(default=None, alias="continue")
    remaining_item_count: int | None = None


class KubeList(KubeModel):
    """Any ``<Kind>List``: items stay dicts; build rich models from them where needed."""

    api_version: str = "v1"
    kind: str = "List"
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[dict[str, Any]] = Field(default_factory=list)


# -- label selector (the API type; parsing and matching live in api.selectors) ---------------


class LabelSelectorRequirement(KubeModel):
    key: str
    operator: str
    values: list[str] | None = None


class LabelSelectorSpec(KubeModel):
    """``metav1.LabelSelector`` on the wire: ``{matchLabels, matchExpressions}``.

    Named ``...Spec`` so it does not clash with ``api.selectors.LabelSelector``, the parsed,
    matchable form (``api.selectors.label_selector_from_dict``).
    """

    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


# -- status, delete options, watch events ----------------------------------------------------


class Condition(KubeModel):
    """``metav1.Condition``, the condition newer kinds share (a PodDisruptionBudget's ...).

    ``lastTransitionTime``, ``reason`` and ``message`` are always on the wire."""

    type: str
    status: str
    observed_generation: int | None = None
    last_transition_time: str | None = None
    reason: str = ""
    message: str = ""


class StatusCause(KubeModel):
    reason: str | None = None
    message: str | None = None
    field: str | None = None


class StatusDetails(KubeModel):
    name: str | None = None
    group: str | None = None
    kind: str | None = None
    uid: str | None = None
    causes: list[StatusCause] | None = None
    retry_after_seconds: int | None = None


class Status(KubeModel):
    api_version: str = "v1"
    kind: str = "Status"
    metadata: ListMeta = Field(default_factory=ListMeta)
    status: str | None = None
    message: str | None = None
    reason: str | None = None
    details: StatusDetails | None = None
    code: int | None = None


class Preconditions(KubeModel):
    uid: str | None = None
    resource_version: str | None = None


class DeleteOptions(KubeModel):
    api_version: str | None = None
    kind: str | None = None
    grace_period_seconds: int | None = None
    preconditions: Preconditions | None = None
    orphan_dependents: bool | None = None
    propagation_policy: Literal["Orphan", "Background", "Foreground"] | None = None
    dry_run: list[str] | None = None
    ignore_store_read_error_with_cluster_breaking_potential: bool | None = None


class WatchEvent(KubeModel):
    """One line of a watch stream. ``object`` is the object (or a ``Status`` for ``ERROR``)."""

    type: Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]
    object: dict[str, Any]
