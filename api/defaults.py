"""Kubernetes' defaults for the kinds kubelite serves, applied to the request body (a dict).

Why: what a client reads back must look like what a real cluster returns — a pod created with
just a name and an image comes back with ``restartPolicy: Always``, ``dnsPolicy: ClusterFirst``,
``imagePullPolicy``, the two ``NoExecute`` tolerations, ``status.phase: Pending`` ... — and the
components rely on those fields being set. The apiserver calls ``apply_defaults(kind, obj)``
before validating a create (and an update), so the stored object is the user's dict plus
defaults; unknown fields are never touched.

What it covers: the versioned defaulting functions (``pkg/apis/core/v1/defaults.go``,
``pkg/apis/apps/v1/defaults.go``) for Pod (and every pod template), ReplicationController,
ReplicaSet, Deployment, Namespace, Node, Secret (``type: Opaque``, and ``stringData`` merged
into ``data`` and dropped, as the v1 conversion does), PersistentVolume
(``persistentVolumeReclaimPolicy: Retain``, ``volumeMode: Filesystem``, ``phase: Pending``),
PersistentVolumeClaim (``volumeMode``, ``phase: Pending``), StorageClass
(``reclaimPolicy: Delete``, ``volumeBindingMode: Immediate``), DaemonSet and StatefulSet
(``pkg/apis/apps/v1/defaults.go``), Endpoints and EndpointSlice ports (``protocol: TCP``; a
slice port's ``name: ""``), RoleBinding and ClusterRoleBinding (the rbac group on ``roleRef`` and
on User and Group subjects), Job and CronJob (``pkg/apis/batch/v1/defaults.go``; a new
Job also gets the selector and template labels the job strategy generates, which needs the uid
the apiserver has set by then: ``api.batch.generate_job_selector``), plus what admission adds to new
pods in a stock cluster: ``DefaultTolerationSeconds`` (the not-ready/unreachable tolerations, 300 s),
``Priority`` (``priority: 0``), and the pod's initial status (``phase: Pending``, ``qosClass``).
Quantities in resources, capacity and allocatable are rewritten in canonical form
(``cpu: 0.5`` -> ``500m``), as Kubernetes stores them.

Last, ``fill_serialised`` adds the fields Kubernetes always writes even at their zero value (Go
fields without ``omitempty``: an RC or ReplicaSet's ``status.replicas: 0``, a container
status's ``imageID``, an Event's ``reportingComponent``, a Node's ``nodeInfo`` ...), which the
official clients require. Which fields those are is the models' to say (``KubeModel
.fill_serialised``); the apiserver also applies it to every object it reads from the store, so
objects stored before a field was added read right as well.

Service (``SetDefaults_Service``: ``type: ClusterIP``, ``sessionAffinity: None``, each port's
``protocol: TCP`` and ``targetPort`` = ``port``, the traffic policies, LoadBalancer node ports on;
and, as the REST storage of a single-stack IPv4 cluster, ``ipFamilies: [IPv4]`` with
``ipFamilyPolicy: SingleStack``) is here too; its ClusterIP and node ports are allocated by the
apiserver, not defaulted.

Limits: no service accounts, no volumes defaulting, no LimitRanges. Values of the wrong type
are left alone for ``api.validation`` to report. Defaulting is idempotent.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from api.admissionregistration import (
    default_policy,
    default_policy_binding,
    default_webhook_configuration,
)
from api.autoscaling import default_horizontal_pod_autoscaler
from api.batch import generate_job_selector
from api.flowcontrol import default_flow_schema, default_priority_level
from api.meta import KubeModel
from api.quantity import canonical_quantity, parse_quantity
from api.registry import REGISTRY

__all__ = [
    "DEFAULT_TOLERATION_SECONDS",
    "apply_defaults",
    "fill_serialised",
    "image_pull_policy",
    "qos_class",
]

DEFAULT_TOLERATION_SECONDS = 300
"""How long a pod stays bound to a not-ready/unreachable node (DefaultTolerationSeconds)."""

TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"


def apply_defaults(kind: str, obj: dict[str, Any]) -> None:
    """Fill in Kubernetes' defaults for ``kind`` in place; unknown kinds are left unchanged."""
    fn = _BY_KIND.get(kind)
    if fn is not None and isinstance(obj, dict):
        fn(obj)
    fill_serialised(kind, obj)


def fill_serialised(kind: Any, obj: Any) -> None:
    """Add, in place, the fields Kubernetes always serialises for ``kind`` that ``obj`` lacks.

    ``ReplicaSet`` ``{"status": {}}`` becomes ``{"status": {"replicas": 0}, ...}``; present
    values are never changed. Kinds the registry does not serve are left alone. Cheap enough to
    run on every object read from the store (a few dict lookups along fixed paths).
    """
    model = _MODELS.get(kind)
    if model is not None:
        model.fill_serialised(obj)


def _dict(parent: dict[str, Any], key: str) -> dict[str, Any] | None:
    """``parent[key]``, created as ``{}`` when absent; None when present but not a dict."""
    value = parent.setdefault(key, {})
    return value if isinstance(value, dict) else None


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [x for x in value if isinstance(x, dict)] if isinstance(value, list) else []


def image_pull_policy(image: str) -> str:
    """``Always`` for ``:latest`` or an untagged image, else ``IfNotPresent`` (digests too)."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.rpartition(":")[2] if ":" in last else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _canonical_resources(resources: Any) -> None:
    if not isinstance(resources, dict):
        return
    for name, q in list(resources.items()):
        try:
            resources[name] = canonical_quantity(q)
        except (ValueError, TypeError):
            pass  # validation reports it


def _container(c: dict[str, Any]) -> None:
    image = c.get("image")
    if "imagePullPolicy" not in c and isinstance(image, str) and image:
        c["imagePullPolicy"] = image_pull_policy(image)
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    for port in _dicts(c.get("ports")):
        port.setdefault("protocol", "TCP")
    for env in _dicts(c.get("env")):
        value_from = env.get("valueFrom")
        field_ref = value_from.get("fieldRef") if isinstance(value_from, dict) else None
        if isinstance(field_ref, dict):
            field_ref.setdefault("apiVersion", "v1")
    resources = _dict(c, "resources")
    if resources is not None:
        _canonical_resources(resources.get("limits"))
        _canonical_resources(resources.get("requests"))


def _pod_spec(spec: dict[str, Any]) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    for c in _dicts(spec.get("initContainers")) + _dicts(spec.get("containers")):
        _container(c)
    if spec.get("hostNetwork") is True:
        # with host networking the container port is the host port
        for c in _dicts(spec.get("initContainers")) + _dicts(spec.get("containers")):
            for port in _dicts(c.get("ports")):
                port.setdefault("hostPort", port.get("containerPort"))
    _canonical_resources(spec.get("overhead"))


def _pod(obj: dict[str, Any]) -> None:
    spec = _dict(obj, "spec")
    if spec is None:
        return
    _pod_spec(spec)
    # SetDefaults_Pod: a limit without a request requests the limit
    for c in _dicts(spec.get("initContainers")) + _dicts(spec.get("containers")):
        resources = c.get("resources")
        if isinstance(resources, dict) and isinstance(resources.get("limits"), dict):
            requests = resources.setdefault("requests", {})
            if isinstance(requests, dict):
                for name, q in resources["limits"].items():
                    requests.setdefault(name, q)
            if not requests:
                del resources["requests"]
    # Priority admission: no priorityClassName means priority 0
    if "priorityClassName" not in spec:
        spec.setdefault("priority", 0)
    # DefaultTolerationSeconds admission
    tolerations = spec.get("tolerations")
    if tolerations is None:
        tolerations = spec["tolerations"] = []
    if isinstance(tolerations, list):
        for key in (TAINT_NOT_READY, TAINT_UNREACHABLE):
            if not any(
                isinstance(t, dict)
                and t.get("key") in (key, None, "")
                and t.get("effect") in ("NoExecute", None, "")
                for t in tolerations
            ):
                tolerations.append(
                    {
                        "key": key,
                        "operator": "Exists",
                        "effect": "NoExecute",
                        "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
                    }
                )
    status = _dict(obj, "status")
    if status is not None:
        status.setdefault("phase", "Pending")
        status.setdefault("qosClass", qos_class(spec))


def qos_class(spec: dict[str, Any]) -> str:
    """``Guaranteed``, ``Burstable`` or ``BestEffort`` from the containers' cpu/memory resources.

    Guaranteed: every container has cpu and memory limits, and requests equal to them.
    BestEffort: no container requests or limits cpu or memory. Burstable: anything else.
    """
    any_set, guaranteed = False, True
    for c in _dicts(spec.get("initContainers")) + _dicts(spec.get("containers")):
        resources = _as_map(c.get("resources"))
        limits, requests = _as_map(resources.get("limits")), _as_map(resources.get("requests"))
        for name in ("cpu", "memory"):
            lim, req = limits.get(name), requests.get(name, limits.get(name))
            if _nonzero(lim) or _nonzero(req):
                any_set = True
            if lim is None or not _nonzero(lim) or _value(req) != _value(lim):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _as_map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _value(q: Any) -> Any:
    try:
        return parse_quantity(q)
    except (ValueError, TypeError):
        return None


def _nonzero(q: Any) -> bool:
    v = _value(q)
    return v is not None and v != 0


def _template(owner_spec: dict[str, Any]) -> dict[str, Any] | None:
    template = owner_spec.get("template")
    if not isinstance(template, dict):
        return None
    spec = _dict(template, "spec")
    if spec is not None:
        _pod_spec(spec)
    return template


def _replication_controller(obj: dict[str, Any]) -> None:
    spec = _dict(obj, "spec")
    if spec is None:
        return
    template = _template(spec)
    labels = None
    if template is not None and isinstance(template.get("metadata"), dict):
        labels = template["metadata"].get("labels")
    if isinstance(labels, dict) and labels:
        if not spec.get("selector"):
            spec["selector"] = dict(labels)
        meta = _dict(obj, "metadata")
        if meta is not None and not meta.get("labels"):
            meta["labels"] = dict(labels)
    spec.setdefault("replicas", 1)


def _replica_set(obj: dict[str, Any]) -> None:
    spec = _dict(obj, "spec")
    if spec is None:
        return
    _template(spec)
    spec.setdefault("replicas", 1)


def _deployment(obj: dict[str, Any]) -> None:
    spec = _dict(obj, "spec")
    if spec is None:
        return
    _template(spec)
    spec.setdefault("replicas", 1)
    strategy = _dict(spec, "strategy")
    if strategy is not None:
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = _dict(strategy, "rollingUpdate")
            if rolling is not None:
                rolling.setdefault("maxUnavailable", "25%")
                rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)


def _daemon_set(obj: dict[str, Any]) -> None:
    spec = _dict(obj, "spec")
    if spec is None:
        return
    _template(spec)
    strategy = _dict(spec, "updateStrategy")
    if strategy is not None:
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = _dict(strategy, "rollingUpdate")
            if rolling is not None:
                rolling.setdefault("maxUnavailable", 1)
                rolling.setdefault("maxSurge", 0)
    spec.setdefault("revisionHistoryLimit", 10)


def _stateful_set(obj: dict[str, Any]) -> None:
    spec = _dict(obj, "spec")
    if spec is None:
        return
    _template(spec)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    strategy = _dict(spec, "updateStrategy")
    if strategy is not None:
        if not strategy.get("type"):
            strategy["type"] = "RollingUpdate"
            strategy.setdefault("rollingUpdate", {})
        rolling = strategy.get("rollingUpdate")
        if strategy["type"] == "RollingUpdate" and isinstance(rolling, dict):
            rolling.setdefault("partition", 0)
    retention = _dict(spec, "persistentVolumeClaimRetentionPolicy")
    if retention is not None:
        retention.setdefault("whenDeleted", "Retain")
        retention.setdefault("whenScaled", "Retain")
    for claim in _dicts(spec.get("volumeClaimTemplates")):
        _persistent_volume_claim(claim)
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)


def _job_spec_template(spec: dict[str, Any]) -> None:
    """What a Job's and a CronJob's job template share: pod defaults and failure patterns."""
    _template(spec)
    policy = spec.get("podFailurePolicy")
    for rule in _dicts(policy.get("rules")) if isinstance(policy, dict) else []:
        for pattern in _dicts(rule.get("onPodConditions")):
            if not pattern.get("status"):
                pattern["status"] = "True"


def _job(obj: dict[str, Any]) -> None:
    spec = _dict(obj, "spec")
    if spec is None:
        return
    _job_spec_template(spec)
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    if spec.get("backoffLimit") is None:
        # with a per-index limit, the global one is effectively off
        per_index = spec.get("backoffLimitPerIndex") is not None
        spec["backoffLimit"] = 2**31 - 1 if per_index else 6
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    if spec.get("podReplacementPolicy") is None:
        failure_policy = spec.get("podFailurePolicy") is not None
        spec["podReplacementPolicy"] = "Failed" if failure_policy else "TerminatingOrFailed"
    generate_job_selector(obj)
    # a Job without labels carries its template's (SetDefaults_Job, applied on every read)
    meta, template = obj.get("metadata"), spec.get("template")
    template_labels = _as_map(_as_map(template).get("metadata")).get("labels")
    if isinstance(meta, dict) and not meta.get("labels") and isinstance(template_labels, dict):
        meta["labels"] = dict(template_labels)


def _cron_job(obj: dict[str, Any]) -> None:
    spec = _dict(obj, "spec")
    if spec is None:
        return
    if not spec.get("concurrencyPolicy"):
        spec["concurrencyPolicy"] = "Allow"
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    job_template = spec.get("jobTemplate")
    job_spec = job_template.get("spec") if isinstance(job_template, dict) else None
    if isinstance(job_spec, dict):
        _job_spec_template(job_spec)


def _namespace(obj: dict[str, Any]) -> None:
    spec = _dict(obj, "spec")
    if spec is not None:
        spec.setdefault("finalizers", ["kubernetes"])
    status = _dict(obj, "status")
    if status is not None:
        status.setdefault("phase", "Active")


def _secret(obj: dict[str, Any]) -> None:
    """``type: Opaque``; ``stringData`` merged into ``data`` (base64) and dropped, as the v1
    conversion does: a key in both takes the ``stringData`` value; never stored or returned."""
    if obj.get("type") in (None, ""):
        obj["type"] = "Opaque"
    string_data = obj.get("stringData")
    if not isinstance(string_data, dict) or not all(
        isinstance(v, str) for v in string_data.values()
    ):
        return  # wrong types: left for validation to report
    del obj["stringData"]
    if not string_data:
        return
    data = obj.get("data")
    if data is None:
        data = obj["data"] = {}
    if isinstance(data, dict):
        for key, value in string_data.items():
            data[key] = base64.b64encode(value.encode()).decode("ascii")


def _persistent_volume(obj: dict[str, Any]) -> None:
    spec = _dict(obj, "spec")
    if spec is not None:
        spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
        spec.setdefault("volumeMode", "Filesystem")
        _canonical_resources(spec.get("capacity"))
    status = _dict(obj, "status")
    if status is not None:
        status.setdefault("phase", "Pending")


def _persistent_volume_claim(obj: dict[str, Any]) -> None:
    spec = _dict(obj, "spec")
    if spec is not None:
        spec.setdefault("volumeMode", "Filesystem")
        resources = spec.get("resources")
        if isinstance(resources, dict):
            _canonical_resources(resources.get("requests"))
            _canonical_resources(resources.get("limits"))
    status = _dict(obj, "status")
    if status is not None:
        status.setdefault("phase", "Pending")


def _storage_class(obj: dict[str, Any]) -> None:
    obj.setdefault("reclaimPolicy", "Delete")
    obj.setdefault("volumeBindingMode", "Immediate")


def _node(obj: dict[str, Any]) -> None:
    status = obj.get("status")
    if not isinstance(status, dict):
        return
    _canonical_resources(status.get("capacity"))
    _canonical_resources(status.get("allocatable"))
    if "allocatable" not in status and isinstance(status.get("capacity"), dict):
        status["allocatable"] = dict(status["capacity"])


def _endpoints(obj: dict[str, Any]) -> None:
    for subset in _dicts(obj.get("subsets")):
        for port in _dicts(subset.get("ports")):
            port.setdefault("protocol", "TCP")


def _endpoint_slice(obj: dict[str, Any]) -> None:
    for port in _dicts(obj.get("ports")):
        port.setdefault("name", "")
        port.setdefault("protocol", "TCP")


DEFAULT_CLIENT_IP_TIMEOUT = 10800
"""``sessionAffinity: ClientIP`` keeps a client on one endpoint for 3 hours unless told otherwise."""


def _service(obj: dict[str, Any]) -> None:
    """``SetDefaults_Service`` plus the single-stack IP families the REST storage fills in."""
    spec = _dict(obj, "spec")
    if spec is None:
        return
    if spec.get("sessionAffinity") in (None, ""):
        spec["sessionAffinity"] = "None"
    if spec["sessionAffinity"] == "None":
        spec.pop("sessionAffinityConfig", None)
    elif spec["sessionAffinity"] == "ClientIP":
        config = _dict(spec, "sessionAffinityConfig")
        client_ip = _dict(config, "clientIP") if config is not None else None
        if client_ip is not None and client_ip.get("timeoutSeconds") is None:
            client_ip["timeoutSeconds"] = DEFAULT_CLIENT_IP_TIMEOUT
    if spec.get("type") in (None, ""):
        spec["type"] = "ClusterIP"
    for port in _dicts(spec.get("ports")):
        if port.get("protocol") in (None, ""):
            port["protocol"] = "TCP"
        if port.get("targetPort") in (None, 0, "") and isinstance(port.get("port"), int):
            port["targetPort"] = port["port"]
    kind = spec["type"]
    if kind in ("NodePort", "LoadBalancer") and spec.get("externalTrafficPolicy") in (None, ""):
        spec["externalTrafficPolicy"] = "Cluster"
    if kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is None:
        spec["allocateLoadBalancerNodePorts"] = True
    if kind == "ExternalName":
        return
    if spec.get("internalTrafficPolicy") is None:
        spec["internalTrafficPolicy"] = "Cluster"
    cluster_ip = spec.get("clusterIP")
    if isinstance(cluster_ip, str) and cluster_ip and not spec.get("clusterIPs"):
        spec["clusterIPs"] = [cluster_ip]
    if not spec.get("ipFamilyPolicy"):
        # a headless Service without a selector takes every family the cluster has
        selectorless_headless = cluster_ip == "None" and not spec.get("selector")
        spec["ipFamilyPolicy"] = "RequireDualStack" if selectorless_headless else "SingleStack"
    if not spec.get("ipFamilies"):
        spec["ipFamilies"] = ["IPv4"]


_RBAC_GROUP = "rbac.authorization.k8s.io"


def _role_binding(obj: dict[str, Any]) -> None:
    """``pkg/apis/rbac/v1/defaults.go``: ``roleRef.apiGroup`` and a User's or Group's
    ``apiGroup`` default to ``rbac.authorization.k8s.io`` (a ServiceAccount's stays ``""``)."""
    ref = obj.get("roleRef")
    if isinstance(ref, dict) and not ref.get("apiGroup"):
        ref["apiGroup"] = _RBAC_GROUP
    for subject in obj.get("subjects") or []:
        if (
            isinstance(subject, dict)
            and not subject.get("apiGroup")
            and subject.get("kind") in ("User", "Group")
        ):
            subject["apiGroup"] = _RBAC_GROUP


_MODELS: dict[str, type[KubeModel]] = {
    rt.kind: rt.model
    for rt in REGISTRY
    if isinstance(rt.model, type) and issubclass(rt.model, KubeModel)
}
"""The model of each served kind, by kind (kubelite serves no kind name in two groups)."""

_BY_KIND: dict[str, Callable[[dict[str, Any]], None]] = {
    "Pod": _pod,
    "ReplicationController": _replication_controller,
    "ReplicaSet": _replica_set,
    "Deployment": _deployment,
    "Namespace": _namespace,
    "Node": _node,
    "Secret": _secret,
    "PersistentVolume": _persistent_volume,
    "PersistentVolumeClaim": _persistent_volume_claim,
    "StorageClass": _storage_class,
    "Service": _service,
    "DaemonSet": _daemon_set,
    "StatefulSet": _stateful_set,
    "Job": _job,
    "CronJob": _cron_job,
    "Endpoints": _endpoints,
    "EndpointSlice": _endpoint_slice,
    "RoleBinding": _role_binding,
    "ClusterRoleBinding": _role_binding,
    "MutatingWebhookConfiguration": default_webhook_configuration,
    "ValidatingWebhookConfiguration": default_webhook_configuration,
    "ValidatingAdmissionPolicy": default_policy,
    "ValidatingAdmissionPolicyBinding": default_policy_binding,
    "HorizontalPodAutoscaler": default_horizontal_pod_autoscaler,
    "FlowSchema": default_flow_schema,
    "PriorityLevelConfiguration": default_priority_level,
}
