"""core/v1: Pod, Node, Namespace, Event, ReplicationController, Binding and their parts.

Why: the scheduler, kubelet and controllers read these objects off informers and want typed
access (``Pod.model_validate(d).spec.node_name``); the apiserver validates bodies against them.
Everything follows ``api.meta.KubeModel``: camelCase aliases (explicit where Kubernetes spells
otherwise: ``podIP``, ``hostIPs``, ``podCIDR``, ``containerID``, ``imageID``, ``machineID``,
``Port`` ...), unknown fields kept verbatim, strict types, times as RFC 3339 strings.

What is modelled: the fields kubelite acts on (containers, ports, env, resources,
command/args, restart policy, node name/selector/affinity, tolerations, grace periods, the full
PodStatus; Node spec and status; Namespace; Event; RC; Binding). What is not (volumes, probes,
security contexts, pod affinity ...) is typed loosely (``dict``) or left to ``extra="allow"``,
so it round-trips but is not checked.

``Quantity`` values accept a JSON number or string and are held as the string Kubernetes
would print (``cpu: 1`` -> ``"1"``); ``api.quantity`` turns them into exact numbers.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from api.meta import KubeModel, ObjectMeta
from api.quantity import parse_quantity

__all__ = [
    "Affinity",
    "Binding",
    "Container",
    "ContainerImage",
    "ContainerPort",
    "ContainerState",
    "ContainerStateRunning",
    "ContainerStateTerminated",
    "ContainerStateWaiting",
    "ContainerStatus",
    "DaemonEndpoint",
    "EnvVar",
    "EnvVarSource",
    "Event",
    "EventSeries",
    "EventSource",
    "HostIP",
    "Namespace",
    "NamespaceCondition",
    "NamespaceSpec",
    "NamespaceStatus",
    "Node",
    "NodeAddress",
    "NodeAffinity",
    "NodeCondition",
    "NodeDaemonEndpoints",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "NodeSpec",
    "NodeStatus",
    "NodeSystemInfo",
    "ObjectFieldSelector",
    "ObjectReference",
    "Pod",
    "PodCondition",
    "PodIP",
    "PodSpec",
    "PodStatus",
    "PodTemplateSpec",
    "PreferredSchedulingTerm",
    "Quantity",
    "ReplicationController",
    "ReplicationControllerCondition",
    "ReplicationControllerSpec",
    "ReplicationControllerStatus",
    "ResourceList",
    "ResourceRequirements",
    "Taint",
    "Toleration",
]


def _quantity(v: Any) -> Any:
    if isinstance(v, int | float) and not isinstance(v, bool):
        v = str(v)
    if isinstance(v, str):
        parse_quantity(v)  # ValueError with Kubernetes' wording if malformed
    return v


Quantity = Annotated[str, BeforeValidator(_quantity)]
"""A resource quantity as its string (``"100m"``, ``"128Mi"``); numbers are accepted on input."""

ResourceList = dict[str, Quantity]


class ObjectReference(KubeModel):
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None
    api_version: str | None = None
    resource_version: str | None = None
    field_path: str | None = None


# -- containers ------------------------------------------------------------------------------


class ContainerPort(KubeModel):
    name: str | None = None
    host_port: int | None = None
    container_port: int
    protocol: str | None = None
    host_ip: str | None = Field(default=None, alias="hostIP")


class ObjectFieldSelector(KubeModel):
    api_version: str | None = None
    field_path: str


class EnvVarSource(KubeModel):
    field_ref: ObjectFieldSelector | None = None
    resource_field_ref: dict[str, Any] | None = None
    config_map_key_ref: dict[str, Any] | None = None
    secret_key_ref: dict[str, Any] | None = None


class EnvVar(KubeModel):
    name: str
    value: str | None = None
    value_from: EnvVarSource | None = None


class ResourceRequirements(KubeModel):
    limits: ResourceList | None = None
    requests: ResourceList | None = None
    claims: list[dict[str, Any]] | None = None


class Container(KubeModel):
    name: str
    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    working_dir: str | None = None
    ports: list[ContainerPort] | None = None
    env: list[EnvVar] | None = None
    env_from: list[dict[str, Any]] | None = None
    resources: ResourceRequirements | None = None
    volume_mounts: list[dict[str, Any]] | None = None
    liveness_probe: dict[str, Any] | None = None
    readiness_probe: dict[str, Any] | None = None
    startup_probe: dict[str, Any] | None = None
    lifecycle: dict[str, Any] | None = None
    termination_message_path: str | None = None
    termination_message_policy: str | None = None
    image_pull_policy: str | None = None
    security_context: dict[str, Any] | None = None
    stdin: bool | None = None
    stdin_once: bool | None = None
    tty: bool | None = None


# -- scheduling constraints ------------------------------------------------------------------


class NodeSelectorRequirement(KubeModel):
    key: str
    operator: str
    values: list[str] | None = None


class NodeSelectorTerm(KubeModel):
    match_expressions: list[NodeSelectorRequirement] | None = None
    match_fields: list[NodeSelectorRequirement] | None = None


class NodeSelector(KubeModel):
    node_selector_terms: list[NodeSelectorTerm]


class PreferredSchedulingTerm(KubeModel):
    weight: int
    preference: NodeSelectorTerm


class NodeAffinity(KubeModel):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] | None = (
        None
    )


class Affinity(KubeModel):
    node_affinity: NodeAffinity | None = None
    pod_affinity: dict[str, Any] | None = None
    pod_anti_affinity: dict[str, Any] | None = None


class Toleration(KubeModel):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None


class Taint(KubeModel):
    key: str
    value: str | None = None
    effect: str
    time_added: str | None = None


# -- pod -------------------------------------------------------------------------------------


class PodSpec(KubeModel):
    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] | None = None
    ephemeral_containers: list[dict[str, Any]] | None = None
    volumes: list[dict[str, Any]] | None = None
    restart_policy: str | None = None
    termination_grace_period_seconds: int | None = None
    active_deadline_seconds: int | None = None
    dns_policy: str | None = None
    node_selector: dict[str, str] | None = None
    service_account_name: str | None = None
    service_account: str | None = None
    automount_service_account_token: bool | None = None
    node_name: str | None = None
    host_network: bool | None = None
    host_pid: bool | None = Field(default=None, alias="hostPID")
    host_ipc: bool | None = Field(default=None, alias="hostIPC")
    share_process_namespace: bool | None = None
    security_context: dict[str, Any] | None = None
    image_pull_secrets: list[dict[str, Any]] | None = None
    hostname: str | None = None
    subdomain: str | None = None
    affinity: Affinity | None = None
    scheduler_name: str | None = None
    tolerations: list[Toleration] | None = None
    host_aliases: list[dict[str, Any]] | None = None
    priority_class_name: str | None = None
    priority: int | None = None
    dns_config: dict[str, Any] | None = None
    readiness_gates: list[dict[str, Any]] | None = None
    runtime_class_name: str | None = None
    enable_service_links: bool | None = None
    preemption_policy: str | None = None
    overhead: ResourceList | None = None
    topology_spread_constraints: list[dict[str, Any]] | None = None


class PodCondition(KubeModel):
    type: str
    status: str
    last_probe_time: str | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class ContainerStateWaiting(KubeModel):
    reason: str | None = None
    message: str | None = None


class ContainerStateRunning(KubeModel):
    started_at: str | None = None


class ContainerStateTerminated(KubeModel):
    exit_code: int
    signal: int | None = None
    reason: str | None = None
    message: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    container_id: str | None = Field(default=None, alias="containerID")


class ContainerState(KubeModel):
    waiting: ContainerStateWaiting | None = None
    running: ContainerStateRunning | None = None
    terminated: ContainerStateTerminated | None = None


class ContainerStatus(KubeModel):
    name: str
    state: ContainerState | None = None
    last_state: ContainerState | None = None
    ready: bool = False
    restart_count: int = 0
    image: str = ""
    image_id: str = Field(default="", alias="imageID")
    container_id: str | None = Field(default=None, alias="containerID")
    started: bool | None = None


class PodIP(KubeModel):
    ip: str


class HostIP(KubeModel):
    ip: str


class PodStatus(KubeModel):
    phase: str | None = None
    conditions: list[PodCondition] | None = None
    message: str | None = None
    reason: str | None = None
    nominated_node_name: str | None = None
    host_ip: str | None = Field(default=None, alias="hostIP")
    host_ips: list[HostIP] | None = Field(default=None, alias="hostIPs")
    pod_ip: str | None = Field(default=None, alias="podIP")
    pod_ips: list[PodIP] | None = Field(default=None, alias="podIPs")
    start_time: str | None = None
    init_container_statuses: list[ContainerStatus] | None = None
    container_statuses: list[ContainerStatus] | None = None
    ephemeral_container_statuses: list[ContainerStatus] | None = None
    qos_class: str | None = None

    def condition(self, type_: str) -> PodCondition | None:
        for c in self.conditions or []:
            if c.type == type_:
                return c
        return None


class Pod(KubeModel):
    api_version: str = "v1"
    kind: str = "Pod"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus = Field(default_factory=PodStatus)


class PodTemplateSpec(KubeModel):
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec = Field(default_factory=PodSpec)


class Binding(KubeModel):
    """``pods/binding`` and ``bindings``: ``target`` names the node (``kind: Node``)."""

    api_version: str = "v1"
    kind: str = "Binding"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    target: ObjectReference


# -- node ------------------------------------------------------------------------------------


class NodeSpec(KubeModel):
    pod_cidr: str | None = Field(default=None, alias="podCIDR")
    pod_cidrs: list[str] | None = Field(default=None, alias="podCIDRs")
    provider_id: str | None = Field(default=None, alias="providerID")
    unschedulable: bool | None = None
    taints: list[Taint] | None = None


class NodeCondition(KubeModel):
    type: str
    status: str
    last_heartbeat_time: str | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class NodeAddress(KubeModel):
    type: str
    address: str


class DaemonEndpoint(KubeModel):
    port: int = Field(alias="Port")


class NodeDaemonEndpoints(KubeModel):
    kubelet_endpoint: DaemonEndpoint | None = None


class NodeSystemInfo(KubeModel):
    machine_id: str = Field(default="", alias="machineID")
    system_uuid: str = Field(default="", alias="systemUUID")
    boot_id: str = Field(default="", alias="bootID")
    kernel_version: str = ""
    os_image: str = ""
    container_runtime_version: str = ""
    kubelet_version: str = ""
    kube_proxy_version: str = ""
    operating_system: str = ""
    architecture: str = ""


class ContainerImage(KubeModel):
    names: list[str] | None = None
    size_bytes: int | None = None


class NodeStatus(KubeModel):
    capacity: ResourceList | None = None
    allocatable: ResourceList | None = None
    phase: str | None = None
    conditions: list[NodeCondition] | None = None
    addresses: list[NodeAddress] | None = None
    daemon_endpoints: NodeDaemonEndpoints | None = None
    node_info: NodeSystemInfo | None = None
    images: list[ContainerImage] | None = None

    def condition(self, type_: str) -> NodeCondition | None:
        for c in self.conditions or []:
            if c.type == type_:
                return c
        return None


class Node(KubeModel):
    api_version: str = "v1"
    kind: str = "Node"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodeSpec = Field(default_factory=NodeSpec)
    status: NodeStatus = Field(default_factory=NodeStatus)


# -- namespace -------------------------------------------------------------------------------


class NamespaceSpec(KubeModel):
    finalizers: list[str] | None = None


class NamespaceCondition(KubeModel):
    type: str
    status: str
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class NamespaceStatus(KubeModel):
    phase: str | None = None
    conditions: list[NamespaceCondition] | None = None


class Namespace(KubeModel):
    api_version: str = "v1"
    kind: str = "Namespace"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NamespaceSpec = Field(default_factory=NamespaceSpec)
    status: NamespaceStatus = Field(default_factory=NamespaceStatus)


# -- event -----------------------------------------------------------------------------------


class EventSource(KubeModel):
    component: str | None = None
    host: str | None = None


class EventSeries(KubeModel):
    count: int | None = None
    last_observed_time: str | None = None


class Event(KubeModel):
    """core/v1 Event (what ``kubectl describe`` lists). ``eventTime`` is a MicroTime."""

    api_version: str = "v1"
    kind: str = "Event"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    involved_object: ObjectReference = Field(default_factory=ObjectReference)
    reason: str | None = None
    message: str | None = None
    source: EventSource | None = None
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    count: int | None = None
    type: str | None = None
    event_time: str | None = None
    series: EventSeries | None = None
    action: str | None = None
    related: ObjectReference | None = None
    reporting_component: str | None = None
    reporting_instance: str | None = None


# -- replication controller ------------------------------------------------------------------


class ReplicationControllerSpec(KubeModel):
    replicas: int | None = None
    min_ready_seconds: int | None = None
    selector: dict[str, str] | None = None
    template: PodTemplateSpec | None = None


class ReplicationControllerCondition(KubeModel):
    type: str
    status: str
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class ReplicationControllerStatus(KubeModel):
    replicas: int = 0
    fully_labeled_replicas: int | None = None
    ready_replicas: int | None = None
    available_replicas: int | None = None
    observed_generation: int | None = None
    conditions: list[ReplicationControllerCondition] | None = None


class ReplicationController(KubeModel):
    api_version: str = "v1"
    kind: str = "ReplicationController"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ReplicationControllerSpec = Field(default_factory=ReplicationControllerSpec)
    status: ReplicationControllerStatus = Field(default_factory=ReplicationControllerStatus)
