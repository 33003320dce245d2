"""``x-kubernetes-validations`` CEL rules in a CRD's schema: compiled when the CRD is written (one
that does not compile refuses the CRD), evaluated on every write of a custom object at the node
they sit on — the root, an object, a scalar, list items — with Kubernetes' 422 causes; a
transition rule (``oldSelf``) holds on update and is skipped on create."""

from __future__ import annotations

import copy
from typing import Any

from tests.apiserver.conftest import CRDS, Api, established
from tests.factories import crd, widget

Obj = dict[str, Any]

WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"

RULED_SCHEMA: Obj = {
    "type": "object",
    "x-kubernetes-validations": [
        {"rule": "self.metadata.name.startsWith('w-')", "message": "name must start with w-"}
    ],
    "properties": {
        "spec": {
            "type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.minReplicas <= self.maxReplicas"},
                {
                    "rule": "self.mode == oldSelf.mode",
                    "message": "mode is immutable",
                    "fieldPath": ".mode",
                },
                {
                    "rule": "!has(self.owner) || self.owner != 'nobody'",
                    "messageExpression": "'owner ' + self.owner + ' is not allowed'",
                    "reason": "FieldValueForbidden",
                },
            ],
            "properties": {
                "minReplicas": {"type": "integer"},
                "maxReplicas": {"type": "integer"},
                "mode": {"type": "string"},
                "owner": {"type": "string"},
                "size": {
                    "type": "string",
                    "x-kubernetes-validations": [
                        {"rule": "self in ['small', 'large']", "message": "unknown size"}
                    ],
                },
                "ports": {
                    "type": "array",
                    "items": {
                        "type": "integer",
                        "x-kubernetes-validations": [{"rule": "self > 1024"}],
                    },
                },
            },
        },
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}


def _causes(body: Obj) -> set[tuple[str, str, str]]:
    return {(c["reason"], c["field"], c["message"]) for c in body["details"]["causes"]}


async def test_rules_at_each_level_refuse_with_kubernetes_causes(api: Api) -> None:
    await established(api, crd(schema=RULED_SCHEMA))
    bad = widget(
        "bad", minReplicas=3, maxReplicas=2, mode="a", owner="nobody", size="huge", ports=[80]
    )
    status, body = await api.post(WIDGETS, bad)
    assert status == 422, body
    assert body["message"].startswith('Widget.example.com "bad" is invalid: ')
    assert _causes(body) == {
        ("FieldValueInvalid", "<nil>", 'Invalid value: "object": name must start with w-'),
        (
            "FieldValueInvalid",
            "spec",
            'Invalid value: "object": failed rule: self.minReplicas <= self.maxReplicas',
        ),
        ("FieldValueForbidden", "spec", "Forbidden: owner nobody is not allowed"),
        ("FieldValueInvalid", "spec.size", 'Invalid value: "string": unknown size'),
        (
            "FieldValueInvalid",
            "spec.ports[0]",
            'Invalid value: "integer": failed rule: self > 1024',
        ),
    }

    good = await api.ok(
        "POST", WIDGETS, widget("w-good", minReplicas=1, maxReplicas=2, mode="a", size="small")
    )
    assert good["spec"]["mode"] == "a"


async def test_transition_rule_holds_on_update_only(api: Api) -> None:
    await established(api, crd(schema=RULED_SCHEMA))
    created = await api.ok("POST", WIDGETS, widget("w-one", minReplicas=1, maxReplicas=2, mode="a"))
    changed = copy.deepcopy(created)
    changed["spec"]["mode"] = "b"
    status, body = await api.put(f"{WIDGETS}/w-one", changed)
    assert status == 422, body
    assert _causes(body) == {
        ("FieldValueInvalid", "spec.mode", 'Invalid value: "object": mode is immutable')
    }

    changed["spec"]["mode"] = "a"
    changed["spec"]["maxReplicas"] = 5
    updated = await api.ok("PUT", f"{WIDGETS}/w-one", changed)
    assert updated["spec"]["maxReplicas"] == 5


async def test_wrong_types_block_rule_evaluation(api: Api) -> None:
    await established(api, crd(schema=RULED_SCHEMA))
    status, body = await api.post(WIDGETS, widget("w-typed", minReplicas="one", maxReplicas=2))
    assert status == 422, body
    assert (
        "FieldValueInvalid",
        "<nil>",
        (
            'Invalid value: "null": some validation rules were not checked because the object was '
            "invalid; correct the existing errors to complete validation"
        ),
    ) in _causes(body)


async def test_crd_whose_rule_does_not_compile_is_refused(api: Api) -> None:
    schema = copy.deepcopy(RULED_SCHEMA)
    schema["properties"]["spec"]["properties"]["size"]["x-kubernetes-validations"] = [
        {"rule": "self.size >"}
    ]
    status, body = await api.post(CRDS, crd(schema=schema))
    assert status == 422, body
    fields = {c["field"]: c["message"] for c in body["details"]["causes"]}
    where = (
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[size]"
        ".x-kubernetes-validations[0].rule"
    )
    assert fields[where].startswith(
        'Invalid value: apiextensions.ValidationRule{Rule:"self.size >", '
    )
    assert "compilation failed: ERROR: <input>:1:" in fields[where]
