"""Built-in kinds served from their schema: a kind is data plus a small strategy.

Why: the engine that serves a CustomResourceDefinition's kind — structural-schema validation,
defaulting and pruning (``api.schema_validation``), CEL rules (``api.validation_rules``), tables
from printer columns, OpenAPI v3 from the schema, server-side apply from its list and map types,
a watch cache like any kind's — knows no kind. A built-in kind whose rules are mostly its shape
needs no pydantic model, no entry in ``api.validation``/``api.defaults`` and no table printer of
its own: its published OpenAPI v3 schema, its names and a few lines of strategy are the kind.

What it owns: ``SCHEMA_KINDS``, the kinds served this way, each a ``SchemaKind`` (the data:
group, version, names, scope, schema file, printer columns) with its ``Rules`` (the strategy:
nothing beyond the schema unless overridden, ``generation`` fixed at 1 as most registry
strategies leave it) — both in ``api.schema_kinds.base``. ``api.registry`` turns each into a
``ResourceType`` whose ``custom`` carries the schema and the rules, so the apiserver serves it on
the custom-resource path (``services/apiserver/custom_objects.py``); what a built-in kind does
differently there is keyed on ``CustomResource.builtin``: strategic merge patches accepted, its
names reserved against CRDs, OpenAPI components named as Kubernetes' (``io.k8s.api...``), and
Go's zero value printed for a missing column.

How to add the next kind (``priorityclass`` is the example):

1. Write its schema as data, ``api/schema_kinds/<kind>.json``: the component
   ``io.k8s.api.<group>.<version>.<Kind>`` of Kubernetes' published OpenAPI v3
   (``api/openapi-spec/v3/apis__<group>__<version>_openapi.json``) with every ``$ref`` written
   out (a structural schema has none), without ``apiVersion``, ``kind`` and ``metadata`` (the
   engine adds them); its ``SetDefaults_<Kind>`` values as ``default``; its enums as ``enum``
   (in the order Kubernetes' ``NotSupported`` lists them); lists with their
   ``x-kubernetes-list-type``/``-list-map-keys`` (server-side apply merges by them).
2. Write ``api/schema_kinds/<kind>.py``: ``KIND = SchemaKind(...)`` with the names ``kubectl
   api-resources`` shows and the columns of its table printer
   (``pkg/printers/internalversion/printers.go``), and a ``Rules`` subclass for what its registry
   strategy and validation do beyond the schema (``pkg/registry/<group>/<kind>/strategy.go``,
   ``pkg/apis/<group>/validation``): semantic checks, immutable fields, a moving ``generation``.
3. List it in ``SCHEMA_KINDS`` below, then the checklist every kind follows: the README's "What is
   served" table, ``tests/api/test_registry_entries.py``,
   ``tests/apiserver/test_every_kind_round_trips_official_client.py``, and, when kubectl has a
   ``create <kind>`` command (it sends protobuf), the kind's message in
   ``services/apiserver/protobuf.py``.

What it does not guarantee: one version per kind (no conversion); strategic merge patches treat
every list as atomic (the schema's ``x-kubernetes-patch-merge-key`` is not read); no status
subresource; a rule needing other objects (a Kubernetes admission plugin's) is not a ``Rules``
method — it belongs to the apiserver's admission. ``Rules`` may use ``api.names`` and
``api.quantity`` but not ``api.validation`` (which imports ``api.registry``, which imports this
package): a kind whose checks are shared with a model-served kind there (tolerations, resource
lists — RuntimeClass's) waits until those checks move to a module of their own.
"""

from __future__ import annotations

from api.schema_kinds.base import AGE, Rules, SchemaKind, load_schema
from api.schema_kinds.priorityclass import KIND as PRIORITY_CLASS

__all__ = ["AGE", "SCHEMA_KINDS", "Rules", "SchemaKind", "load_schema"]

SCHEMA_KINDS: tuple[SchemaKind, ...] = (PRIORITY_CLASS,)
"""The built-in kinds served from their schema, in discovery order."""
