"""Validation: the classic mistakes give the causes Kubernetes gives, field by field."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from api.defaults import apply_defaults
from api.errors import Invalid
from api.registry import REGISTRY, ResourceType
from api.validation import POD_UPDATE_FORBIDDEN, validate, validate_update


def rt(name: str) -> ResourceType:
    found = REGISTRY.resolve(name)
    assert found is not None
    return found


def pod(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}], **spec},
    }
    apply_defaults("Pod", body)
    return body


def causes_of(resource: str, body: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["field"], c["reason"], c["message"]) for c in validate(rt(resource), body)]


def test_a_good_pod_is_valid() -> None:
    assert validate(rt("pods"), pod()) == []


def test_missing_container_name() -> None:
    body = pod()
    del body["spec"]["containers"][0]["name"]
    assert causes_of("pods", body) == [
        ("spec.containers[0].name", "FieldValueRequired", "Required value")
    ]


def test_missing_image() -> None:
    body = pod()
    del body["spec"]["containers"][0]["image"]
    assert causes_of("pods", body) == [
        ("spec.containers[0].image", "FieldValueRequired", "Required value")
    ]


def test_bad_restart_policy() -> None:
    assert causes_of("pods", pod(restartPolicy="Sometimes")) == [
        (
            "spec.restartPolicy",
            "FieldValueNotSupported",
            'Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"',
        )
    ]


def test_bad_name_and_label() -> None:
    body = pod()
    body["metadata"]["name"] = "Foo_Bar"
    body["metadata"]["labels"] = {"app": "web server"}
    causes = causes_of("pods", body)
    assert [(f, r) for f, r, _ in causes] == [
        ("metadata.name", "FieldValueInvalid"),
        ("metadata.labels", "FieldValueInvalid"),
    ]
    assert causes[0][2].startswith(
        'Invalid value: "Foo_Bar": a lowercase RFC 1123 subdomain must consist of lower case '
        "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
    )
    assert causes[1][2].startswith(
        'Invalid value: "web server": a valid label must be an empty string'
    )


def test_duplicate_container_names() -> None:
    body = pod()
    body["spec"]["containers"].append({"name": "web", "image": "busybox"})
    apply_defaults("Pod", body)
    assert causes_of("pods", body) == [
        ("spec.containers[1].name", "FieldValueDuplicate", 'Duplicate value: "web"')
    ]


def test_no_containers_and_no_name() -> None:
    body = pod()
    body["spec"]["containers"] = []
    del body["metadata"]["name"]
    assert causes_of("pods", body) == [
        ("metadata.name", "FieldValueRequired", "Required value: name or generateName is required"),
        ("spec.containers", "FieldValueRequired", "Required value"),
    ]
    body["metadata"]["generateName"] = "web-"
    assert [f for f, _, _ in causes_of("pods", body)] == ["spec.containers"]


def test_invalid_message_reads_like_kubectl_prints_it() -> None:
    body = pod()
    del body["spec"]["containers"][0]["image"]
    err = Invalid.of("Pod", "web", validate(rt("pods"), body))
    assert err.message == 'Pod "web" is invalid: spec.containers[0].image: Required value'


def test_types_and_quantities_become_field_causes() -> None:
    body = pod()
    c = body["spec"]["containers"][0]
    c["ports"] = [{"containerPort": "80"}, {"containerPort": 70000}]
    c["resources"] = {"limits": {"cpu": "1"}, "requests": {"cpu": "2", "memory": "lots"}}
    causes = causes_of("pods", body)
    fields = [f for f, _, _ in causes]
    assert "spec.containers[0].ports[0].containerPort" in fields
    assert (
        "spec.containers[0].ports[1].containerPort",
        "FieldValueInvalid",
        "Invalid value: 70000: must be between 1 and 65535, inclusive",
    ) in causes
    assert (
        "spec.containers[0].resources.requests[cpu]",
        "FieldValueInvalid",
        'Invalid value: "2": must be less than or equal to cpu limit of 1',
    ) in causes
    memory = [m for f, _, m in causes if f == "spec.containers[0].resources.requests[memory]"]
    assert memory == [
        "Invalid value: \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    ]


def test_label_map_keys_are_bracketed_in_type_errors() -> None:
    body = pod()
    body["metadata"]["labels"] = {"enabled": True}
    assert causes_of("pods", body)[0][:2] == ("metadata.labels[enabled]", "FieldValueInvalid")


def test_enums_tolerations_and_affinity() -> None:
    body = pod(
        dnsPolicy="Sometimes",
        tolerations=[
            {"key": "k", "operator": "Exists", "value": "v"},
            {"operator": "Equal", "value": "x"},
        ],
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "disk", "operator": "Near", "values": ["ssd"]}
                            ]
                        }
                    ]
                }
            }
        },
    )
    body["spec"]["containers"][0]["imagePullPolicy"] = "Sometimes"
    fields = {f: r for f, r, _ in causes_of("pods", body)}
    assert fields == {
        "spec.containers[0].imagePullPolicy": "FieldValueNotSupported",
        "spec.dnsPolicy": "FieldValueNotSupported",
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator": "FieldValueNotSupported",
        "spec.tolerations[0].operator": "FieldValueInvalid",
        "spec.tolerations[1].operator": "FieldValueInvalid",
    }


def template(labels: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    }


def test_deployment_selector_must_match_template_labels() -> None:
    d: dict[str, Any] = {
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template({"app": "db"})},
    }
    apply_defaults("Deployment", d)
    assert causes_of("deployments", d) == [
        (
            "spec.template.metadata.labels",
            "FieldValueInvalid",
            'Invalid value: {"app":"db"}: `selector` does not match template `labels`',
        )
    ]
    d["spec"]["template"]["metadata"]["labels"] = {"app": "web"}
    assert causes_of("deployments", d) == []


def test_controller_replicas_selector_and_restart_policy() -> None:
    rc: dict[str, Any] = {
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": -1, "template": template({"app": "web"})},
    }
    apply_defaults("ReplicationController", rc)
    rc["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    assert causes_of("rc", rc) == [
        (
            "spec.replicas",
            "FieldValueInvalid",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            "spec.template.spec.restartPolicy",
            "FieldValueNotSupported",
            'Unsupported value: "Never": supported values: "Always"',
        ),
    ]
    rs: dict[str, Any] = {
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"template": template({"app": "web"})},
    }
    apply_defaults("ReplicaSet", rs)
    assert causes_of("rs", rs) == [("spec.selector", "FieldValueRequired", "Required value")]
    rs["spec"]["selector"] = {
        "matchExpressions": [{"key": "app", "operator": "Like", "values": ["web"]}]
    }
    assert causes_of("rs", rs) == [
        (
            "spec.selector.matchExpressions[0].operator",
            "FieldValueInvalid",
            'Invalid value: "Like": not a valid selector operator',
        )
    ]


def test_deployment_strategy() -> None:
    d: dict[str, Any] = {
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": template({"app": "web"}),
            "strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}},
        },
    }
    apply_defaults("Deployment", d)
    assert causes_of("deploy", d) == [
        (
            "spec.strategy.rollingUpdate.maxUnavailable",
            "FieldValueInvalid",
            'Invalid value: "0%": may not be 0 when `maxSurge` is 0',
        )
    ]


def test_lease_event_namespace_node_binding() -> None:
    lease = {
        "metadata": {"name": "node1", "namespace": "kube-node-lease"},
        "spec": {"leaseDurationSeconds": 0, "renewTime": "yesterday"},
    }
    assert [f for f, _, _ in causes_of("leases", lease)] == [
        "spec.leaseDurationSeconds",
        "spec.renewTime",
    ]
    event = {
        "metadata": {"name": "e1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "other"},
        "type": "Fatal",
    }
    assert [(f, r) for f, r, _ in causes_of("events", event)] == [
        ("involvedObject.namespace", "FieldValueInvalid"),
        ("type", "FieldValueNotSupported"),
    ]
    assert [f for f, _, _ in causes_of("namespaces", {"metadata": {"name": "Team.A"}})] == [
        "metadata.name"
    ]
    assert causes_of("namespaces", {"metadata": {"name": "team-a"}}) == []
    node = {
        "metadata": {"name": "node1"},
        "spec": {"taints": [{"key": "k", "effect": "Sometimes"}]},
    }
    assert [(f, r) for f, r, _ in causes_of("nodes", node)] == [
        ("spec.taints[0].effect", "FieldValueNotSupported")
    ]
    binding = {"metadata": {"name": "p", "namespace": "default"}, "target": {"kind": "Node"}}
    assert [(f, r) for f, r, _ in causes_of("bindings", binding)] == [
        ("target.name", "FieldValueRequired")
    ]


def test_missing_namespace_on_a_namespaced_kind() -> None:
    body = pod()
    del body["metadata"]["namespace"]
    assert causes_of("pods", body) == [
        ("metadata.namespace", "FieldValueRequired", "Required value")
    ]


def test_pod_update_may_change_image_and_add_tolerations_only() -> None:
    old = pod()
    old["metadata"].update(uid="u1", creationTimestamp="2026-11-30T01:00:00Z")
    new = copy.deepcopy(old)
    new["spec"]["containers"][0]["image"] = "nginx:1.26"
    new["spec"]["tolerations"].append({"key": "k", "operator": "Exists", "effect": "NoSchedule"})
    new["spec"]["activeDeadlineSeconds"] = 60
    assert validate_update(rt("pods"), new, old) == []
    new["spec"]["restartPolicy"] = "Never"
    assert validate_update(rt("pods"), new, old) == [
        {
            "reason": "FieldValueForbidden",
            "message": f"Forbidden: {POD_UPDATE_FORBIDDEN}",
            "field": "spec",
        }
    ]
    removed = copy.deepcopy(old)
    removed["spec"]["tolerations"] = []
    assert [c["field"] for c in validate_update(rt("pods"), removed, old)] == ["spec"]


def test_identity_fields_are_immutable() -> None:
    old = pod()
    old["metadata"].update(uid="u1", creationTimestamp="2026-11-30T01:00:00Z")
    new = copy.deepcopy(old)
    new["metadata"].update(name="other", uid="u2")
    assert validate_update(rt("pods"), new, old) == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "other": field is immutable',
            "field": "metadata.name",
        },
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "u2": field is immutable',
            "field": "metadata.uid",
        },
    ]
    carried = copy.deepcopy(old)
    del carried["metadata"]["uid"]  # absent means "unchanged": the apiserver carries it over
    assert validate_update(rt("pods"), carried, old) == []


@pytest.mark.parametrize("resource", ["rs", "deploy"])
def test_controller_selector_is_immutable(resource: str) -> None:
    old: dict[str, Any] = {
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": template({"app": "web", "v": "1"}),
        },
    }
    apply_defaults(rt(resource).kind, old)
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 5
    assert validate_update(rt(resource), new, old) == []
    new["spec"]["selector"] = {"matchLabels": {"app": "web", "v": "1"}}
    assert [(c["field"], c["message"]) for c in validate_update(rt(resource), new, old)] == [
        (
            "spec.selector",
            'Invalid value: {"matchLabels":{"app":"web","v":"1"}}: field is immutable',
        )
    ]


def test_json_null_reads_as_an_absent_field() -> None:
    body = pod()
    body["spec"]["containers"] = None
    assert causes_of("pods", body) == [("spec.containers", "FieldValueRequired", "Required value")]
    body = pod()
    body["metadata"]["creationTimestamp"] = None  # what `kubectl create --dry-run -o yaml` writes
    assert causes_of("pods", body) == []


def test_malformed_selector_parts_are_causes_not_crashes() -> None:
    d: dict[str, Any] = {
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": [1], "matchExpressions": "x"},
            "template": template({"app": "web"}),
        },
    }
    apply_defaults("Deployment", d)
    assert [(f, r) for f, r, _ in causes_of("deploy", d)] == [
        ("spec.selector.matchLabels", "FieldValueInvalid"),
        ("spec.selector.matchExpressions", "FieldValueInvalid"),
    ]


def test_kubectl_generated_manifests_are_valid() -> None:
    d: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "creationTimestamp": None,
            "labels": {"app": "web"},
            "name": "web",
            "namespace": "default",
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {},
            "template": {
                "metadata": {"creationTimestamp": None, "labels": {"app": "web"}},
                "spec": {"containers": [{"image": "nginx", "name": "nginx", "resources": {}}]},
            },
        },
        "status": {},
    }
    apply_defaults("Deployment", d)
    assert causes_of("deploy", d) == []
