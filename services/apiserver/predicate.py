"""Which objects a list or watch selects: namespace, label selector, field selector.

Why: a list, a watch and the watch cache's fan-out must agree exactly on what matches, and a
field-selected watch must also know which *index* it can be found under (the pods of one node
are matched only against that node's watchers). Kubernetes calls this a SelectionPredicate.

What it owns: ``Predicate.parse`` (from the query string; 400 for a bad or unsupported selector,
worded as Kubernetes words it), ``matches(obj)``, and ``index`` — the one exact
``field=value`` requirement the watch cache files the watcher under.

Limits: set-based label selectors and ``=``, ``==``, ``!=`` field requirements (what Kubernetes
supports); no field selector on fields the resource does not declare selectable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from api.registry import ResourceType
from api.selectors import FieldSelector, LabelSelector, parse_field_selector, parse_label_selector

__all__ = ["INDEX_PREFERENCE", "Predicate"]

INDEX_PREFERENCE = ("spec.nodeName", "metadata.name", "involvedObject.name", "metadata.namespace")
"""Fields a watcher may be indexed under, best first (the most selective value wins)."""


@dataclass(frozen=True, slots=True)
class Predicate:
    rt: ResourceType
    namespace: str | None = None
    labels: LabelSelector | None = None
    fields: FieldSelector | None = None
    index: tuple[str, str] | None = None
    """``(field, value)``: every matching object has exactly this value in this field."""

    @classmethod
    def parse(
        cls,
        rt: ResourceType,
        *,
        namespace: str | None,
        label_selector: str = "",
        field_selector: str = "",
    ) -> Predicate:
        labels: LabelSelector | None = None
        fields: FieldSelector | None = None
        if label_selector.strip():
            labels = parse_label_selector(label_selector)  # BadRequest with Kubernetes' words
            if labels.empty:
                labels = None
        if field_selector.strip():
            fields = parse_field_selector(field_selector)
            fields.check_supported(
                {"metadata.name", "metadata.namespace", *rt.field_getters.keys()}
            )
            if fields.empty:
                fields = None
        index: tuple[str, str] | None = None
        for path in INDEX_PREFERENCE:
            value = fields.exact(path) if fields is not None else None
            if value is not None:
                index = (path, value)
                break
        if index is None and rt.namespaced and namespace:
            index = ("metadata.namespace", namespace)
        return cls(
            rt=rt,
            namespace=namespace if rt.namespaced else None,
            labels=labels,
            fields=fields,
            index=index,
        )

    def matches(self, obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        if self.labels is not None and not self.labels.matches(meta.get("labels") or {}):
            return False
        if self.fields is not None:
            rt = self.rt
            return self.fields.matches(lambda path: rt.field_value(obj, path) or "")
        return True

    def matches_parts(
        self, namespace: str, labels: Mapping[str, str], fields: Mapping[str, str]
    ) -> bool:
        """``matches`` on the parts of an object a selector reads, taken out beforehand (the
        watch cache's compact objects): its namespace ("" when none), its labels, and its
        selectable fields by path, as strings."""
        if self.namespace is not None and namespace != self.namespace:
            return False
        if self.labels is not None and not self.labels.matches(labels):
            return False
        return self.fields is None or self.fields.matches(fields)
