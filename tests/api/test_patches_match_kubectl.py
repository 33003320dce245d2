"""Differential test: kubelite's patch functions against kubectl's own (Go) implementation.

``kubectl patch --local -f obj.json --type=strategic|merge|json -p PATCH -o json`` applies a
patch offline with the very apimachinery code the apiserver runs (``StrategicMergePatch`` with
the struct tags compiled into kubectl 1.32, evanphx json-patch for the other two types). Each
case here applies the same patch both ways and compares the results, and one probe object per
kind checks every merge-key table entry (and some deliberately atomic lists) against kubectl's
compiled-in struct tags.

Both sides are compared as the apiserver would store them (``as_stored``): upstream leaves
leftover ``$setElementOrder`` keys and ``null`` members inside patch items that had no live
counterpart, which the typed decode then drops; kubelite drops them while merging.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from api.patches import apply_json_patch, apply_merge_patch, apply_strategic_merge_patch
from api.patches.schema import KINDS
from tests.api.kubectl_patch import OracleRefused, as_stored, object_of

pytestmark = pytest.mark.kubectl

# --- the probe objects: every table entry, and lists that must stay atomic ------------------

ATOMIC_PROBES = {
    "Pod": [
        "spec.tolerations",
        "spec.readinessGates",
        "spec.containers[].args",
        "spec.containers[].envFrom",
        "spec.containers[].resizePolicy",
        "status.containerStatuses",
        "spec.containers[].command",
    ],
    "Node": ["spec.taints", "status.images", "status.volumesAttached"],
    "Namespace": ["spec.finalizers"],
    "Deployment": ["spec.selector.matchExpressions", "spec.template.spec.tolerations"],
    "Service": ["spec.externalIPs"],
}


def _probe(
    table: dict[str, tuple[str, str | None]], path: str, key: str | None, side: str
) -> dict[str, Any]:
    """A fragment holding, at ``path``, a list shaped for a merge (or replace) test."""
    segments = path.split(".")
    if key is None and path in table and table[path][1] is None and table[path][0]:
        leaf: list[Any] = ["shared", f"{side}-only"]
    else:
        k = key or "name"
        leaf = [{k: "shared", f"{side}Field": "v"}, {k: f"{side}-only"}]
    node: Any = leaf
    for depth in range(len(segments) - 1, -1, -1):
        segment = segments[depth]
        name = segment.removesuffix("[]")
        if segment.endswith("[]"):
            list_path = ".".join([*segments[:depth], name])
            wrapper_key = table[list_path][1] or "name"
            node = {name: [{wrapper_key: "w", **node}]}
        else:
            node = {name: node}
    return node  # type: ignore[no-any-return]


def _merge_fragments(a: Any, b: Any) -> Any:
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for k, v in b.items():
            out[k] = _merge_fragments(out[k], v) if k in out else v
        return out
    if isinstance(a, list) and isinstance(b, list):  # wrapper items (key "w") merge, others add
        out = list(a)
        for item in b:
            twin = next((i for i, x in enumerate(out) if _is_wrapper_of(x, item)), None)
            if twin is None:
                out.append(item)
            else:
                out[twin] = _merge_fragments(out[twin], item)
        return out
    if a == b:
        return a
    raise AssertionError(f"probe paths collide: {a!r} / {b!r}")


def _is_wrapper_of(a: Any, b: Any) -> bool:
    return (
        isinstance(a, dict)
        and isinstance(b, dict)
        and any(v == "w" and b.get(k) == "w" for k, v in a.items())
    )


def _pod_spec_detail(path: str) -> bool:
    """Pod-spec entries under a template are the Pod's own; probe them once, on Pod."""
    return ".template.spec." in path and not path.endswith(".template.spec.containers")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_table_entry_merges_as_kubectl_merges_it(kind: str, kubectl: Any) -> None:
    table = dict(KINDS[kind])
    paths = [(p, rule[1]) for p, rule in table.items() if not _pod_spec_detail(p)]
    paths += [(p, None) for p in ATOMIC_PROBES.get(kind, [])]
    live: dict[str, Any] = {}
    patch: dict[str, Any] = {}
    for path, key in paths:
        live = _merge_fragments(live, _probe(table, path, key, "live"))
        patch = _merge_fragments(patch, _probe(table, path, key, "patch"))
    obj = object_of(kind, live)
    ours = apply_strategic_merge_patch(obj, patch, kind=kind)
    assert as_stored(ours) == as_stored(kubectl(obj, patch, "strategic"))


# --- whole patches ---------------------------------------------------------------------------

SAMPLE = Path(__file__).parents[1] / "fixtures" / "kubectl-samples" / "smp_patch_example.json"

POD = {
    "metadata": {
        "labels": {"keep": "1", "drop": "x"},
        "finalizers": ["example.com/a", "example.com/b"],
        "ownerReferences": [
            {"uid": "u1", "name": "rs", "kind": "ReplicaSet", "apiVersion": "apps/v1"}
        ],
    },
    "spec": {
        "containers": [
            {
                "name": "a",
                "image": "busybox:1.35",
                "env": [
                    {"name": "E1", "value": "1"},
                    {"name": "INJECTED", "value": "i"},
                    {"name": "E2", "value": "2"},
                ],
                "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 81}],
                "volumeMounts": [{"mountPath": "/d", "name": "data"}],
            },
            {"name": "b", "image": "busybox"},
            {"name": "srv", "image": "injected"},
        ],
        "tolerations": [{"key": "k1", "operator": "Exists"}],
        "volumes": [{"name": "data", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "c"}}],
        "nodeSelector": {"zz": "cxk"},
        "nodeName": "node1",
    },
    "status": {
        "phase": "Running",
        "conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "Initialized", "status": "True"},
        ],
        "podIPs": [{"ip": "127.1.0.7"}],
    },
}

STRATEGIC_CASES: dict[str, dict[str, Any]] = {
    "kubectl sample pod3a->pod3b": json.loads(SAMPLE.read_text()),
    "apply example": {
        "metadata": {"labels": {"tier": "x"}},
        "spec": {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}, {"name": "srv"}],
            "containers": [
                {
                    "$setElementOrder/env": [{"name": "E1"}, {"name": "INJECTED"}, {"name": "E2"}],
                    "env": [{"name": "E1", "value": "baz"}],
                    "image": "busybox:1.37",
                    "name": "a",
                }
            ],
        },
    },
    "new items without order lead": {
        "spec": {"containers": [{"name": "z", "image": "new"}, {"name": "b", "image": "b2"}]},
        "metadata": {"finalizers": ["example.com/c"]},
    },
    "order with new and server-only items": {
        "spec": {
            "$setElementOrder/containers": [{"name": "srv"}, {"name": "n"}, {"name": "a"}],
            "containers": [{"name": "n", "image": "new"}],
            "$setElementOrder/volumes": [{"name": "cfg"}, {"name": "data"}],
        }
    },
    "scalar order directive": {
        "metadata": {
            "$setElementOrder/finalizers": ["example.com/b", "example.com/z", "example.com/a"],
            "finalizers": ["example.com/z"],
        }
    },
    "delete and replace directives": {
        "spec": {
            "containers": [
                {"name": "b", "$patch": "delete"},
                {"name": "a", "ports": [{"$patch": "replace"}]},
            ],
            "nodeSelector": {"$patch": "replace", "new": "sel"},
            "securityContext": {"$patch": "delete"},
        }
    },
    "replace a whole merge list": {
        "spec": {"volumes": [{"$patch": "replace"}, {"name": "only", "emptyDir": {}}]}
    },
    "retainKeys switches a volume": {
        "spec": {
            "volumes": [
                {
                    "$retainKeys": ["hostPath", "name"],
                    "name": "data",
                    "hostPath": {"path": "/d"},
                    "emptyDir": None,
                }
            ]
        }
    },
    "delete from primitive list": {
        "metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/a", "nope"]},
    },
    "conditions and ips by key": {
        "status": {
            "conditions": [{"type": "Ready", "status": "False", "reason": "X"}],
            "podIPs": [{"ip": "127.1.0.8"}],
        }
    },
    "owner references by uid": {
        "metadata": {
            "ownerReferences": [{"uid": "u1", "controller": True}, {"uid": "u2", "name": "other"}]
        }
    },
    "nulls and type changes": {
        "metadata": {"labels": {"drop": None, "nope": None}},
        "spec": {"nodeSelector": None, "tolerations": "weird", "hostname": {"a": 1, "b": None}},
        "status": {"phase": None},
    },
    "new values carry no nulls or delete items": {
        "metadata": {"annotations": {"a": None, "b": "1"}},
        "spec": {
            "containers": [
                {
                    "name": "a",
                    "resources": {"limits": {"cpu": "1", "memory": None}},
                    "volumeDevices": [
                        {"devicePath": "/x", "$patch": "delete"},
                        {"devicePath": "/y", "name": "v"},
                    ],
                },
                {
                    "name": "fresh",
                    "image": "i",
                    "env": [{"name": "A", "value": None}],
                    "$setElementOrder/env": [{"name": "A"}],
                },
            ],
            "affinity": {"$patch": "delete"},
        },
    },
    "atomic lists replace": {
        "spec": {
            "tolerations": [{"key": "k2"}],
            "containers": [{"name": "a", "args": ["x"], "command": ["sh"]}],
        }
    },
    "merge into the same key twice": {
        "spec": {"containers": [{"name": "q", "image": "1"}, {"name": "q", "args": ["2"]}]}
    },
}


@pytest.mark.parametrize("name", sorted(STRATEGIC_CASES))
def test_strategic_merge_patch_matches_kubectl(name: str, kubectl: Any) -> None:
    patch = STRATEGIC_CASES[name]
    obj = object_of("Pod", copy.deepcopy(POD))
    ours = apply_strategic_merge_patch(obj, patch, kind="Pod")
    assert "$" not in json.dumps(ours)
    assert as_stored(ours) == as_stored(kubectl(obj, patch, "strategic"))


DEPLOYMENT = {
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "containers": [
                    {"name": "nginx", "image": "nginx:1.25"},
                    {"name": "side", "image": "b"},
                ]
            },
        },
    },
    "status": {
        "conditions": [
            {"type": "Available", "status": "True"},
            {"type": "Progressing", "status": "True"},
        ]
    },
}


def test_deployment_image_change_matches_kubectl(kubectl: Any) -> None:
    obj = object_of("Deployment", copy.deepcopy(DEPLOYMENT))
    patch = {
        "spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.26"}]}}},
        "status": {"conditions": [{"type": "Progressing", "status": "False"}]},
    }
    assert apply_strategic_merge_patch(obj, patch, kind="Deployment") == kubectl(
        obj, patch, "strategic"
    )


@pytest.mark.parametrize(
    "patch",
    [
        {"spec": {"containers": [{"name": "a", "$patch": "merge"}]}},
        {"spec": {"containers": [{"image": "no-name"}]}},
        {
            "spec": {
                "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
                "containers": [{"name": "a"}, {"name": "b"}],
            }
        },
        {
            "spec": {
                "volumes": [{"name": "data", "$retainKeys": ["name"], "hostPath": {"path": "/"}}]
            }
        },
        {"spec": {"nodeSelector": {"$patch": "frob"}}},
    ],
    ids=[
        "merge directive",
        "missing merge key",
        "order mismatch",
        "retainKeys violation",
        "unknown directive",
    ],
)
def test_patches_kubectl_refuses_are_refused(patch: Any, kubectl: Any) -> None:
    obj = object_of("Pod", copy.deepcopy(POD))
    with pytest.raises(OracleRefused):
        kubectl(obj, patch, "strategic")
    with pytest.raises(Exception) as caught:
        apply_strategic_merge_patch(obj, patch, kind="Pod")
    assert type(caught.value).__name__ == "BadRequest"


MERGE_CASES = [
    {"metadata": {"labels": {"zz": "cxk"}}},
    {"metadata": {"labels": {"keep": None}}, "spec": {"replicas": 3}},
    {"spec": {"containers": [{"name": "only"}]}, "status": None},
    {"spec": {"nodeSelector": {"a": {"b": None, "c": 1}}}},
]


@pytest.mark.parametrize("patch", MERGE_CASES)
def test_merge_patch_matches_kubectl(patch: Any, kubectl: Any) -> None:
    obj = object_of("Pod", copy.deepcopy(POD))
    assert apply_merge_patch(obj, patch) == kubectl(obj, patch, "merge")


JSON_CASES = [
    [{"op": "add", "path": "/metadata/labels/new", "value": "v"}],
    [{"op": "replace", "path": "/spec/containers/0/image", "value": "busybox:2"}],
    [
        {"op": "remove", "path": "/spec/containers/1"},
        {"op": "add", "path": "/spec/containers/-", "value": {"name": "e"}},
    ],
    [{"op": "move", "from": "/metadata/labels/drop", "path": "/metadata/labels/moved"}],
    [{"op": "copy", "from": "/spec/nodeName", "path": "/metadata/labels/node"}],
    [
        {"op": "test", "path": "/spec/nodeName", "value": "node1"},
        {"op": "remove", "path": "/status"},
    ],
    [{"op": "replace", "path": "/spec/containers/-1/image", "value": "last"}],
]


@pytest.mark.parametrize("ops", JSON_CASES)
def test_json_patch_matches_kubectl(ops: Any, kubectl: Any) -> None:
    obj = object_of("Pod", copy.deepcopy(POD))
    assert apply_json_patch(obj, ops) == kubectl(obj, ops, "json")


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "test", "path": "/spec/nodeName", "value": "node2"}],
        [{"op": "remove", "path": "/spec/nope"}],
        [{"op": "frob", "path": "/spec"}],
        [{"op": "add", "path": "/spec/containers/9", "value": {}}],
    ],
)
def test_json_patch_failures_match_kubectl(ops: Any, kubectl: Any) -> None:
    obj = object_of("Pod", copy.deepcopy(POD))
    with pytest.raises(OracleRefused):
        kubectl(obj, ops, "json")
    with pytest.raises(Exception) as caught:
        apply_json_patch(obj, ops)
    assert type(caught.value).__name__ == "Invalid"
