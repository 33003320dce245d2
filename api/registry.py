"""The resource registry: every kind kubelite serves, and how it is addressed.

One ``ResourceType`` per served resource holds what discovery, routing, storage and the field
selector need to know about it: group/version/kind, plural/singular/short names, scope, verbs,
subresources, the pydantic model that validates it, and its selectable fields. The apiserver
routes and discovers from this table alone; clients resolve kinds and paths from it.

Store keys: ``/registry/{group or "core"}/{plural}/{namespace}/{name}`` for namespaced kinds and
``/registry/{group or "core"}/{plural}/{name}`` for cluster-scoped ones — the same for every
version of a kind. A kind served at a second version from the first one's storage
(autoscaling/v1 HorizontalPodAutoscaler) has a ``Conversion``: it is routed (``get``) and
discovered (``every_version``, ``groups``), while iterating the registry and ``by_kind`` give
the stored version only, so what works per kind (controllers, storages, watch caches) sees one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from api import autoscaling_v1
from api.admissionregistration import (
    MutatingWebhookConfiguration,
    ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding,
    ValidatingWebhookConfiguration,
)
from api.apiextensions import CustomObject, CustomResource, CustomResourceDefinition
from api.apps import ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet
from api.authentication import SelfSubjectReview, TokenReview
from api.authorization import (
    LocalSubjectAccessReview,
    SelfSubjectAccessReview,
    SelfSubjectRulesReview,
    SubjectAccessReview,
)
from api.autoscaling import HorizontalPodAutoscaler
from api.batch import CronJob, Job
from api.config import ConfigMap, Secret, ServiceAccount
from api.coordination import Lease
from api.core import Binding, Event, Namespace, Node, Pod, ReplicationController
from api.discovery import EndpointSlice
from api.endpoints import Endpoints
from api.flowcontrol import GROUP as FLOWCONTROL_GROUP
from api.flowcontrol import FlowSchema, PriorityLevelConfiguration
from api.persistentvolumes import PersistentVolume, PersistentVolumeClaim
from api.policy import PodDisruptionBudget
from api.rbac import ClusterRole, ClusterRoleBinding, Role, RoleBinding
from api.schema_kinds import SCHEMA_KINDS
from api.services import Service
from api.storage import StorageClass

__all__ = ["ALL_VERBS", "REGISTRY", "Conversion", "Registry", "ResourceType", "Subresource"]

ALL_VERBS: tuple[str, ...] = (
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
)

FieldGetter = Callable[[Mapping[str, Any]], str]
"""Reads one selectable field off an object dict; a missing field reads as ``""``."""


@dataclass(frozen=True, slots=True)
class Subresource:
    name: str
    kind: str
    group: str = ""
    version: str = "v1"
    verbs: tuple[str, ...] = ("get", "patch", "update")


@dataclass(frozen=True, slots=True)
class Conversion:
    """How a version served beside the stored one converts to and from it (Kubernetes'
    conversion functions): every write converts the body to the stored version, every read
    converts the stored object to this one. Both return new objects and leave theirs alone."""

    to_storage: Callable[[dict[str, Any]], dict[str, Any]]
    from_storage: Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    model: type[BaseModel]
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    subresources: tuple[Subresource, ...] = ()
    field_getters: Mapping[str, FieldGetter] = field(default_factory=dict)
    """Selectable fields (``fieldSelector``) beyond ``metadata.name``/``metadata.namespace``."""
    custom: CustomResource | None = None
    """Set for a version of a CustomResourceDefinition's kind, or a built-in kind served from its
    schema (``api.schema_kinds``): served from the schema (``api.schema_validation``) rather than
    from ``model``."""
    conversion: Conversion | None = None
    """Set for a built-in version served from another version's storage (autoscaling/v1
    HorizontalPodAutoscaler): the registry routes and discovers it, but iterating the registry
    and ``by_kind`` give the stored version only."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def has_status(self) -> bool:
        return any(s.name == "status" for s in self.subresources)

    def prefix(self, namespace: str | None = None) -> str:
        """Store prefix of all objects (``namespace`` None) or of one namespace; ends with ``/``."""
        base = f"/registry/{self.group or 'core'}/{self.plural}/"
        if self.namespaced and namespace:
            return f"{base}{namespace}/"
        return base

    def key(self, namespace: str | None, name: str) -> str:
        if self.namespaced:
            return f"/registry/{self.group or 'core'}/{self.plural}/{namespace}/{name}"
        return f"/registry/{self.group or 'core'}/{self.plural}/{name}"

    def field_value(self, obj: Mapping[str, Any], path: str) -> str | None:
        """The value of a selectable field, or None if the field is not selectable."""
        meta = obj.get("metadata") or {}
        if path == "metadata.name":
            return str(meta.get("name") or "")
        if path == "metadata.namespace":
            return str(meta.get("namespace") or "")
        getter = self.field_getters.get(path)
        return None if getter is None else getter(obj)


class Registry:
    """Resource types by (group, version, plural), by (group, kind) and by any of their names."""

    def __init__(self, types: list[ResourceType] | None = None) -> None:
        self._by_path: dict[tuple[str, str, str], ResourceType] = {}
        self._by_kind: dict[tuple[str, str], ResourceType] = {}
        self._converted: dict[tuple[str, str, str], ResourceType] = {}
        for rt in types or []:
            self.register(rt)

    def register(self, rt: ResourceType) -> None:
        if rt.conversion is not None:
            self._converted[(rt.group, rt.version, rt.plural)] = rt
            return
        self._by_path[(rt.group, rt.version, rt.plural)] = rt
        self._by_kind[(rt.group, rt.kind)] = rt

    def unregister(self, rt: ResourceType) -> None:
        """Forget ``rt`` (a CRD's version that is no longer served)."""
        self._by_path.pop((rt.group, rt.version, rt.plural), None)
        if self._by_kind.get((rt.group, rt.kind)) is rt:
            del self._by_kind[(rt.group, rt.kind)]
            for other in self._by_path.values():
                if (other.group, other.kind) == (rt.group, rt.kind):
                    self._by_kind[(rt.group, rt.kind)] = other
                    break

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        key = (group, version, plural)
        return self._by_path.get(key) or self._converted.get(key)

    def stored(self, rt: ResourceType) -> ResourceType:
        """The version ``rt``'s objects are stored as: ``rt`` itself unless it converts."""
        return rt if rt.conversion is None else self.require(rt.group, rt.kind)

    def every_version(self) -> Iterator[ResourceType]:
        """Every served type, converted versions included (discovery and OpenAPI list them)."""
        yield from self._by_path.values()
        yield from self._converted.values()

    def by_kind(self, group: str, kind: str) -> ResourceType | None:
        return self._by_kind.get((group, kind))

    def require(self, group: str, kind: str) -> ResourceType:
        """``by_kind`` for a kind the caller cannot work without; KeyError names what is missing."""
        rt = self._by_kind.get((group, kind))
        if rt is None:
            raise KeyError(f"the registry has no {group or 'core'} {kind}")
        return rt

    def by_api_version(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        rt = self._by_kind.get((group, kind))
        return rt if rt is not None and rt.version == version else None

    def resolve(self, name: str) -> ResourceType | None:
        """Find a type by plural, singular, short name or kind (case-insensitive), as kubectl does."""
        name = name.lower()
        for rt in self:
            if name in (rt.plural, rt.singular, rt.kind.lower(), *rt.short_names):
                return rt
        return None

    def groups(self) -> dict[str, list[str]]:
        """Group name -> its versions, core ("") first, in registration order (a converted
        version after the stored ones, so the stored version is the group's preferred)."""
        out: dict[str, list[str]] = {}
        for rt in self.every_version():
            versions = out.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        return out

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(self._by_path.values())

    def __len__(self) -> int:
        return len(self._by_path)


# -- the types kubelite serves -----------------------------------------------------------------
# Names, short names, categories, verbs, subresources and selectable fields are Kubernetes' own
# (pkg/registry/*/strategy.go ToSelectableFields, and what `kubectl api-resources` lists).


def _dig(obj: Mapping[str, Any], parts: tuple[str, ...]) -> Any:
    """The value at ``parts`` (a dotted path, split once by the getter that owns it), or None.

    Decoded JSON is made of plain dicts, so ``dict`` is tested first (a C type check; the
    ``Mapping`` ABC check is several times slower and the watch cache reads every selectable
    field of every object it keeps)."""
    cur: Any = obj
    for part in parts:
        if not isinstance(cur, dict) and not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
    return cur


def _str_field(path: str) -> FieldGetter:
    """A string field; missing or null reads as ``""``."""
    parts = tuple(path.split("."))

    def get(obj: Mapping[str, Any]) -> str:
        value = _dig(obj, parts)
        return "" if value is None else str(value)

    return get


def _bool_field(path: str) -> FieldGetter:
    """A boolean field as Go's ``strconv.FormatBool`` prints it; missing is ``"false"``."""
    parts = tuple(path.split("."))

    def get(obj: Mapping[str, Any]) -> str:
        return "true" if _dig(obj, parts) is True else "false"

    return get


def _int_field(path: str) -> FieldGetter:
    """An integer field as ``strconv.Itoa`` prints it; missing is ``"0"``."""
    parts = tuple(path.split("."))

    def get(obj: Mapping[str, Any]) -> str:
        value = _dig(obj, parts)
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else "0"

    return get


_STATUS_POD_IP = _str_field("status.podIP")


def _pod_ip(obj: Mapping[str, Any]) -> str:
    """``status.podIP`` selects on the first of ``status.podIPs`` (falling back to ``podIP``)."""
    ips = _dig(obj, ("status", "podIPs"))
    if isinstance(ips, list) and ips and isinstance(ips[0], Mapping):
        return str(ips[0].get("ip") or "")
    return _STATUS_POD_IP(obj)


_SOURCE_COMPONENT = _str_field("source.component")
_REPORTING_COMPONENT = _str_field("reportingComponent")


def _event_source(obj: Mapping[str, Any]) -> str:
    """``source`` is ``source.component``, else ``reportingComponent`` (the events/v1 field)."""
    return _SOURCE_COMPONENT(obj) or _REPORTING_COMPONENT(obj)


_SCALE = Subresource("scale", "Scale", group="autoscaling", verbs=("get", "patch", "update"))
_NAMESPACE_VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")
_PROXY_VERBS = ("create", "delete", "get", "patch", "update")
"""The ``proxy`` subresource connects every method; discovery names them as these verbs."""


def _status(kind: str) -> Subresource:
    return Subresource("status", kind)


def _rbac_types() -> list[ResourceType]:
    """rbac.authorization.k8s.io/v1: the roles and their bindings (``api.rbac``)."""
    kinds: list[tuple[str, str, bool, type[BaseModel]]] = [
        ("Role", "roles", True, Role),
        ("RoleBinding", "rolebindings", True, RoleBinding),
        ("ClusterRole", "clusterroles", False, ClusterRole),
        ("ClusterRoleBinding", "clusterrolebindings", False, ClusterRoleBinding),
    ]
    return [
        ResourceType(
            group="rbac.authorization.k8s.io",
            version="v1",
            kind=kind,
            plural=plural,
            singular=kind.lower(),
            namespaced=namespaced,
            model=model,
        )
        for kind, plural, namespaced, model in kinds
    ]


def _review_types() -> list[ResourceType]:
    """The create-only reviews (``api.authorization``, ``api.authentication``): answered, never
    stored."""
    kinds: list[tuple[str, str, bool, type[BaseModel]]] = [
        ("authorization.k8s.io", "SubjectAccessReview", False, SubjectAccessReview),
        ("authorization.k8s.io", "SelfSubjectAccessReview", False, SelfSubjectAccessReview),
        ("authorization.k8s.io", "LocalSubjectAccessReview", True, LocalSubjectAccessReview),
        ("authorization.k8s.io", "SelfSubjectRulesReview", False, SelfSubjectRulesReview),
        ("authentication.k8s.io", "TokenReview", False, TokenReview),
        ("authentication.k8s.io", "SelfSubjectReview", False, SelfSubjectReview),
    ]
    return [
        ResourceType(
            group=group,
            version="v1",
            kind=kind,
            plural=kind.lower() + "s",
            singular=kind.lower(),
            namespaced=namespaced,
            model=model,
            verbs=("create",),
        )
        for group, kind, namespaced, model in kinds
    ]


def _admission_types() -> list[ResourceType]:
    """admissionregistration.k8s.io/v1: cluster-scoped webhook configurations and policies."""
    kinds: list[tuple[str, str, type[BaseModel], tuple[Subresource, ...]]] = [
        ("MutatingWebhookConfiguration", "s", MutatingWebhookConfiguration, ()),
        ("ValidatingWebhookConfiguration", "s", ValidatingWebhookConfiguration, ()),
        (
            "ValidatingAdmissionPolicy",
            "ies",
            ValidatingAdmissionPolicy,
            (_status("ValidatingAdmissionPolicy"),),
        ),
        ("ValidatingAdmissionPolicyBinding", "s", ValidatingAdmissionPolicyBinding, ()),
    ]
    return [
        ResourceType(
            group="admissionregistration.k8s.io",
            version="v1",
            kind=kind,
            plural=kind.lower().removesuffix("y") + suffix,
            singular=kind.lower(),
            namespaced=False,
            model=model,
            categories=("api-extensions",),
            subresources=subresources,
        )
        for kind, suffix, model, subresources in kinds
    ]


def _flowcontrol_types() -> list[ResourceType]:
    """flowcontrol.apiserver.k8s.io/v1: API Priority and Fairness' cluster-scoped objects."""
    kinds: list[tuple[str, str, type[BaseModel]]] = [
        ("FlowSchema", "flowschemas", FlowSchema),
        ("PriorityLevelConfiguration", "prioritylevelconfigurations", PriorityLevelConfiguration),
    ]
    return [
        ResourceType(
            group=FLOWCONTROL_GROUP,
            version="v1",
            kind=kind,
            plural=plural,
            singular=kind.lower(),
            namespaced=False,
            model=model,
            subresources=(_status(kind),),
        )
        for kind, plural, model in kinds
    ]


def _schema_types() -> list[ResourceType]:
    """Built-in kinds served from their OpenAPI schema, as custom resources are
    (``api.schema_kinds``)."""
    return [
        ResourceType(
            group=k.group,
            version=k.version,
            kind=k.kind,
            plural=k.plural,
            singular=k.kind.lower(),
            namespaced=k.namespaced,
            model=CustomObject,
            short_names=k.short_names,
            categories=k.categories,
            custom=k.custom_resource(),
        )
        for k in SCHEMA_KINDS
    ]


REGISTRY: Registry = Registry(
    [
        ResourceType(
            group="",
            version="v1",
            kind="Pod",
            plural="pods",
            singular="pod",
            namespaced=True,
            model=Pod,
            short_names=("po",),
            categories=("all",),
            subresources=(
                _status("Pod"),
                Subresource("binding", "Binding", verbs=("create",)),
                Subresource("log", "Pod", verbs=("get",)),
                Subresource("exec", "PodExecOptions", verbs=("create", "get")),
                Subresource("portforward", "PodPortForwardOptions", verbs=("create", "get")),
                Subresource("proxy", "PodProxyOptions", verbs=_PROXY_VERBS),
                Subresource("eviction", "Eviction", group="policy", verbs=("create",)),
            ),
            field_getters={
                "spec.nodeName": _str_field("spec.nodeName"),
                "spec.restartPolicy": _str_field("spec.restartPolicy"),
                "spec.schedulerName": _str_field("spec.schedulerName"),
                "spec.serviceAccountName": _str_field("spec.serviceAccountName"),
                "spec.hostNetwork": _bool_field("spec.hostNetwork"),
                "status.phase": _str_field("status.phase"),
                "status.podIP": _pod_ip,
                "status.nominatedNodeName": _str_field("status.nominatedNodeName"),
            },
        ),
        ResourceType(
            group="",
            version="v1",
            kind="Node",
            plural="nodes",
            singular="node",
            namespaced=False,
            model=Node,
            short_names=("no",),
            subresources=(_status("Node"),),
            field_getters={"spec.unschedulable": _bool_field("spec.unschedulable")},
        ),
        ResourceType(
            group="",
            version="v1",
            kind="Namespace",
            plural="namespaces",
            singular="namespace",
            namespaced=False,
            model=Namespace,
            short_names=("ns",),
            verbs=_NAMESPACE_VERBS,
            subresources=(
                _status("Namespace"),
                Subresource("finalize", "Namespace", verbs=("update",)),
            ),
            field_getters={"status.phase": _str_field("status.phase")},
        ),
        ResourceType(
            group="",
            version="v1",
            kind="Event",
            plural="events",
            singular="event",
            namespaced=True,
            model=Event,
            short_names=("ev",),
            field_getters={
                **{
                    f"involvedObject.{f}": _str_field(f"involvedObject.{f}")
                    for f in (
                        "kind",
                        "namespace",
                        "name",
                        "uid",
                        "apiVersion",
                        "resourceVersion",
                        "fieldPath",
                    )
                },
                "reason": _str_field("reason"),
                "reportingComponent": _str_field("reportingComponent"),
                "source": _event_source,
                "type": _str_field("type"),
            },
        ),
        ResourceType(
            group="",
            version="v1",
            kind="ReplicationController",
            plural="replicationcontrollers",
            singular="replicationcontroller",
            namespaced=True,
            model=ReplicationController,
            short_names=("rc",),
            categories=("all",),
            subresources=(_status("ReplicationController"), _SCALE),
            field_getters={"status.replicas": _int_field("status.replicas")},
        ),
        ResourceType(
            group="",
            version="v1",
            kind="Service",
            plural="services",
            singular="service",
            namespaced=True,
            model=Service,
            short_names=("svc",),
            categories=("all",),
            subresources=(
                _status("Service"),
                Subresource("proxy", "ServiceProxyOptions", verbs=_PROXY_VERBS),
            ),
            field_getters={
                "spec.clusterIP": _str_field("spec.clusterIP"),
                "spec.type": _str_field("spec.type"),
            },
        ),
        ResourceType(
            group="",
            version="v1",
            kind="ConfigMap",
            plural="configmaps",
            singular="configmap",
            namespaced=True,
            model=ConfigMap,
            short_names=("cm",),
        ),
        ResourceType(
            group="",
            version="v1",
            kind="Secret",
            plural="secrets",
            singular="secret",
            namespaced=True,
            model=Secret,
            field_getters={"type": _str_field("type")},
        ),
        ResourceType(
            group="",
            version="v1",
            kind="ServiceAccount",
            plural="serviceaccounts",
            singular="serviceaccount",
            namespaced=True,
            model=ServiceAccount,
            short_names=("sa",),
            subresources=(
                Subresource(
                    "token", "TokenRequest", group="authentication.k8s.io", verbs=("create",)
                ),
            ),
        ),
        ResourceType(
            group="",
            version="v1",
            kind="PersistentVolume",
            plural="persistentvolumes",
            singular="persistentvolume",
            namespaced=False,
            model=PersistentVolume,
            short_names=("pv",),
            subresources=(_status("PersistentVolume"),),
        ),
        ResourceType(
            group="",
            version="v1",
            kind="PersistentVolumeClaim",
            plural="persistentvolumeclaims",
            singular="persistentvolumeclaim",
            namespaced=True,
            model=PersistentVolumeClaim,
            short_names=("pvc",),
            subresources=(_status("PersistentVolumeClaim"),),
        ),
        ResourceType(
            group="",
            version="v1",
            kind="Endpoints",
            plural="endpoints",
            singular="endpoints",
            namespaced=True,
            model=Endpoints,
            short_names=("ep",),
        ),
        ResourceType(
            group="",
            version="v1",
            kind="Binding",
            plural="bindings",
            singular="binding",
            namespaced=True,
            model=Binding,
            verbs=("create",),
        ),
        ResourceType(
            group="apps",
            version="v1",
            kind="ReplicaSet",
            plural="replicasets",
            singular="replicaset",
            namespaced=True,
            model=ReplicaSet,
            short_names=("rs",),
            categories=("all",),
            subresources=(_status("ReplicaSet"), _SCALE),
            field_getters={"status.replicas": _int_field("status.replicas")},
        ),
        ResourceType(
            group="apps",
            version="v1",
            kind="Deployment",
            plural="deployments",
            singular="deployment",
            namespaced=True,
            model=Deployment,
            short_names=("deploy",),
            categories=("all",),
            subresources=(_status("Deployment"), _SCALE),
        ),
        ResourceType(
            group="apps",
            version="v1",
            kind="StatefulSet",
            plural="statefulsets",
            singular="statefulset",
            namespaced=True,
            model=StatefulSet,
            short_names=("sts",),
            categories=("all",),
            subresources=(_status("StatefulSet"), _SCALE),
        ),
        ResourceType(
            group="apps",
            version="v1",
            kind="DaemonSet",
            plural="daemonsets",
            singular="daemonset",
            namespaced=True,
            model=DaemonSet,
            short_names=("ds",),
            categories=("all",),
            subresources=(_status("DaemonSet"),),
        ),
        ResourceType(
            group="apps",
            version="v1",
            kind="ControllerRevision",
            plural="controllerrevisions",
            singular="controllerrevision",
            namespaced=True,
            model=ControllerRevision,
        ),
        ResourceType(
            group="batch",
            version="v1",
            kind="Job",
            plural="jobs",
            singular="job",
            namespaced=True,
            model=Job,
            categories=("all",),
            subresources=(_status("Job"),),
            field_getters={"status.successful": _int_field("status.succeeded")},
        ),
        ResourceType(
            group="batch",
            version="v1",
            kind="CronJob",
            plural="cronjobs",
            singular="cronjob",
            namespaced=True,
            model=CronJob,
            short_names=("cj",),
            categories=("all",),
            subresources=(_status("CronJob"),),
        ),
        ResourceType(
            group="autoscaling",
            version="v2",
            kind="HorizontalPodAutoscaler",
            plural="horizontalpodautoscalers",
            singular="horizontalpodautoscaler",
            namespaced=True,
            model=HorizontalPodAutoscaler,
            short_names=("hpa",),
            categories=("all",),
            subresources=(_status("HorizontalPodAutoscaler"),),
        ),
        ResourceType(
            group="autoscaling",
            version="v1",
            kind="HorizontalPodAutoscaler",
            plural="horizontalpodautoscalers",
            singular="horizontalpodautoscaler",
            namespaced=True,
            model=autoscaling_v1.HorizontalPodAutoscalerV1,
            short_names=("hpa",),
            categories=("all",),
            subresources=(_status("HorizontalPodAutoscaler"),),
            conversion=Conversion(
                to_storage=autoscaling_v1.v2_from_v1, from_storage=autoscaling_v1.v1_from_v2
            ),
        ),
        ResourceType(
            group="policy",
            version="v1",
            kind="PodDisruptionBudget",
            plural="poddisruptionbudgets",
            singular="poddisruptionbudget",
            namespaced=True,
            model=PodDisruptionBudget,
            short_names=("pdb",),
            subresources=(_status("PodDisruptionBudget"),),
        ),
        ResourceType(
            group="discovery.k8s.io",
            version="v1",
            kind="EndpointSlice",
            plural="endpointslices",
            singular="endpointslice",
            namespaced=True,
            model=EndpointSlice,
        ),
        ResourceType(
            group="coordination.k8s.io",
            version="v1",
            kind="Lease",
            plural="leases",
            singular="lease",
            namespaced=True,
            model=Lease,
        ),
        ResourceType(
            group="storage.k8s.io",
            version="v1",
            kind="StorageClass",
            plural="storageclasses",
            singular="storageclass",
            namespaced=False,
            model=StorageClass,
            short_names=("sc",),
        ),
        *_rbac_types(),
        *_review_types(),
        ResourceType(
            group="apiextensions.k8s.io",
            version="v1",
            kind="CustomResourceDefinition",
            plural="customresourcedefinitions",
            singular="customresourcedefinition",
            namespaced=False,
            model=CustomResourceDefinition,
            short_names=("crd", "crds"),
            categories=("api-extensions",),
            subresources=(_status("CustomResourceDefinition"),),
        ),
        *_admission_types(),
        *_flowcontrol_types(),
        *_schema_types(),
    ]
)
"""Every resource kubelite serves, in discovery order (core first)."""
