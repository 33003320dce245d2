"""REGISTRY: Kubernetes' own names, scopes, verbs, subresources and selectable fields."""

from __future__ import annotations

from api.apps import Deployment
from api.core import Pod
from api.registry import ALL_VERBS, REGISTRY


def test_every_served_resource_is_registered_with_kubernetes_names() -> None:
    table = {
        (rt.group, rt.version, rt.plural): (rt.kind, rt.singular, rt.namespaced, rt.short_names)
        for rt in REGISTRY
    }
    assert table == {
        ("", "v1", "pods"): ("Pod", "pod", True, ("po",)),
        ("", "v1", "nodes"): ("Node", "node", False, ("no",)),
        ("", "v1", "namespaces"): ("Namespace", "namespace", False, ("ns",)),
        ("", "v1", "events"): ("Event", "event", True, ("ev",)),
        ("", "v1", "replicationcontrollers"): (
            "ReplicationController",
            "replicationcontroller",
            True,
            ("rc",),
        ),
        ("", "v1", "bindings"): ("Binding", "binding", True, ()),
        ("apps", "v1", "replicasets"): ("ReplicaSet", "replicaset", True, ("rs",)),
        ("apps", "v1", "deployments"): ("Deployment", "deployment", True, ("deploy",)),
        ("coordination.k8s.io", "v1", "leases"): ("Lease", "lease", True, ()),
        ("", "v1", "configmaps"): ("ConfigMap", "configmap", True, ("cm",)),
        ("", "v1", "secrets"): ("Secret", "secret", True, ()),
        ("", "v1", "serviceaccounts"): ("ServiceAccount", "serviceaccount", True, ("sa",)),
        ("", "v1", "services"): ("Service", "service", True, ("svc",)),
        ("", "v1", "persistentvolumes"): ("PersistentVolume", "persistentvolume", False, ("pv",)),
        ("", "v1", "persistentvolumeclaims"): (
            "PersistentVolumeClaim",
            "persistentvolumeclaim",
            True,
            ("pvc",),
        ),
        ("apiextensions.k8s.io", "v1", "customresourcedefinitions"): (
            "CustomResourceDefinition",
            "customresourcedefinition",
            False,
            ("crd", "crds"),
        ),
        ("storage.k8s.io", "v1", "storageclasses"): (
            "StorageClass",
            "storageclass",
            False,
            ("sc",),
        ),
        ("apps", "v1", "statefulsets"): ("StatefulSet", "statefulset", True, ("sts",)),
        ("autoscaling", "v2", "horizontalpodautoscalers"): (
            "HorizontalPodAutoscaler",
            "horizontalpodautoscaler",
            True,
            ("hpa",),
        ),
        ("apps", "v1", "daemonsets"): ("DaemonSet", "daemonset", True, ("ds",)),
        ("apps", "v1", "controllerrevisions"): (
            "ControllerRevision",
            "controllerrevision",
            True,
            (),
        ),
        ("batch", "v1", "jobs"): ("Job", "job", True, ()),
        ("batch", "v1", "cronjobs"): ("CronJob", "cronjob", True, ("cj",)),
        ("policy", "v1", "poddisruptionbudgets"): (
            "PodDisruptionBudget",
            "poddisruptionbudget",
            True,
            ("pdb",),
        ),
        ("", "v1", "endpoints"): ("Endpoints", "endpoints", True, ("ep",)),
        ("discovery.k8s.io", "v1", "endpointslices"): (
            "EndpointSlice",
            "endpointslice",
            True,
            (),
        ),
        ("rbac.authorization.k8s.io", "v1", "roles"): ("Role", "role", True, ()),
        ("rbac.authorization.k8s.io", "v1", "rolebindings"): (
            "RoleBinding",
            "rolebinding",
            True,
            (),
        ),
        ("rbac.authorization.k8s.io", "v1", "clusterroles"): (
            "ClusterRole",
            "clusterrole",
            False,
            (),
        ),
        ("rbac.authorization.k8s.io", "v1", "clusterrolebindings"): (
            "ClusterRoleBinding",
            "clusterrolebinding",
            False,
            (),
        ),
        ("authorization.k8s.io", "v1", "subjectaccessreviews"): (
            "SubjectAccessReview",
            "subjectaccessreview",
            False,
            (),
        ),
        ("authorization.k8s.io", "v1", "selfsubjectaccessreviews"): (
            "SelfSubjectAccessReview",
            "selfsubjectaccessreview",
            False,
            (),
        ),
        ("authorization.k8s.io", "v1", "localsubjectaccessreviews"): (
            "LocalSubjectAccessReview",
            "localsubjectaccessreview",
            True,
            (),
        ),
        ("authorization.k8s.io", "v1", "selfsubjectrulesreviews"): (
            "SelfSubjectRulesReview",
            "selfsubjectrulesreview",
            False,
            (),
        ),
        ("authentication.k8s.io", "v1", "tokenreviews"): (
            "TokenReview",
            "tokenreview",
            False,
            (),
        ),
        ("authentication.k8s.io", "v1", "selfsubjectreviews"): (
            "SelfSubjectReview",
            "selfsubjectreview",
            False,
            (),
        ),
        ("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations"): (
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfiguration",
            False,
            (),
        ),
        ("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations"): (
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfiguration",
            False,
            (),
        ),
        ("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies"): (
            "ValidatingAdmissionPolicy",
            "validatingadmissionpolicy",
            False,
            (),
        ),
        ("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings"): (
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybinding",
            False,
            (),
        ),
        ("flowcontrol.apiserver.k8s.io", "v1", "flowschemas"): (
            "FlowSchema",
            "flowschema",
            False,
            (),
        ),
        ("flowcontrol.apiserver.k8s.io", "v1", "prioritylevelconfigurations"): (
            "PriorityLevelConfiguration",
            "prioritylevelconfiguration",
            False,
            (),
        ),
        ("scheduling.k8s.io", "v1", "priorityclasses"): (
            "PriorityClass",
            "priorityclass",
            False,
            ("pc",),
        ),
    }


def test_workload_kinds_have_kubernetes_categories_and_subresources() -> None:
    shape = {
        rt.kind: (rt.categories, tuple(s.name for s in rt.subresources))
        for rt in REGISTRY
        if rt.group in ("batch", "policy") or rt.kind in ("StatefulSet", "DaemonSet")
    }
    assert shape == {
        "StatefulSet": (("all",), ("status", "scale")),
        "DaemonSet": (("all",), ("status",)),
        "Job": (("all",), ("status",)),
        "CronJob": (("all",), ("status",)),
        "PodDisruptionBudget": ((), ("status",)),
    }
    assert REGISTRY.require("apps", "ControllerRevision").categories == ()


def test_lookups_by_any_name() -> None:
    assert REGISTRY.resolve("po") is REGISTRY.get("", "v1", "pods")
    assert REGISTRY.resolve("Deployment") is REGISTRY.by_kind("apps", "Deployment")
    assert REGISTRY.by_api_version("apps/v1", "ReplicaSet") is REGISTRY.resolve("rs")
    assert REGISTRY.by_api_version("coordination.k8s.io/v1", "Lease") is REGISTRY.resolve("leases")
    assert REGISTRY.groups() == {
        "": ["v1"],
        "apps": ["v1"],
        "coordination.k8s.io": ["v1"],
        "storage.k8s.io": ["v1"],
        "batch": ["v1"],
        "autoscaling": ["v2", "v1"],
        "policy": ["v1"],
        "discovery.k8s.io": ["v1"],
        "rbac.authorization.k8s.io": ["v1"],
        "authorization.k8s.io": ["v1"],
        "authentication.k8s.io": ["v1"],
        "apiextensions.k8s.io": ["v1"],
        "admissionregistration.k8s.io": ["v1"],
        "flowcontrol.apiserver.k8s.io": ["v1"],
        "scheduling.k8s.io": ["v1"],
    }
    pods, deployments = REGISTRY.resolve("pods"), REGISTRY.resolve("deploy")
    assert pods is not None and pods.model is Pod and pods.categories == ("all",)
    assert deployments is not None and deployments.model is Deployment


def test_verbs_and_subresources() -> None:
    pods = REGISTRY.resolve("pods")
    assert pods is not None and pods.verbs == ALL_VERBS and pods.has_status
    subs = {s.name: (s.group, s.kind, s.verbs) for s in pods.subresources}
    assert subs == {
        "status": ("", "Pod", ("get", "patch", "update")),
        "binding": ("", "Binding", ("create",)),
        "log": ("", "Pod", ("get",)),
        "exec": ("", "PodExecOptions", ("create", "get")),
        "portforward": ("", "PodPortForwardOptions", ("create", "get")),
        "proxy": ("", "PodProxyOptions", ("create", "delete", "get", "patch", "update")),
        "eviction": ("policy", "Eviction", ("create",)),
    }
    services = REGISTRY.resolve("services")
    assert services is not None
    assert {s.name: (s.group, s.kind, s.verbs) for s in services.subresources} == {
        "status": ("", "Service", ("get", "patch", "update")),
        "proxy": ("", "ServiceProxyOptions", ("create", "delete", "get", "patch", "update")),
    }
    accounts = REGISTRY.resolve("serviceaccounts")
    assert accounts is not None
    token = {s.name: (s.group, s.kind, s.verbs) for s in accounts.subresources}
    assert token == {"token": ("authentication.k8s.io", "TokenRequest", ("create",))}
    for name in ("subjectaccessreviews", "selfsubjectreviews", "tokenreviews"):
        review = REGISTRY.resolve(name)
        assert review is not None and review.verbs == ("create",)
    namespaces = REGISTRY.resolve("ns")
    assert namespaces is not None and "deletecollection" not in namespaces.verbs
    bindings = REGISTRY.resolve("bindings")
    assert bindings is not None and bindings.verbs == ("create",)
    for name in ("rc", "rs", "deploy"):
        rt = REGISTRY.resolve(name)
        assert rt is not None
        scale = next(s for s in rt.subresources if s.name == "scale")
        assert (scale.group, scale.version, scale.kind) == ("autoscaling", "v1", "Scale")


def test_field_getters_read_dicts_like_kubernetes() -> None:
    pods, nodes, rcs, ns = (REGISTRY.resolve(n) for n in ("pods", "nodes", "rc", "ns"))
    assert pods is not None and nodes is not None and rcs is not None and ns is not None
    empty: dict[str, object] = {}
    assert pods.field_value(empty, "spec.nodeName") == ""
    assert pods.field_value(empty, "spec.hostNetwork") == "false"
    assert pods.field_value({"spec": {"hostNetwork": True}}, "spec.hostNetwork") == "true"
    assert pods.field_value({"status": {"podIP": "127.1.0.3"}}, "status.podIP") == "127.1.0.3"
    assert pods.field_value(empty, "spec.nope") is None
    assert nodes.field_value({"spec": {"unschedulable": True}}, "spec.unschedulable") == "true"
    assert rcs.field_value(empty, "status.replicas") == "0"
    assert rcs.field_value({"status": {"replicas": 3}}, "status.replicas") == "3"
    assert ns.field_value({"status": {"phase": "Terminating"}}, "status.phase") == "Terminating"
    assert set(pods.field_getters) == {
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    }


def test_autoscaling_v1_is_routed_but_v2_is_the_stored_kind() -> None:
    v1 = REGISTRY.get("autoscaling", "v1", "horizontalpodautoscalers")
    v2 = REGISTRY.get("autoscaling", "v2", "horizontalpodautoscalers")
    assert v1 is not None and v1.conversion is not None
    assert v2 is not None and v2.conversion is None
    assert REGISTRY.by_kind("autoscaling", "HorizontalPodAutoscaler") is v2
    assert REGISTRY.stored(v1) is v2
    assert v1 not in list(REGISTRY)  # controllers iterate the stored kinds only
    assert v1 in list(REGISTRY.every_version())
    assert v1.key("default", "web") == v2.key("default", "web")
