"""Every answer about every served kind reads as the official client's typed models.

The official ``kubernetes`` client (37.x) validates what it deserialises: a field Kubernetes
always serialises (a Go struct field without ``omitempty``, such as ``ReplicaSetStatus.replicas``)
is required in its models, and a response without it raises instead of returning an object.
So for **every kind in the registry** — iterated, so a kind added later is covered, and a kind
without a sample below fails loudly — these tests create a sample through the real apiserver and
read the answers of create, get, list, the Table rows' objects, watch events, patch, update,
delete and each subresource (status, scale, binding, eviction, finalize, a ServiceAccount's
token) with the client's own ``ApiClient().deserialize``, as ``read_namespaced_replica_set`` and
friends would. The create-only kinds (Binding, the access, rules, token and self-subject
reviews) are never stored: their create answer is all there is to read.

Objects stored before the server wrote those fields (older data) must read right too: the last
tests put such objects straight into the store and read them back through every read path.
"""

from __future__ import annotations

import asyncio
import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from api.registry import REGISTRY, ResourceType
from component import pki
from services.apiserver.storage import encode
from services.kubelet.pod_status import ContainerView, container_status
from services.kubelet.runtime.base import ContainerRecord
from tests.apiserver.conftest import Api, EventReader, MakeApi
from tests.factories import cpu_utilization, crd, horizontal_pod_autoscaler, priority_class

Obj = dict[str, Any]

CLIENT = k8s.ApiClient()
NS = "default"
NAME = "sample"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
TOKEN = "round-trip-token"
"""A ``--token-auth-file`` token of alice's, for the TokenReview sample to ask about."""

TEMPLATE: Obj = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "main", "image": "nginx"}]},
}


@pytest.fixture(scope="module")
def credentials(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A service-account signing key and a token file, made once for the module."""
    directory = tmp_path_factory.mktemp("credentials")
    tokens = directory / "tokens.csv"
    tokens.write_text(f'{TOKEN},alice,uid-1,"devs"\n')
    return pki.ensure_signing_key(directory).key, tokens


@pytest.fixture(params=["memory", "sqlite"])
async def api(
    request: pytest.FixtureRequest, make_api: MakeApi, credentials: tuple[Path, Path]
) -> Api:
    """The conftest's ``api`` with what the token subresource and TokenReview need: a key to
    sign TokenRequest tokens with and a static token to review."""
    signing_key, tokens = credentials
    return await make_api(
        request.param, service_account_signing_key_file=signing_key, token_auth_file=tokens
    )


@dataclass(frozen=True)
class Sample:
    body: Obj
    """A representative object of the kind, named ``NAME``."""
    setup: tuple[tuple[str, Obj], ...] = ()
    """(collection path, body) to create first (what the sample refers to)."""
    create_answers: str | None = None
    """The client model of the create answer when it is not the kind's own (Binding: Status)."""


SAMPLES: dict[tuple[str, str], Sample] = {
    ("", "Pod"): Sample(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": NAME, "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]},
        }
    ),
    ("", "Node"): Sample({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NAME}}),
    ("", "Namespace"): Sample(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAME}}
    ),
    ("", "Event"): Sample(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": NAME},
            "involvedObject": {"kind": "Pod", "namespace": NS, "name": "p"},
            "reason": "Scheduled",
            "message": "hello",
            "type": "Normal",
        }
    ),
    ("", "ReplicationController"): Sample(
        {
            "apiVersion": "v1",
            "kind": "ReplicationController",
            "metadata": {"name": NAME},
            "spec": {"replicas": 2, "selector": {"app": "web"}, "template": TEMPLATE},
        }
    ),
    ("", "Binding"): Sample(
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "to-bind"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "node1"},
        },
        setup=(
            (
                f"/api/v1/namespaces/{NS}/pods",
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "to-bind"},
                    "spec": {"containers": [{"name": "main", "image": "nginx"}]},
                },
            ),
        ),
        create_answers="V1Status",  # Kubernetes answers a binding with a Status
    ),
    ("apps", "ReplicaSet"): Sample(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": NAME},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": TEMPLATE,
            },
        }
    ),
    ("apps", "Deployment"): Sample(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": NAME},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": TEMPLATE,
            },
        }
    ),
    ("coordination.k8s.io", "Lease"): Sample(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": NAME},
            "spec": {"holderIdentity": "node1", "leaseDurationSeconds": 40},
        }
    ),
    ("", "ConfigMap"): Sample(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": NAME},
            "data": {"a": "1"},
            "binaryData": {"b": "AAE="},
        }
    ),
    ("", "Secret"): Sample(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": NAME},
            "stringData": {"password": "s3cret"},
        }
    ),
    ("", "Service"): Sample(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": NAME},
            "spec": {
                "type": "NodePort",
                "selector": {"app": "web"},
                "ports": [{"name": "http", "port": 80, "targetPort": "http"}],
            },
        }
    ),
    ("", "ServiceAccount"): Sample(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": NAME},
            "imagePullSecrets": [{"name": "registry"}],
        }
    ),
    ("", "PersistentVolume"): Sample(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": NAME},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "local": {"path": "/data/sample"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "kubernetes.io/hostname",
                                        "operator": "In",
                                        "values": ["node1"],
                                    }
                                ]
                            }
                        ]
                    }
                },
            },
        }
    ),
    ("", "PersistentVolumeClaim"): Sample(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": NAME},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
    ),
    ("storage.k8s.io", "StorageClass"): Sample(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": NAME},
            "provisioner": "example.com/sample",
        }
    ),
    ("scheduling.k8s.io", "PriorityClass"): Sample(
        priority_class(NAME, value=1000, description="a sample class")
    ),
    ("apps", "StatefulSet"): Sample(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": NAME},
            "spec": {
                "serviceName": "web",
                "selector": {"matchLabels": {"app": "web"}},
                "template": TEMPLATE,
                "volumeClaimTemplates": [
                    {
                        "metadata": {"name": "data"},
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}},
                        },
                    }
                ],
            },
        }
    ),
    ("apps", "DaemonSet"): Sample(
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": NAME},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": TEMPLATE},
        }
    ),
    ("apps", "ControllerRevision"): Sample(
        {
            "apiVersion": "apps/v1",
            "kind": "ControllerRevision",
            "metadata": {"name": NAME},
            "data": {"spec": {"template": TEMPLATE}},
            "revision": 1,
        }
    ),
    ("batch", "Job"): Sample(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": NAME},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [{"name": "main", "image": "busybox"}],
                        "restartPolicy": "Never",
                    }
                },
                "podFailurePolicy": {
                    "rules": [
                        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
                        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}},
                    ]
                },
            },
        }
    ),
    ("batch", "CronJob"): Sample(
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": NAME},
            "spec": {
                "schedule": "*/5 * * * *",
                "timeZone": "Europe/Paris",
                "jobTemplate": {
                    "spec": {
                        "template": {
                            "spec": {
                                "containers": [{"name": "main", "image": "busybox"}],
                                "restartPolicy": "OnFailure",
                            }
                        }
                    }
                },
            },
        }
    ),
    ("autoscaling", "HorizontalPodAutoscaler"): Sample(
        horizontal_pod_autoscaler(
            NAME,
            target="web",
            minReplicas=1,
            metrics=[cpu_utilization(50)],
            behavior={"scaleDown": {"stabilizationWindowSeconds": 60}},
        )
    ),
    ("policy", "PodDisruptionBudget"): Sample(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": NAME},
            "spec": {"maxUnavailable": "25%", "selector": {"matchLabels": {"app": "web"}}},
        }
    ),
    ("", "Endpoints"): Sample(
        {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {"name": NAME},
            "subsets": [
                {
                    "addresses": [
                        {
                            "ip": "10.0.0.1",
                            "nodeName": "node1",
                            "targetRef": {"kind": "Pod", "namespace": NS, "name": "web-1"},
                        }
                    ],
                    "notReadyAddresses": [{"ip": "10.0.0.2"}],
                    "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
                }
            ],
        }
    ),
    ("discovery.k8s.io", "EndpointSlice"): Sample(
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": NAME, "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "endpoints": [
                {
                    "addresses": ["10.0.0.1"],
                    "conditions": {"ready": True, "serving": True, "terminating": False},
                    "nodeName": "node1",
                    "targetRef": {"kind": "Pod", "namespace": NS, "name": "web-1"},
                }
            ],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        }
    ),
    ("rbac.authorization.k8s.io", "Role"): Sample(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": NAME},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
        }
    ),
    ("rbac.authorization.k8s.io", "RoleBinding"): Sample(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": NAME},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
            "subjects": [
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"},
                {"kind": "ServiceAccount", "namespace": NS, "name": "robot"},
            ],
        }
    ),
    ("rbac.authorization.k8s.io", "ClusterRole"): Sample(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": NAME},
            "rules": [
                {"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["update"]},
                {"nonResourceURLs": ["/healthz"], "verbs": ["get"]},
            ],
        }
    ),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): Sample(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": NAME},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "view",
            },
            "subjects": [
                {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "devs"}
            ],
        }
    ),
    # the reviews are answered on create and never stored: the answer is all there is to read
    ("authorization.k8s.io", "SubjectAccessReview"): Sample(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "metadata": {},
            "spec": {
                "user": "alice",
                "groups": ["devs"],
                "resourceAttributes": {"namespace": NS, "verb": "get", "resource": "pods"},
            },
        }
    ),
    ("authorization.k8s.io", "SelfSubjectAccessReview"): Sample(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "metadata": {},
            "spec": {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}},
        }
    ),
    ("authorization.k8s.io", "LocalSubjectAccessReview"): Sample(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "LocalSubjectAccessReview",
            "metadata": {"namespace": NS},
            "spec": {
                "user": "alice",
                "resourceAttributes": {"namespace": NS, "verb": "list", "resource": "secrets"},
            },
        }
    ),
    ("authorization.k8s.io", "SelfSubjectRulesReview"): Sample(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectRulesReview",
            "metadata": {},
            "spec": {"namespace": NS},
        }
    ),
    ("authentication.k8s.io", "TokenReview"): Sample(
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "metadata": {},
            "spec": {"token": TOKEN},
        }
    ),
    ("authentication.k8s.io", "SelfSubjectReview"): Sample(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview", "metadata": {}}
    ),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): Sample(
        {**crd(plural=NAME, kind="Sample"), "metadata": {"name": f"{NAME}.example.com"}}
    ),
    **{
        ("admissionregistration.k8s.io", kind): Sample(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": kind,
                "metadata": {"name": NAME},
                "webhooks": [
                    {
                        "name": "sample.example.com",
                        "clientConfig": {"url": "https://127.0.0.1:1/sample"},
                        "sideEffects": "None",
                        "admissionReviewVersions": ["v1"],
                    }
                ],
            }
        )
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
    },
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"): Sample(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": NAME},
            "spec": {
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "operations": ["CREATE"],
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "resources": ["configmaps"],
                        }
                    ]
                },
                "validations": [{"expression": "true"}],
            },
        }
    ),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"): Sample(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": NAME},
            "spec": {"policyName": NAME, "validationActions": ["Deny"]},
        }
    ),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"): Sample(
        {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "PriorityLevelConfiguration",
            "metadata": {"name": NAME},
            "spec": {
                "type": "Limited",
                "limited": {
                    "nominalConcurrencyShares": 10,
                    "limitResponse": {
                        "type": "Queue",
                        "queuing": {"queues": 16, "handSize": 4, "queueLengthLimit": 20},
                    },
                },
            },
        }
    ),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"): Sample(
        {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "FlowSchema",
            "metadata": {"name": NAME},
            "spec": {
                "priorityLevelConfiguration": {"name": "workload-low"},
                "matchingPrecedence": 5000,
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [
                    {
                        "subjects": [{"kind": "User", "user": {"name": "alice"}}],
                        "resourceRules": [
                            {
                                "verbs": ["get"],
                                "apiGroups": [""],
                                "resources": ["pods"],
                                "namespaces": ["*"],
                            }
                        ],
                    }
                ],
            },
        }
    ),
}

# Subresources that answer with no typed object (they stream or proxy to a kubelet or a pod).
UNTYPED_SUBRESOURCES = {"log", "exec", "portforward", "proxy"}
"""Streams (logs, exec and port-forward sessions) and proxied HTTP answers (``proxy``, the
target's own bytes): no model of the client describes them."""


# -- helpers -----------------------------------------------------------------------------------


def model_name(group: str, version: str, kind: str) -> str:
    """The client's model for a kind: ``CoreV1Event`` where the name is shared, else ``V1Pod``."""
    prefix = "Core" if not group else group.split(".")[0].capitalize()
    for name in (f"{prefix}{version.capitalize()}{kind}", f"{version.capitalize()}{kind}"):
        if hasattr(k8s, name):
            return name
    raise AssertionError(f"the official client has no model for {group or 'core'}/{kind}")


def read(body: Any, type_name: str) -> Any:
    """What the official client makes of a response body (it raises on a missing field)."""
    assert isinstance(body, dict), body
    try:
        return CLIENT.deserialize(json.dumps(body), type_name, "application/json")
    except Exception as exc:  # the message names the model and field; keep the body for context
        raise AssertionError(
            f"the official client cannot read this {type_name}: {exc}\n{json.dumps(body)}"
        ) from exc


def api_prefix(group: str, version: str) -> str:
    return f"/api/{version}" if not group else f"/apis/{group}/{version}"


def collection_of(rt: ResourceType) -> str:
    base = api_prefix(rt.group, rt.version)
    return f"{base}/namespaces/{NS}/{rt.plural}" if rt.namespaced else f"{base}/{rt.plural}"


async def first_event(resp: Any) -> Obj:
    events = await asyncio.wait_for(EventReader(resp).take(1), timeout=10)
    return events[0]


async def patch(api: Api, path: str, doc: Any, *, kind: str = "merge") -> Obj:
    status, out = await api.patch(path, doc, kind=kind)
    assert 200 <= status < 300, (status, json.dumps(out))
    assert isinstance(out, dict)
    return out


def check_event(event: Obj, model: str) -> None:
    read(event, "V1WatchEvent")
    assert event["type"] in ("ADDED", "MODIFIED", "DELETED"), event
    read(event["object"], model)


def sample_of(rt: ResourceType) -> Sample:
    sample = SAMPLES.get((rt.group, rt.kind))
    if sample is None:
        pytest.fail(
            f"the registry serves {rt.group or 'core'}/{rt.kind}, but this test has no sample "
            "object for it: add one to SAMPLES so its responses are checked against the "
            "official client"
        )
    return sample


def test_every_sample_is_a_served_kind() -> None:
    served = {(rt.group, rt.kind) for rt in REGISTRY}
    assert set(SAMPLES) <= served, f"samples for kinds not served: {set(SAMPLES) - served}"


# -- every kind, every verb --------------------------------------------------------------------


@pytest.mark.parametrize("rt", list(REGISTRY), ids=lambda rt: f"{rt.group or 'core'}.{rt.kind}")
async def test_every_answer_reads_as_the_official_model(api: Api, rt: ResourceType) -> None:
    sample = sample_of(rt)
    model = model_name(rt.group, rt.version, rt.kind)
    collection = collection_of(rt)
    body = copy.deepcopy(sample.body)
    for path, setup_body in sample.setup:
        await api.ok("POST", path, setup_body)

    created = await api.ok("POST", collection, body)
    read(created, sample.create_answers or model)
    if "get" not in rt.verbs:
        return  # a create-only kind (Binding, the reviews) has nothing else to read

    name = body["metadata"]["name"]
    item = f"{collection}/{name}"
    read(await api.ok("GET", item), model)
    listed = await api.ok("GET", collection)
    read(listed, f"{model}List")
    assert name in [i["metadata"]["name"] for i in listed["items"]]

    # Tables (kubectl) carry the objects themselves with includeObject=Object
    for path in (f"{collection}?includeObject=Object", f"{item}?includeObject=Object"):
        table = await api.ok("GET", path, headers={"Accept": TABLE})
        assert table["kind"] == "Table", table
        for row in table["rows"]:
            read(row["object"], model)

    # watch: the initial ADDED of the current state, then a patch's MODIFIED
    selector = f"metadata.name={name}"
    async with api.watch(collection, fieldSelector=selector) as resp:
        check_event(await first_event(resp), model)
    rv = (await api.ok("GET", item))["metadata"]["resourceVersion"]
    async with api.watch(collection, fieldSelector=selector, resourceVersion=rv) as resp:
        patched = await patch(api, item, {"metadata": {"annotations": {"round-trip": "yes"}}})
        read(patched, model)
        check_event(await first_event(resp), model)

    for kind in ("json", "strategic"):
        doc: Any = (
            [{"op": "add", "path": "/metadata/labels", "value": {"patched": kind}}]
            if kind == "json"
            else {"metadata": {"labels": {"patched": kind}}}
        )
        read(await patch(api, item, doc, kind=kind), model)

    # A controller in the apiserver may write the object between the GET and the PUT (the
    # FlowSchemas' Dangling condition): retry on conflict, as client-go's RetryOnConflict does.
    for _attempt in range(5):
        current = await api.ok("GET", item)
        status, replaced = await api.put(item, current)
        if status != 409:
            break
    assert 200 <= status < 300, (status, replaced)
    read(replaced, model)

    for sub in rt.subresources:
        await check_subresource(api, rt, sub.name, item, model)

    # delete: the object (pods, namespaces) or a Status, and the watch event it causes
    rv = (await api.ok("GET", item))["metadata"]["resourceVersion"]
    async with api.watch(collection, fieldSelector=selector, resourceVersion=rv) as resp:
        deleted = await api.ok("DELETE", item)
        read(deleted, "V1Status" if deleted.get("kind") == "Status" else model)
        check_event(await first_event(resp), model)


async def check_subresource(api: Api, rt: ResourceType, sub: str, item: str, model: str) -> None:
    path = f"{item}/{sub}"
    if sub == "status":
        read(await api.ok("GET", path), model)
        current = await api.ok("GET", path)
        read(await api.ok("PUT", path, current), model)
        # a status written without the fields Kubernetes always serialises still reads right
        emptied = dict(copy.deepcopy(current), status={})
        read(await api.ok("PUT", path, emptied), model)
        read(await api.ok("GET", item), model)
        read(await patch(api, path, {"status": {}}), model)
    elif sub == "scale":
        scale = await api.ok("GET", path)
        read(scale, "V1Scale")
        read(await patch(api, path, {"spec": {"replicas": 3}}), "V1Scale")
        scale = await api.ok("GET", path)
        read(await api.ok("PUT", path, scale), "V1Scale")
        read(await api.ok("GET", item), model)
    elif sub == "binding":
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": NAME}}
        binding["target"] = {"apiVersion": "v1", "kind": "Node", "name": "node1"}
        read(await api.ok("POST", path, binding), "V1Status")
        read(await api.ok("GET", item), model)
    elif sub == "eviction":
        # evict a second object so the sample itself lives on for the rest of the test
        sample = copy.deepcopy(sample_of(rt).body)
        sample["metadata"]["name"] = "evictee"
        await api.ok("POST", collection_of(rt), sample)
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "evictee"}}
        read(await api.ok("POST", f"{collection_of(rt)}/evictee/eviction", eviction), "V1Status")
    elif sub == "finalize":
        current = await api.ok("GET", item)
        read(await api.ok("PUT", path, current), model)
    elif sub == "token":
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"audiences": ["round-trip"], "expirationSeconds": 3600},
        }
        answer = read(await api.ok("POST", path, request), "AuthenticationV1TokenRequest")
        assert answer.spec.audiences == ["round-trip"] and answer.status.token, answer
    elif sub not in UNTYPED_SUBRESOURCES:
        pytest.fail(
            f"{rt.kind} serves the subresource {sub!r}, which this test does not check yet: "
            "teach check_subresource how to exercise it"
        )


# -- objects stored before the server wrote every field ----------------------------------------

LEGACY: list[tuple[tuple[str, str], Obj, dict[str, Any]]] = [
    (
        ("", "ReplicationController"),
        {
            "apiVersion": "v1",
            "kind": "ReplicationController",
            "metadata": {"name": "old", "namespace": NS, "uid": "u1", "generation": 1},
            "spec": {"replicas": 1, "selector": {"app": "web"}, "template": TEMPLATE},
            "status": {},
        },
        {"status.replicas": 0},
    ),
    (
        ("apps", "ReplicaSet"),
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "old", "namespace": NS, "uid": "u2", "generation": 1},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "template": TEMPLATE,
            },
        },
        {"status.replicas": 0},
    ),
    (
        ("", "Node"),
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "old", "uid": "u3"},
            "status": {"nodeInfo": {"kubeletVersion": "v1.32.0"}},
        },
        {
            "status.nodeInfo.kubeletVersion": "v1.32.0",
            "status.nodeInfo.bootID": "",
            "status.daemonEndpoints.kubeletEndpoint.Port": 0,
        },
    ),
    (
        ("", "Event"),
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "old", "namespace": NS, "uid": "u4"},
            "reason": "Old",
        },
        {"involvedObject": {}, "reportingComponent": "", "reportingInstance": ""},
    ),
    (
        ("", "Pod"),
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "old", "namespace": NS, "uid": "u5"},
            "spec": {"containers": [{"name": "main", "image": "nginx"}]},
            "status": {
                "phase": "Running",
                "containerStatuses": [
                    {"name": "main", "state": {"terminated": {"reason": "Error"}}}
                ],
            },
        },
        {
            "status.containerStatuses.0.imageID": "",
            "status.containerStatuses.0.restartCount": 0,
            "status.containerStatuses.0.state.terminated.exitCode": 0,
        },
    ),
]


LEGACY.append(
    (
        ("storage.k8s.io", "StorageClass"),
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "old", "uid": "u6"},
            "provisioner": "example.com/old",
        },
        # stored before defaulting: a patch of its labels is not an update of reclaimPolicy
        {"provisioner": "example.com/old"},
    )
)


def dig(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = obj[int(part)] if isinstance(obj, list) else obj[part]
    return obj


@pytest.mark.parametrize("kind,stored,expected", LEGACY, ids=[k for (_, k), _, _ in LEGACY])
async def test_objects_stored_without_those_fields_read_right(
    api: Api, kind: tuple[str, str], stored: Obj, expected: dict[str, Any]
) -> None:
    rt = REGISTRY.require(*kind)
    model = model_name(rt.group, rt.version, rt.kind)
    collection = collection_of(rt)
    item = f"{collection}/old"
    selector = "metadata.name=old"
    stored = copy.deepcopy(stored)
    if "spec" in stored:  # the spec as the server defaulted it then (a patch may not change it)
        body = {k: v for k, v in stored.items() if k != "status"}
        body["metadata"] = {"name": "old"}
        stored["spec"] = (await api.ok("POST", f"{collection}?dryRun=All", body))["spec"]
    async with api.watch(collection, fieldSelector=selector) as resp:
        await api.store.create(rt.key(NS if rt.namespaced else None, "old"), encode(stored))
        check_event(await first_event(resp), model)
    got = await api.ok("GET", item)
    read(got, model)
    assert {path: dig(got, path) for path in expected} == expected
    read(await api.ok("GET", collection), f"{model}List")
    cached = await api.ok("GET", f"{collection}?resourceVersion=0")
    read(cached, f"{model}List")
    read(await api.ok("GET", f"{item}?resourceVersion=0"), model)
    async with api.watch(collection, fieldSelector=selector, resourceVersion="0") as resp:
        check_event(await first_event(resp), model)
    read(await patch(api, item, {"metadata": {"labels": {"touched": "yes"}}}), model)


# -- what the kubelet writes -------------------------------------------------------------------


def test_kubelet_container_statuses_read_as_official_models() -> None:
    def record(**kw: Any) -> ContainerRecord:
        base: Obj = {
            "container_id": "sim://abc",
            "pod_uid": "u",
            "name": "main",
            "attempt": 0,
            "image": "nginx",
            "image_id": "nginx@sha256:00",
            "started_at": 1_700_000_000.0,
        }
        return ContainerRecord(**{**base, **kw})

    exited = record(finished_at=1_700_000_100.0, exit_code=1, reason="Error")
    views = [
        ContainerView(name="main", image="nginx"),
        ContainerView(name="main", image="nginx", waiting=("ErrImagePull", "no such image")),
        ContainerView(name="main", image="nginx", current=record(), ready=True, started=True),
        ContainerView(name="main", image="nginx", current=record(attempt=1), previous=exited),
        ContainerView(name="main", image="nginx", current=exited),
        ContainerView(name="main", image="nginx", current=exited, waiting=("CrashLoopBackOff", "")),
    ]
    for view in views:
        status = container_status(view)
        assert status["imageID"] == (view.current.image_id if view.current else "")
        read(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "main"}]},
                "status": {"containerStatuses": [status]},
            },
            "V1Pod",
        )
