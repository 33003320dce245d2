"""The one place tests build Kubernetes objects: pods, containers, nodes, RCs, deployments, ...

Why: every suite needs the same handful of objects, and copies of a builder drift apart (a
default image here, a missing namespace there). Each builder returns the JSON shape a person
would write (plain dicts, camelCase keys, no defaults filled in by the server); ``yaml_of``
renders one for ``kubectl apply -f -``. Extra ``**spec`` keywords are merged into ``spec``
as written (``restartPolicy="Never"``, ``nodeSelector={...}``), so a builder never needs a
parameter per field.

The scheduler's unit tests also get ``pod_info``/``node_info``: the same objects wrapped in
the scheduler's cache types. Nothing here talks to a server.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from component import pki
from services.scheduler.nodeinfo import NodeInfo, PodInfo

__all__ = [
    "ECHO_PORT",
    "HTTP_ECHO_PORT",
    "Obj",
    "client_cert",
    "container",
    "controlled_by",
    "deployment",
    "echo_server",
    "endpoint_slice",
    "event",
    "http_echo_server",
    "job",
    "namespace",
    "nginx_rc",
    "node",
    "node_info",
    "persistent_volume",
    "persistent_volume_claim",
    "pod",
    "pod_info",
    "pod_template",
    "policy_rule",
    "rc",
    "replica_set",
    "role",
    "role_binding",
    "sched_pod",
    "sh",
    "sim_exit",
    "sleeper",
    "slice_endpoint",
    "storage_class",
    "yaml_of",
]

Obj = dict[str, Any]


def yaml_of(obj: Obj) -> str:
    """``obj`` as a YAML manifest (keys in the order written)."""
    return yaml.safe_dump(obj, sort_keys=False)


def container(
    name: str = "main",
    image: str = "nginx",
    *,
    cpu: str | None = None,
    memory: str | None = None,
    **fields: Any,
) -> Obj:
    """A container; ``cpu``/``memory`` become resource requests, ``fields`` are added as is."""
    out: Obj = {"name": name, "image": image, **fields}
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    if requests:
        out["resources"] = {"requests": requests}
    return out


ECHO_PORT = 9000
_ECHO_SERVER = f"""
import os, socket, threading
server = socket.create_server((os.environ["POD_IP"], {ECHO_PORT}))
def echo(conn):
    while data := conn.recv(65536):
        conn.sendall(data)
    conn.close()
while True:
    conn, _ = server.accept()
    threading.Thread(target=echo, args=(conn,), daemon=True).start()
"""


def echo_server(**fields: Any) -> Obj:
    """A ``python`` container named ``echo`` that echoes every TCP connection on its pod's IP,
    port ``ECHO_PORT``; ``fields`` (a readiness probe) are added as is."""
    return container("echo", "python", command=["python3", "-c", _ECHO_SERVER], **fields)


HTTP_ECHO_PORT = 8080
_HTTP_ECHO_SERVER = f"""
import json, os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class Echo(BaseHTTPRequestHandler):
    def answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.dumps({{
            "method": self.command, "path": self.path, "headers": dict(self.headers),
            "body": self.rfile.read(length).decode(),
        }}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = answer
ThreadingHTTPServer((os.environ["POD_IP"], {HTTP_ECHO_PORT}), Echo).serve_forever()
"""


def http_echo_server(**fields: Any) -> Obj:
    """A ``python`` container named ``http-echo`` answering every HTTP request on its pod's IP,
    port ``HTTP_ECHO_PORT`` (named ``http``), with JSON saying its method, path (and query),
    headers and body; ``fields`` (a readiness probe) are added as is."""
    return container(
        "http-echo", "python", command=["python3", "-c", _HTTP_ECHO_SERVER],
        ports=[{"name": "http", "containerPort": HTTP_ECHO_PORT}], **fields,
    )  # fmt: skip


def sh(script: str, *, name: str = "main", image: str = "busybox") -> Obj:
    """A container running ``sh -c script``."""
    return container(name, image, command=["sh", "-c", script])


def pod(
    name: str,
    *containers: Obj,
    namespace: str | None = None,
    labels: dict[str, str] | None = None,
    uid: str | None = None,
    owner_uid: str | None = None,
    **spec: Any,
) -> Obj:
    """A pod of ``containers`` (default: one nginx container named ``main``).

    Without ``namespace`` the request path says where it goes; ``owner_uid`` adds a
    controlling ReplicaSet owner reference."""
    meta: Obj = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if uid is not None:
        meta["uid"] = uid
    if labels:
        meta["labels"] = dict(labels)
    if owner_uid is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": owner_uid,
             "controller": True}
        ]  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": list(containers) or [container()], **spec},
    }


def node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    taints: list[Obj] | None = None,
    unschedulable: bool = False,
    ready: bool | None = True,
) -> Obj:
    """A node labelled with its hostname; ``ready=None`` leaves out the status (as ``kubectl
    apply`` of a hand-written node does: no kubelet has reported, so it shows Unknown)."""
    spec: Obj = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    meta: Obj = {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}
    if annotations:
        meta["annotations"] = dict(annotations)
    out: Obj = {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec}
    if ready is not None:
        resources = {"cpu": cpu, "memory": memory, "pods": pods}
        out["status"] = {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        }
    return out


def pod_template(labels: dict[str, str], *containers: Obj, **spec: Any) -> Obj:
    """A pod template (metadata with ``labels`` and a spec) for a controller."""
    return {
        "metadata": {"labels": dict(labels)},
        "spec": {"containers": list(containers) or [container("app")], **spec},
    }


def rc(
    name: str,
    *,
    replicas: int,
    image: str = "nginx",
    container_name: str = "app",
    template: Obj | None = None,
    labels: dict[str, str] | None = None,
    namespace: str | None = None,
    **spec: Any,
) -> Obj:
    """A ReplicationController of one-container pods labelled ``labels`` (default
    ``app=<name>``), or of ``template``."""
    labels = labels or {"app": name}
    meta: Obj = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": meta,
        "spec": {
            "replicas": replicas,
            "selector": dict(labels),
            "template": template or pod_template(labels, container(container_name, image)),
            **spec,
        },
    }


def nginx_rc(name: str, *, replicas: int, image: str = "nginx:1.27") -> Obj:
    """An RC of nginx pods labelled ``app=<name>``, serving HTTP on port 80 of their pod IP
    (what the e2e tests run on real processes; a 5 s grace period keeps deletions short)."""
    web = container("nginx", image, ports=[{"containerPort": 80}])
    template = pod_template({"app": name}, web, terminationGracePeriodSeconds=5)
    return rc(name, replicas=replicas, namespace="default", template=template)


def sleeper(
    name: str,
    *,
    image: str = "busybox",
    labels: dict[str, str] | None = None,
    namespace: str | None = None,
    **spec: Any,
) -> Obj:
    """A pod sleeping for an hour (labels default ``role=sleeper``; 5 s grace period);
    ``spec`` adds fields (``nodeName=...``, ``nodeSelector=...``)."""
    spec.setdefault("terminationGracePeriodSeconds", 5)
    main = container("main", image, command=["sleep", "3600"])
    return pod(name, main, namespace=namespace, labels=labels or {"role": "sleeper"}, **spec)


def deployment(
    name: str,
    *,
    replicas: int,
    image: str = "nginx",
    container_name: str = "app",
    labels: dict[str, str] | None = None,
    strategy: Obj | None = None,
    **spec: Any,
) -> Obj:
    """A Deployment of one-container pods labelled ``labels`` (default ``app=<name>``)."""
    labels = labels or {"app": name}
    body: Obj = {
        "replicas": replicas,
        "selector": {"matchLabels": dict(labels)},
        "template": pod_template(labels, container(container_name, image)),
    }
    if strategy is not None:
        body["strategy"] = strategy
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {**body, **spec},
    }


def replica_set(
    name: str, *, replicas: int, labels: dict[str, str], owner: Obj | None = None
) -> Obj:
    """A ReplicaSet of one-container pods labelled ``labels``; ``owner`` (a Deployment as the
    server returned it) becomes its controller reference."""
    out: Obj = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(labels)},
            "template": pod_template(labels, container("app")),
        },
    }
    return controlled_by(out, owner) if owner is not None else out


def controlled_by(obj: Obj, owner: Obj) -> Obj:
    """``obj`` with a controller reference to ``owner`` (as the server returned it: uid set)."""
    ref = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    obj["metadata"]["ownerReferences"] = [ref]
    return obj


def namespace(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def event(name: str, *, pod: str, namespace: str = "default") -> Obj:
    """A kubelet's "Started" Event about container ``main`` of ``pod``."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": pod,
                           "namespace": namespace, "fieldPath": "spec.containers{main}"},
        "reason": "Started",
        "message": "Started container main",
        "type": "Normal",
        "count": 1,
        "source": {"component": "kubelet", "host": "node1"},
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:00Z",
    }  # fmt: skip


def persistent_volume_claim(
    name: str,
    *,
    storage: str = "1Gi",
    storage_class: str | None = None,
    access_modes: tuple[str, ...] = ("ReadWriteOnce",),
    namespace: str = "default",
    **spec: Any,
) -> Obj:
    """A claim for ``storage``; without ``storage_class`` the server gives it the default."""
    body: Obj = {"accessModes": list(access_modes), "resources": {"requests": {"storage": storage}}}
    if storage_class is not None:
        body["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {**body, **spec},
    }


def persistent_volume(
    name: str,
    *,
    storage: str = "1Gi",
    storage_class: str = "",
    access_modes: tuple[str, ...] = ("ReadWriteOnce",),
    path: str = "/var/local/kubelite-test",
    node_affinity: dict[str, list[str]] | None = None,
    **spec: Any,
) -> Obj:
    """A hostPath volume of ``storage``; ``node_affinity`` ``{label: [values]}`` becomes its
    required node affinity (one term, ``In`` per label)."""
    body: Obj = {
        "capacity": {"storage": storage},
        "accessModes": list(access_modes),
        "hostPath": {"path": path},
    }
    if storage_class:
        body["storageClassName"] = storage_class
    if node_affinity:
        expressions = [
            {"key": k, "operator": "In", "values": list(v)} for k, v in node_affinity.items()
        ]
        body["nodeAffinity"] = {
            "required": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}
        }
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {**body, **spec},
    }


def storage_class(
    name: str, *, provisioner: str, binding_mode: str = "Immediate", **fields: Any
) -> Obj:
    """A StorageClass (``volumeBindingMode`` ``binding_mode``); other keywords are its fields."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": binding_mode,
        **fields,
    }


def daemon_set(name: str, *, image: str = "nginx", **spec: Any) -> Obj:
    """A DaemonSet of one-container pods labelled ``app=<name>``."""
    labels = {"app": name}
    body: Obj = {
        "selector": {"matchLabels": dict(labels)},
        "template": pod_template(labels, container("app", image)),
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name},
        "spec": {**body, **spec},
    }


def stateful_set(
    name: str, *, replicas: int = 1, image: str = "nginx", claim: str | None = None, **spec: Any
) -> Obj:
    """A StatefulSet of ``replicas`` pods labelled ``app=<name>``, governed by a Service of its
    name; ``claim`` adds a 1Gi ``volumeClaimTemplates`` entry of that name."""
    labels = {"app": name}
    body: Obj = {
        "replicas": replicas,
        "serviceName": name,
        "selector": {"matchLabels": dict(labels)},
        "template": pod_template(labels, container("app", image)),
    }
    if claim is not None:
        template = persistent_volume_claim(claim)
        body["volumeClaimTemplates"] = [{"metadata": {"name": claim}, "spec": template["spec"]}]
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {**body, **spec},
    }


def pod_disruption_budget(name: str, *, selector: dict[str, str], **spec: Any) -> Obj:
    """A budget over the pods labelled ``selector``; ``spec`` holds ``minAvailable`` or
    ``maxUnavailable`` (Kubernetes' spellings)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": dict(selector)}, **spec},
    }


def sim_exit(code: int, *, name: str = "main", image: str = "busybox", after: float = 0) -> Obj:
    """A container the ``sim`` runtime ends by itself with exit ``code`` after ``after`` s."""
    env = [{"name": "KUBELITE_SIM_EXIT_CODE", "value": str(code)}]
    if after:
        env.append({"name": "KUBELITE_SIM_RUN_SECONDS", "value": str(after)})
    return container(name, image, env=env)


def job(name: str, *containers: Obj, **spec: Any) -> Obj:
    """A batch/v1 Job running ``containers`` once (``restartPolicy: Never``); ``spec`` keys
    (``completions``, ``parallelism``, ``backoffLimit``, ...) as Kubernetes spells them."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": list(containers or [sim_exit(0)])}
            },
            **spec,
        },
    }


def cron_job(name: str, *, schedule: str, labels: dict[str, str] | None = None, **spec: Any) -> Obj:
    """A batch/v1 CronJob on ``schedule`` whose Jobs run one ``sim_exit(0)`` container and
    carry ``labels``; ``spec`` keys (``concurrencyPolicy``, ``timeZone``, ...) as Kubernetes
    spells them."""
    template = job("unused", sim_exit(0))
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {
            "schedule": schedule,
            "jobTemplate": {"metadata": {"labels": dict(labels or {})}, "spec": template["spec"]},
            **spec,
        },
    }


def pod_info(name: str = "p", **kw: Any) -> PodInfo:
    """A scheduler ``PodInfo`` of ``sched_pod(name, **kw)``."""
    return PodInfo(sched_pod(name, **kw))


def node_info(name: str = "node1", *, placed: tuple[PodInfo, ...] = (), **kw: Any) -> NodeInfo:
    """A scheduler ``NodeInfo`` of ``node(name, **kw)`` with ``placed`` pods on it."""
    info = NodeInfo(name)
    info.set_node(node(name, **kw))
    for p in placed:
        info.add_pod(p)
    return info


def sched_pod(
    name: str = "p",
    *,
    cpu: str | None = None,
    memory: str | None = None,
    init_cpu: str | None = None,
    node_name: str | None = None,
    node_selector: dict[str, str] | None = None,
    affinity: Obj | None = None,
    tolerations: list[Obj] | None = None,
    priority: int | None = None,
    **kw: Any,
) -> Obj:
    """The scheduler tests' pod: uid ``uid-<name>``, one nginx container ``c`` requesting
    ``cpu``/``memory``, an init container requesting ``init_cpu``; other keywords as ``pod``."""
    fields = {"nodeName": node_name, "nodeSelector": node_selector, "affinity": affinity,
              "tolerations": tolerations}  # fmt: skip
    spec: Obj = {k: v for k, v in fields.items() if v}
    if priority is not None:
        spec["priority"] = priority
    if init_cpu is not None:
        spec["initContainers"] = [container("init", "busybox", cpu=init_cpu)]
    kw.setdefault("namespace", "default")
    main = container("c", "nginx", cpu=cpu, memory=memory)
    return pod(name, main, uid=f"uid-{name}", **kw, **spec)


def service(
    name: str,
    *,
    selector: dict[str, str] | None = None,
    ports: list[Obj] | None = None,
    **spec: Any,
) -> Obj:
    """A Service selecting ``selector`` (none: endpoints written by hand), port 80 by default."""
    body: Obj = {"ports": ports if ports is not None else [{"port": 80}], **spec}
    if selector is not None:
        body["selector"] = dict(selector)
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": body}


def endpoints(name: str, *ips: str, port: int = 80, not_ready: tuple[str, ...] = ()) -> Obj:
    """A hand-written Endpoints object: ``ips`` ready, ``not_ready`` not, on one port."""
    subset: Obj = {"ports": [{"port": port}]}
    if ips:
        subset["addresses"] = [{"ip": ip} for ip in ips]
    if not_ready:
        subset["notReadyAddresses"] = [{"ip": ip} for ip in not_ready]
    return {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": name},
        "subsets": [subset],
    }


def slice_endpoint(
    ip: str,
    *,
    node: str | None = None,
    ready: bool | None = True,
    serving: bool | None = None,
    terminating: bool | None = None,
) -> Obj:
    """One ``endpoints[]`` item of an EndpointSlice; a condition left None is left out."""
    conditions = {
        name: value
        for name, value in (("ready", ready), ("serving", serving), ("terminating", terminating))
        if value is not None
    }
    item: Obj = {"addresses": [ip], "conditions": conditions}
    if node is not None:
        item["nodeName"] = node
    return item


def endpoint_slice(
    service: str,
    *endpoints: Obj,
    ports: list[Obj] | None = None,
    name: str | None = None,
    namespace: str = "default",
    address_type: str = "IPv4",
) -> Obj:
    """A discovery.k8s.io/v1 EndpointSlice of ``service`` (port 80/TCP unnamed by default)."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name or f"{service}-abcde",
            "namespace": namespace,
            "labels": {"kubernetes.io/service-name": service},
        },
        "addressType": address_type,
        "endpoints": list(endpoints),
        "ports": ports if ports is not None else [{"name": "", "port": 80, "protocol": "TCP"}],
    }


def policy_rule(verbs: list[str], resources: list[str], *, groups: tuple[str, ...] = ("",)) -> Obj:
    return {"verbs": verbs, "apiGroups": list(groups), "resources": resources}


def role(name: str, *rules: Obj, namespace: str = "default", cluster: bool = False) -> Obj:
    meta: Obj = {"name": name} if cluster else {"name": name, "namespace": namespace}
    kind = "ClusterRole" if cluster else "Role"
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": meta,
        "rules": list(rules),
    }


def role_binding(
    name: str,
    *,
    role: str,
    user: str,
    namespace: str = "default",
    role_kind: str = "Role",
    cluster: bool = False,
) -> Obj:
    meta: Obj = {"name": name} if cluster else {"name": name, "namespace": namespace}
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding" if cluster else "RoleBinding",
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}],
    }


def client_cert(
    ca: pki.CertificateAuthority,
    directory: Path,
    *,
    user: str,
    groups: tuple[str, ...] = (),
    valid_days: tuple[int, int] = (-1, 1),
    usage: x509.ObjectIdentifier | None = ExtendedKeyUsageOID.CLIENT_AUTH,
) -> pki.KeyPair:
    """A client certificate signed by ``ca`` as a test needs it, unlike ``pki``'s: valid from
    ``valid_days[0]`` to ``valid_days[1]`` days from now (both negative: expired), with the
    extended key ``usage`` (``None``: no such extension), in ``directory/<user>.crt/.key``."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    subject = [x509.NameAttribute(NameOID.COMMON_NAME, user)]
    subject += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(subject))
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now + datetime.timedelta(days=valid_days[0]))
        .not_valid_after(now + datetime.timedelta(days=valid_days[1]))
    )
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    files = pki.KeyPair(directory / f"{user}.crt", directory / f"{user}.key")
    files.cert.write_bytes(
        builder.sign(ca.key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
    )
    pki.write_private(
        files.key,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    return files


WIDGET_SCHEMA: Obj = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "string", "enum": ["small", "large"]},
                "replicas": {"type": "integer", "minimum": 0, "default": 1},
                "color": {"type": "string", "pattern": "^[a-z]+$", "default": "blue"},
                "selector": {"type": "string"},
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string"},
                            "port": {"type": "integer", "format": "int32"},
                        },
                    },
                },
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
        "status": {
            "type": "object",
            "properties": {
                "ready": {"type": "boolean"},
                "replicas": {"type": "integer"},
            },
        },
    },
}
"""A custom kind's schema with required, enum, pattern, defaults, a list-map and open fields."""


def crd(
    plural: str = "widgets",
    *,
    group: str = "example.com",
    kind: str = "Widget",
    scope: str = "Namespaced",
    versions: tuple[str, ...] = ("v1", "v1beta1"),
    storage: str = "v1",
    short_names: tuple[str, ...] = ("wd",),
    schema: Obj | None = None,
) -> Obj:
    """A CustomResourceDefinition: every version served with the same schema, a status and a
    scale subresource, and printer columns (``v1beta1`` deprecated when listed)."""
    columns = [
        {"name": "Size", "type": "string", "jsonPath": ".spec.size"},
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "Ready", "type": "boolean", "jsonPath": ".status.ready", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {
                "plural": plural,
                "singular": kind.lower(),
                "kind": kind,
                "shortNames": list(short_names),
                "categories": ["all"],
            },
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": version == storage,
                    **({"deprecated": True} if version == "v1beta1" else {}),
                    "schema": {"openAPIV3Schema": schema or WIDGET_SCHEMA},
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.replicas",
                            "statusReplicasPath": ".status.replicas",
                            "labelSelectorPath": ".spec.selector",
                        },
                    },
                    "additionalPrinterColumns": columns,
                }
                for version in versions
            ],
        },
    }


def widget(name: str, *, version: str = "v1", group: str = "example.com", **spec: Any) -> Obj:
    return {
        "apiVersion": f"{group}/{version}",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": "small", **spec},
    }


def priority_class(name: str, value: int = 1000, **fields: Any) -> Obj:
    """A scheduling.k8s.io/v1 PriorityClass (a built-in kind served from its schema)."""
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **fields,
    }


def cpu_utilization(percent: int) -> Obj:
    """An HPA metric: the pods' average CPU use at ``percent`` of their requests."""
    return {
        "type": "Resource",
        "resource": {
            "name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": percent},
        },
    }


def horizontal_pod_autoscaler(
    name: str, *, target: str, metrics: list[Obj] | None = None, max_replicas: int = 5, **spec: Any
) -> Obj:
    """An autoscaling/v2 HorizontalPodAutoscaler of the Deployment ``target``."""
    body: Obj = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
        "maxReplicas": max_replicas,
        **spec,
    }
    if metrics is not None:
        body["metrics"] = metrics
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": body,
    }
