"""Strategic merge patch — what ``kubectl apply`` sends, applied as the apiserver applies it.

The centre piece is the real patch kubectl 1.32 sent for ``pod3a.yaml -> pod3b.yaml``
(``tests/fixtures/kubectl-samples/smp_patch_example.json``): applied to the live pod3a it must give
pod3b, keeping what the server added (defaults, status, an injected env var) where it was.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from api.errors import BadRequest, Invalid
from api.patches import apply_strategic_merge_patch
from api.patches.schema import KINDS, compile_table, for_kind

SAMPLE = Path(__file__).parents[1] / "fixtures" / "kubectl-samples" / "smp_patch_example.json"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

# Reconstructed from the patch: what the user applied first, and what they applied next.
POD3A = yaml.safe_load(
    """
apiVersion: v1
kind: Pod
metadata:
  name: pod3
  labels: {keep: "1", drop: "x"}
  finalizers: [example.com/a, example.com/b]
spec:
  containers:
  - name: a
    image: busybox:1.35
    env: [{name: E1, value: "1"}, {name: E2, value: "2"}]
    ports: [{containerPort: 80}, {containerPort: 81}]
  - name: b
    image: busybox
  tolerations: [{key: k1, operator: Exists}]
  volumes:
  - name: data
    emptyDir: {}
"""
)
POD3B = yaml.safe_load(
    """
apiVersion: v1
kind: Pod
metadata:
  name: pod3
  labels: {keep: "1"}
  finalizers: [example.com/b]
spec:
  containers:
  - name: c
    image: alpine
  - name: a
    image: busybox:1.36
    env: [{name: E2, value: "2"}, {name: E3, value: "3"}]
    ports: [{containerPort: 80}]
  tolerations: [{key: k2, operator: Exists}]
  volumes:
  - name: data
    hostPath: {path: /data}
"""
)


def _sample_patch() -> dict[str, Any]:
    patch: dict[str, Any] = json.loads(SAMPLE.read_text())
    return patch


def _live_pod3a() -> dict[str, Any]:
    """pod3a as the apiserver stores it: the manifest plus what the server added."""
    live = copy.deepcopy(POD3A)
    live["metadata"] |= {
        "namespace": "default",
        "uid": "6f1c",
        "resourceVersion": "41",
        "annotations": {LAST_APPLIED: json.dumps(POD3A)},
    }
    a = live["spec"]["containers"][0]
    a["imagePullPolicy"] = "IfNotPresent"
    a["env"].insert(1, {"name": "INJECTED", "value": "by-admission"})
    for port in a["ports"]:
        port["protocol"] = "TCP"
    live["spec"]["nodeName"] = "node1"
    live["status"] = {"phase": "Running", "podIP": "127.1.0.7"}
    return live


def test_kubectl_sample_turns_pod3a_into_pod3b_keeping_server_fields() -> None:
    patch = _sample_patch()
    result = apply_strategic_merge_patch(_live_pod3a(), patch, kind="Pod")

    expected = copy.deepcopy(POD3B)
    expected["metadata"] |= {
        "namespace": "default",
        "uid": "6f1c",
        "resourceVersion": "41",
        "annotations": {LAST_APPLIED: patch["metadata"]["annotations"][LAST_APPLIED]},
    }
    a = expected["spec"]["containers"][1]
    a["imagePullPolicy"] = "IfNotPresent"
    # The server-only variable keeps its place relative to the others (it followed E1, led E2).
    a["env"].insert(0, {"name": "INJECTED", "value": "by-admission"})
    a["ports"][0]["protocol"] = "TCP"
    expected["spec"]["nodeName"] = "node1"
    expected["status"] = {"phase": "Running", "podIP": "127.1.0.7"}
    assert result == expected
    assert [c["name"] for c in result["spec"]["containers"]] == ["c", "a"]


def test_kubectl_apply_example_from_the_wire_log() -> None:
    live = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "demo",
            "labels": {"app": "demo"},
            "annotations": {LAST_APPLIED: "{}"},
        },
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "busybox:1.36",
                    "env": [{"name": "FOO", "value": "bar"}],
                    "terminationMessagePath": "/dev/termination-log",
                }
            ]
        },
    }
    patch = {
        "metadata": {"annotations": {LAST_APPLIED: "{new}"}, "labels": {"tier": "x"}},
        "spec": {
            "$setElementOrder/containers": [{"name": "main"}],
            "containers": [
                {
                    "$setElementOrder/env": [{"name": "FOO"}],
                    "env": [{"name": "FOO", "value": "baz"}],
                    "image": "busybox:1.37",
                    "name": "main",
                }
            ],
        },
    }
    result = apply_strategic_merge_patch(live, patch, kind="Pod")
    assert result["metadata"] == {
        "name": "demo",
        "labels": {"app": "demo", "tier": "x"},
        "annotations": {LAST_APPLIED: "{new}"},
    }
    assert result["spec"]["containers"] == [
        {
            "name": "main",
            "image": "busybox:1.37",
            "env": [{"name": "FOO", "value": "baz"}],
            "terminationMessagePath": "/dev/termination-log",
        }
    ]


def test_deployment_template_image_change_touches_only_that_container() -> None:
    live = {
        "kind": "Deployment",
        "metadata": {"name": "web", "generation": 3},
        "spec": {
            "replicas": 2,
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {"name": "nginx", "image": "nginx:1.25", "ports": [{"containerPort": 80}]},
                        {"name": "sidecar", "image": "busybox"},
                    ]
                },
            },
        },
        "status": {"conditions": [{"type": "Available", "status": "True"}]},
    }
    patch = {
        "spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.26"}]}}}
    }
    result = apply_strategic_merge_patch(live, patch, kind="Deployment")
    containers = result["spec"]["template"]["spec"]["containers"]
    assert containers == [
        {"name": "nginx", "image": "nginx:1.26", "ports": [{"containerPort": 80}]},
        {"name": "sidecar", "image": "busybox"},
    ]
    assert result["status"] == live["status"] and result["spec"]["replicas"] == 2


def test_null_deletes_and_a_type_change_replaces() -> None:
    live = {"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"nodeSelector": {"zz": "cxk"}}}
    patch = {"metadata": {"labels": {"a": None}}, "spec": {"nodeSelector": "oops", "absent": None}}
    assert apply_strategic_merge_patch(live, patch, kind="Pod") == {
        "metadata": {"labels": {"b": "2"}},
        "spec": {"nodeSelector": "oops"},
    }


def test_lists_without_a_strategy_are_replaced_whole() -> None:
    live = {
        "spec": {"tolerations": [{"key": "a"}], "containers": [{"name": "c", "args": ["x", "y"]}]}
    }
    patch = {"spec": {"tolerations": [{"key": "b"}], "containers": [{"name": "c", "args": ["z"]}]}}
    result = apply_strategic_merge_patch(live, patch, kind="Pod")
    assert result["spec"]["tolerations"] == [{"key": "b"}]
    assert result["spec"]["containers"] == [{"name": "c", "args": ["z"]}]


def test_node_taints_are_atomic_but_conditions_merge_by_type() -> None:
    live = {
        "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}], "podCIDRs": ["127.1.0.0/16"]},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady"},
                {"type": "MemoryPressure", "status": "False"},
            ],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        },
    }
    patch = {
        "spec": {"taints": [{"key": "b", "effect": "NoExecute"}], "podCIDRs": ["127.2.0.0/16"]},
        "status": {
            "conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}],
            "addresses": [{"type": "Hostname", "address": "node1"}],
        },
    }
    result = apply_strategic_merge_patch(live, patch, kind="Node")
    assert result["spec"]["taints"] == [{"key": "b", "effect": "NoExecute"}]
    # a merged scalar set: new patch items lead, like upstream without $setElementOrder
    assert result["spec"]["podCIDRs"] == ["127.2.0.0/16", "127.1.0.0/16"]
    assert result["status"]["conditions"] == [
        {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"},
        {"type": "MemoryPressure", "status": "False"},
    ]
    assert {a["type"] for a in result["status"]["addresses"]} == {"InternalIP", "Hostname"}


def test_owner_references_merge_by_uid_and_finalizers_are_a_set() -> None:
    live = {
        "metadata": {
            "ownerReferences": [{"uid": "u1", "kind": "ReplicaSet", "name": "rs"}],
            "finalizers": ["f1", "f2"],
        }
    }
    patch = {
        "metadata": {
            "ownerReferences": [{"uid": "u1", "blockOwnerDeletion": True}],
            "finalizers": ["f2", "f3"],
        }
    }
    result = apply_strategic_merge_patch(live, patch, kind="ReplicaSet")
    assert result["metadata"]["ownerReferences"] == [
        {"uid": "u1", "kind": "ReplicaSet", "name": "rs", "blockOwnerDeletion": True}
    ]
    assert result["metadata"]["finalizers"] == ["f1", "f2", "f3"]


def test_delete_directive_removes_every_item_with_that_key() -> None:
    live = {"spec": {"containers": [{"name": "a"}, {"name": "b"}, {"name": "a", "image": "dup"}]}}
    patch = {"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}
    assert apply_strategic_merge_patch(live, patch, kind="Pod")["spec"]["containers"] == [
        {"name": "b"}
    ]


def test_replace_directive_in_a_list_replaces_the_list() -> None:
    live = {"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b"}]}}
    patch = {"spec": {"containers": [{"name": "c", "image": "y"}, {"$patch": "replace"}]}}
    result = apply_strategic_merge_patch(live, patch, kind="Pod")
    assert result["spec"]["containers"] == [{"name": "c", "image": "y"}]
    emptied = apply_strategic_merge_patch(
        live, {"spec": {"containers": [{"$patch": "replace"}]}}, kind="Pod"
    )
    assert emptied["spec"]["containers"] == []


def test_replace_and_delete_directives_in_a_map() -> None:
    live = {"spec": {"nodeSelector": {"a": "1", "b": "2"}, "securityContext": {"runAsUser": 1}}}
    patch = {
        "spec": {
            "nodeSelector": {"$patch": "replace", "c": "3"},
            "securityContext": {"$patch": "delete"},
        }
    }
    result = apply_strategic_merge_patch(live, patch, kind="Pod")
    assert result["spec"] == {"nodeSelector": {"c": "3"}, "securityContext": {}}


def test_retain_keys_switches_a_volume_source() -> None:
    live = {
        "spec": {
            "volumes": [
                {"name": "data", "emptyDir": {"medium": "Memory"}},
                {"name": "other", "emptyDir": {}},
            ]
        }
    }
    patch = {
        "spec": {
            "volumes": [
                {"$retainKeys": ["hostPath", "name"], "name": "data", "hostPath": {"path": "/d"}}
            ]
        }
    }
    result = apply_strategic_merge_patch(live, patch, kind="Pod")
    assert result["spec"]["volumes"] == [
        {"name": "data", "hostPath": {"path": "/d"}},
        {"name": "other", "emptyDir": {}},
    ]


def test_retain_keys_refuses_patch_keys_outside_the_list() -> None:
    live = {"spec": {"volumes": [{"name": "data", "emptyDir": {}}]}}
    patch = {
        "spec": {"volumes": [{"$retainKeys": ["name"], "name": "data", "hostPath": {"path": "/d"}}]}
    }
    with pytest.raises(BadRequest, match="retainKeys"):
        apply_strategic_merge_patch(live, patch, kind="Pod")


def test_delete_from_primitive_list() -> None:
    live = {"metadata": {"finalizers": ["a", "b", "c"]}}
    patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a", "c", "zz"]}}
    assert apply_strategic_merge_patch(live, patch, kind="Pod")["metadata"] == {"finalizers": ["b"]}
    # deleting from an absent list leaves it absent
    assert apply_strategic_merge_patch({"metadata": {}}, patch, kind="Pod") == {"metadata": {}}


def test_set_element_order_orders_patch_items_and_keeps_server_only_items_anchored() -> None:
    live = {"spec": {"containers": [{"name": "x"}, {"name": "a"}, {"name": "srv"}, {"name": "b"}]}}
    patch = {
        "spec": {
            "$setElementOrder/containers": [
                {"name": "b"},
                {"name": "x"},
                {"name": "a"},
                {"name": "n"},
            ],
            "containers": [{"name": "n", "image": "new"}],
        }
    }
    result = apply_strategic_merge_patch(live, patch, kind="Pod")
    names = [c["name"] for c in result["spec"]["containers"]]
    # listed items in the listed order; "srv" came before "b" live, so it still leads "b"
    # (what kubectl 1.32's own merge gives for this patch, checked by the kubectl oracle test)
    assert names == ["srv", "b", "x", "a", "n"]


def test_without_order_directive_new_items_lead_as_upstream() -> None:
    live = {"spec": {"containers": [{"name": "a"}]}}
    result = apply_strategic_merge_patch(
        live, {"spec": {"containers": [{"name": "b"}]}}, kind="Pod"
    )
    assert [c["name"] for c in result["spec"]["containers"]] == ["b", "a"]


def test_patch_order_is_kept_for_merged_items() -> None:
    live = {"spec": {"containers": [{"name": "1"}, {"name": "2", "image": "b"}, {"name": "3"}]}}
    patch = {"spec": {"containers": [{"name": "3", "image": "c"}, {"name": "1", "image": "a"}]}}
    result = apply_strategic_merge_patch(live, patch, kind="Pod")
    assert result["spec"]["containers"] == [
        {"name": "2", "image": "b"},
        {"name": "3", "image": "c"},
        {"name": "1", "image": "a"},
    ]


def test_values_without_a_live_counterpart_store_no_directives_or_nulls() -> None:
    live: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]}}
    patch = {
        "metadata": {"labels": {"x": None, "y": "1"}, "$deleteFromPrimitiveList/finalizers": ["f"]},
        "spec": {
            "containers": [
                {
                    "name": "a",
                    "$setElementOrder/env": [{"name": "E"}],
                    "env": [{"name": "E", "value": "v"}, {"name": "GONE", "$patch": "delete"}],
                    "ports": [{"containerPort": 1, "$patch": "delete"}],
                }
            ],
            "volumes": [{"$retainKeys": ["name", "emptyDir"], "name": "v", "emptyDir": {}}],
            "affinity": {"$patch": "delete"},
        },
    }
    result = apply_strategic_merge_patch(live, patch, kind="Pod")
    assert result == {
        "metadata": {"name": "p", "labels": {"y": "1"}},
        "spec": {
            "containers": [{"name": "a", "env": [{"name": "E", "value": "v"}], "ports": []}],
            "volumes": [{"name": "v", "emptyDir": {}}],
        },
    }
    assert "$" not in json.dumps(result)


def test_unknown_kinds_keep_object_meta_rules_and_replace_other_lists() -> None:
    live = {"metadata": {"finalizers": ["a"]}, "spec": {"items": [{"name": "x"}]}}
    patch = {
        "metadata": {"finalizers": ["b"]},
        "spec": {"items": [{"name": "y"}], "m": {"$patch": "replace"}},
    }
    result = apply_strategic_merge_patch(live, patch, kind="Widget")
    assert result == {
        "metadata": {"finalizers": ["b", "a"]},
        "spec": {"items": [{"name": "y"}], "m": {}},
    }


BAD_PATCHES: list[tuple[str, Any]] = [
    ("not an object", ["spec"]),
    ("$patch: merge in a list", {"spec": {"containers": [{"name": "a", "$patch": "merge"}]}}),
    ("unknown list directive", {"spec": {"containers": [{"name": "a", "$patch": "frob"}]}}),
    ("unknown map directive", {"spec": {"nodeSelector": {"$patch": "frob"}}}),
    ("merge item without its key", {"spec": {"containers": [{"image": "x"}]}}),
    ("delete item without its key", {"spec": {"containers": [{"$patch": "delete"}]}}),
    ("order directive not a list", {"spec": {"$setElementOrder/containers": {"name": "a"}}}),
    ("order directive without a field", {"spec": {"$setElementOrder": [{"name": "a"}]}}),
    (
        "order contradicts the patch list",
        {
            "spec": {
                "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
                "containers": [{"name": "b"}, {"name": "a"}],
            }
        },
    ),
    ("order item without merge key", {"spec": {"$setElementOrder/containers": [{"image": "x"}]}}),
    ("primitive deletion not a list", {"metadata": {"$deleteFromPrimitiveList/finalizers": "f"}}),
    ("primitive deletion prefix typo", {"metadata": {"$deleteFromPrimitiveListfinalizers": ["f"]}}),
    ("retainKeys not a list", {"spec": {"volumes": [{"name": "data", "$retainKeys": "name"}]}}),
    ("mixed element types", {"metadata": {"finalizers": [1]}}),
    ("objects in a scalar set", {"metadata": {"finalizers": [{"a": 1}]}}),
]


@pytest.mark.parametrize("patch", [b[1] for b in BAD_PATCHES], ids=[b[0] for b in BAD_PATCHES])
def test_malformed_patches_are_bad_requests(patch: Any) -> None:
    live = {
        "metadata": {"finalizers": ["a"]},
        "spec": {
            "containers": [{"name": "a"}, {"name": "b"}],
            "volumes": [{"name": "data", "emptyDir": {}}],
        },
    }
    with pytest.raises(BadRequest) as caught:
        apply_strategic_merge_patch(live, patch, kind="Pod")
    assert caught.value.to_status()["code"] == 400


def test_lists_of_lists_are_422_like_upstream() -> None:
    with pytest.raises(Invalid):
        apply_strategic_merge_patch(
            {"metadata": {"finalizers": [["a"]]}}, {"metadata": {"finalizers": [["b"]]}}, kind="Pod"
        )


def test_inputs_are_untouched_and_result_shares_nothing() -> None:
    live, patch = _live_pod3a(), _sample_patch()
    before_live, before_patch = copy.deepcopy(live), copy.deepcopy(patch)
    result = apply_strategic_merge_patch(live, patch, kind="Pod")
    assert live == before_live and patch == before_patch

    def containers(value: Any) -> list[int]:
        found = []
        stack = [value]
        while stack:
            v = stack.pop()
            if isinstance(v, dict | list):
                found.append(id(v))
                stack.extend(v.values() if isinstance(v, dict) else v)
        return found

    shared = set(containers(result)) & (set(containers(live)) | set(containers(patch)))
    assert not shared


def test_every_table_compiles_and_marks_the_container_lists() -> None:
    for kind in KINDS:
        assert for_kind(kind).child("metadata").child("ownerReferences").merge_key == "uid"
    pod = for_kind("Pod").child("spec")
    assert pod.child("containers").child("ports").merge_key == "containerPort"
    assert pod.child("volumes").retain_keys
    assert not pod.child("tolerations").merges
    template = for_kind("Deployment").child("spec").child("template").child("spec")
    assert template.child("containers").child("env").merge_key == "name"
    with pytest.raises(ValueError, match="conflicting"):
        compile_table({"a[].b": ("merge", "x"), "a.b": ("merge", "y")})
