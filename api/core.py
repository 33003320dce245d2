"""core/v1: Pod, Node, Namespace, Event, ReplicationController, Binding and their parts.

Why: the scheduler, kubelet and controllers read these objects off informers and want typed
access (``Pod.model_validate(d).spec.node_name``); the apiserver validates bodies against them.
Everything follows ``api.meta.KubeModel``: camelCase aliases (explicit where Kubernetes spells
otherwise: ``podIP``, ``hostIPs``, ``podCIDR``, ``containerID``, ``imageID``, ``machineID``,
``Port`` ...), unknown fields kept verbatim, strict types, times as RFC 3339 strings.

What is modelled: every field Kubernetes declares on these kinds is declared here too, so the
apiserver can tell a typo from a field (``fieldValidation``: a field no model declares is
unknown). The fields kubelite acts on (containers, ports, env, resources, command/args, probes,
restart policy, node name/selector/affinity, tolerations, grace periods, the full PodStatus;
Node spec and status; Namespace; Event; RC; Binding) and the ones people commonly write
(volumes and mounts, security contexts, pod affinity, topology spread) are typed; rarer parts
(cloud volume sources, resource-claim statuses, node features) are declared as free-form
``dict`` fields, stored as sent and not checked inside.

Fields Kubernetes serialises even when zero (Go fields without ``omitempty``: container
statuses' ``ready``/``restartCount``/``image``/``imageID``/``state``/``lastState``, a terminated
state's ``exitCode``, the node's ``nodeInfo`` and ``daemonEndpoints``, an Event's ``source`` and
``reportingComponent``/``reportingInstance``, RC ``status.replicas``) default to that zero value
instead of None; see ``KubeModel.fill_serialised``.

``Quantity`` values accept a JSON number or string and are held as the string Kubernetes
would print (``cpu: 1`` -> ``"1"``); ``api.quantity`` turns them into exact numbers.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from api.meta import KubeModel, LabelSelectorSpec, ObjectMeta
from api.quantity import parse_quantity

__all__ = [
    "Affinity",
    "AppArmorProfile",
    "Binding",
    "Capabilities",
    "ConfigMapEnvSource",
    "ConfigMapKeySelector",
    "ConfigMapVolumeSource",
    "Container",
    "ContainerImage",
    "ContainerPort",
    "ContainerResizePolicy",
    "ContainerRestartRule",
    "ContainerRestartRuleOnExitCodes",
    "ContainerState",
    "ContainerStateRunning",
    "ContainerStateTerminated",
    "ContainerStateWaiting",
    "ContainerStatus",
    "DaemonEndpoint",
    "DownwardAPIVolumeFile",
    "DownwardAPIVolumeSource",
    "EmptyDirVolumeSource",
    "EnvFromSource",
    "EnvVar",
    "EnvVarSource",
    "EphemeralContainer",
    "Event",
    "EventSeries",
    "EventSource",
    "ExecAction",
    "FileKeySelector",
    "GRPCAction",
    "HTTPGetAction",
    "HTTPHeader",
    "HostAlias",
    "HostIP",
    "HostPathVolumeSource",
    "IntOrString",
    "KeyToPath",
    "Lifecycle",
    "LifecycleHandler",
    "LocalObjectReference",
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
    "PersistentVolumeClaimVolumeSource",
    "Pod",
    "PodAffinity",
    "PodAffinityTerm",
    "PodAntiAffinity",
    "PodCondition",
    "PodDNSConfig",
    "PodDNSConfigOption",
    "PodIP",
    "PodOS",
    "PodReadinessGate",
    "PodResourceClaim",
    "PodSchedulingGate",
    "PodSecurityContext",
    "PodSpec",
    "PodStatus",
    "PodTemplateSpec",
    "PreferredSchedulingTerm",
    "Probe",
    "ProjectedVolumeSource",
    "Quantity",
    "ReplicationController",
    "ReplicationControllerCondition",
    "ReplicationControllerSpec",
    "ReplicationControllerStatus",
    "ResourceClaim",
    "ResourceFieldSelector",
    "ResourceList",
    "ResourceRequirements",
    "SELinuxOptions",
    "SeccompProfile",
    "SecretEnvSource",
    "SecretKeySelector",
    "SecretVolumeSource",
    "SecurityContext",
    "SleepAction",
    "Sysctl",
    "TCPSocketAction",
    "Taint",
    "Toleration",
    "TopologySpreadConstraint",
    "Volume",
    "VolumeDevice",
    "VolumeMount",
    "WeightedPodAffinityTerm",
    "WindowsSecurityContextOptions",
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


class ConfigMapKeySelector(KubeModel):
    name: str | None = None
    key: str
    optional: bool | None = None


class SecretKeySelector(KubeModel):
    name: str | None = None
    key: str
    optional: bool | None = None


class ResourceFieldSelector(KubeModel):
    container_name: str | None = None
    resource: str
    divisor: Quantity | None = None


class FileKeySelector(KubeModel):
    volume_name: str
    path: str
    key: str
    optional: bool | None = None


class ConfigMapEnvSource(KubeModel):
    name: str | None = None
    optional: bool | None = None


class SecretEnvSource(KubeModel):
    name: str | None = None
    optional: bool | None = None


class EnvFromSource(KubeModel):
    prefix: str | None = None
    config_map_ref: ConfigMapEnvSource | None = None
    secret_ref: SecretEnvSource | None = None


IntOrString = int | str
"""``intstr.IntOrString``: a port number or a port name, a count or a percentage."""


class ExecAction(KubeModel):
    command: list[str] | None = None


class HTTPHeader(KubeModel):
    name: str
    value: str


class HTTPGetAction(KubeModel):
    path: str | None = None
    port: IntOrString
    host: str | None = None
    scheme: str | None = None
    http_headers: list[HTTPHeader] | None = None


class TCPSocketAction(KubeModel):
    port: IntOrString
    host: str | None = None


class GRPCAction(KubeModel):
    port: int
    service: str | None = None


class SleepAction(KubeModel):
    seconds: int


class Probe(KubeModel):
    exec: ExecAction | None = None
    http_get: HTTPGetAction | None = None
    tcp_socket: TCPSocketAction | None = None
    grpc: GRPCAction | None = None
    initial_delay_seconds: int | None = None
    timeout_seconds: int | None = None
    period_seconds: int | None = None
    success_threshold: int | None = None
    failure_threshold: int | None = None
    termination_grace_period_seconds: int | None = None


class LifecycleHandler(KubeModel):
    exec: ExecAction | None = None
    http_get: HTTPGetAction | None = None
    tcp_socket: TCPSocketAction | None = None
    sleep: SleepAction | None = None


class Lifecycle(KubeModel):
    post_start: LifecycleHandler | None = None
    pre_stop: LifecycleHandler | None = None
    stop_signal: str | None = None


class Capabilities(KubeModel):
    add: list[str] | None = None
    drop: list[str] | None = None


class SELinuxOptions(KubeModel):
    user: str | None = None
    role: str | None = None
    type: str | None = None
    level: str | None = None


class WindowsSecurityContextOptions(KubeModel):
    gmsa_credential_spec_name: str | None = None
    gmsa_credential_spec: str | None = None
    run_as_user_name: str | None = None
    host_process: bool | None = None


class SeccompProfile(KubeModel):
    type: str
    localhost_profile: str | None = None


class AppArmorProfile(KubeModel):
    type: str
    localhost_profile: str | None = None


class SecurityContext(KubeModel):
    """A container's security context (kubelite's runtimes enforce none of it)."""

    capabilities: Capabilities | None = None
    privileged: bool | None = None
    se_linux_options: SELinuxOptions | None = None
    windows_options: WindowsSecurityContextOptions | None = None
    run_as_user: int | None = None
    run_as_group: int | None = None
    run_as_non_root: bool | None = None
    read_only_root_filesystem: bool | None = None
    allow_privilege_escalation: bool | None = None
    proc_mount: str | None = None
    seccomp_profile: SeccompProfile | None = None
    app_armor_profile: AppArmorProfile | None = None


class Sysctl(KubeModel):
    name: str
    value: str


class PodSecurityContext(KubeModel):
    se_linux_options: SELinuxOptions | None = None
    windows_options: WindowsSecurityContextOptions | None = None
    run_as_user: int | None = None
    run_as_group: int | None = None
    run_as_non_root: bool | None = None
    supplemental_groups: list[int] | None = None
    supplemental_groups_policy: str | None = None
    fs_group: int | None = None
    sysctls: list[Sysctl] | None = None
    fs_group_change_policy: str | None = None
    seccomp_profile: SeccompProfile | None = None
    app_armor_profile: AppArmorProfile | None = None
    se_linux_change_policy: str | None = None


class VolumeMount(KubeModel):
    name: str
    read_only: bool | None = None
    recursive_read_only: str | None = None
    mount_path: str
    sub_path: str | None = None
    mount_propagation: str | None = None
    sub_path_expr: str | None = None
    bind_mount_options: list[str] | None = None


class VolumeDevice(KubeModel):
    name: str
    device_path: str


class ContainerResizePolicy(KubeModel):
    resource_name: str
    restart_policy: str


class ResourceClaim(KubeModel):
    """A container's use of one of the pod's ``resourceClaims``."""

    name: str
    request: str | None = None


class ContainerRestartRuleOnExitCodes(KubeModel):
    operator: str
    values: list[int] | None = None


class ContainerRestartRule(KubeModel):
    action: str
    exit_codes: ContainerRestartRuleOnExitCodes | None = None


class EnvVarSource(KubeModel):
    field_ref: ObjectFieldSelector | None = None
    resource_field_ref: ResourceFieldSelector | None = None
    config_map_key_ref: ConfigMapKeySelector | None = None
    secret_key_ref: SecretKeySelector | None = None
    file_key_ref: FileKeySelector | None = None


class EnvVar(KubeModel):
    name: str
    value: str | None = None
    value_from: EnvVarSource | None = None


class ResourceRequirements(KubeModel):
    limits: ResourceList | None = None
    requests: ResourceList | None = None
    claims: list[ResourceClaim] | None = None


class Container(KubeModel):
    name: str
    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    working_dir: str | None = None
    ports: list[ContainerPort] | None = None
    env: list[EnvVar] | None = None
    env_from: list[EnvFromSource] | None = None
    resources: ResourceRequirements | None = None
    resize_policy: list[ContainerResizePolicy] | None = None
    restart_policy: str | None = None
    restart_policy_rules: list[ContainerRestartRule] | None = None
    volume_mounts: list[VolumeMount] | None = None
    volume_devices: list[VolumeDevice] | None = None
    liveness_probe: Probe | None = None
    readiness_probe: Probe | None = None
    startup_probe: Probe | None = None
    lifecycle: Lifecycle | None = None
    termination_message_path: str | None = None
    termination_message_policy: str | None = None
    image_pull_policy: str | None = None
    security_context: SecurityContext | None = None
    stdin: bool | None = None
    stdin_once: bool | None = None
    tty: bool | None = None


class EphemeralContainer(Container):
    """A debugging container (``kubectl debug``); kubelite stores it and runs none."""

    target_container_name: str | None = None


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


class PodAffinityTerm(KubeModel):
    label_selector: LabelSelectorSpec | None = None
    namespaces: list[str] | None = None
    topology_key: str
    namespace_selector: LabelSelectorSpec | None = None
    match_label_keys: list[str] | None = None
    mismatch_label_keys: list[str] | None = None


class WeightedPodAffinityTerm(KubeModel):
    weight: int
    pod_affinity_term: PodAffinityTerm


class PodAffinity(KubeModel):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] | None = None
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] | None = (
        None
    )


class PodAntiAffinity(KubeModel):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] | None = None
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] | None = (
        None
    )


class Affinity(KubeModel):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAntiAffinity | None = None


class TopologySpreadConstraint(KubeModel):
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    label_selector: LabelSelectorSpec | None = None
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: list[str] | None = None


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


# -- volumes ---------------------------------------------------------------------------------
# kubelite's runtimes mount nothing; volumes are stored and validated for shape. The common
# sources are typed; the cloud and network ones are declared, their contents left free-form.


class KeyToPath(KubeModel):
    key: str
    path: str
    mode: int | None = None


class EmptyDirVolumeSource(KubeModel):
    medium: str | None = None
    size_limit: Quantity | None = None


class HostPathVolumeSource(KubeModel):
    path: str
    type: str | None = None


class ConfigMapVolumeSource(KubeModel):
    name: str | None = None
    items: list[KeyToPath] | None = None
    default_mode: int | None = None
    optional: bool | None = None


class SecretVolumeSource(KubeModel):
    secret_name: str | None = None
    items: list[KeyToPath] | None = None
    default_mode: int | None = None
    optional: bool | None = None


class PersistentVolumeClaimVolumeSource(KubeModel):
    claim_name: str
    read_only: bool | None = None


class DownwardAPIVolumeFile(KubeModel):
    path: str
    field_ref: ObjectFieldSelector | None = None
    resource_field_ref: ResourceFieldSelector | None = None
    mode: int | None = None


class DownwardAPIVolumeSource(KubeModel):
    items: list[DownwardAPIVolumeFile] | None = None
    default_mode: int | None = None


class ProjectedVolumeSource(KubeModel):
    sources: list[dict[str, Any]] | None = None
    default_mode: int | None = None


class Volume(KubeModel):
    name: str
    host_path: HostPathVolumeSource | None = None
    empty_dir: EmptyDirVolumeSource | None = None
    secret: SecretVolumeSource | None = None
    config_map: ConfigMapVolumeSource | None = None
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None
    downward_api: DownwardAPIVolumeSource | None = Field(default=None, alias="downwardAPI")
    projected: ProjectedVolumeSource | None = None
    ephemeral: dict[str, Any] | None = None
    image: dict[str, Any] | None = None
    csi: dict[str, Any] | None = None
    nfs: dict[str, Any] | None = None
    iscsi: dict[str, Any] | None = None
    git_repo: dict[str, Any] | None = None
    gce_persistent_disk: dict[str, Any] | None = None
    aws_elastic_block_store: dict[str, Any] | None = None
    glusterfs: dict[str, Any] | None = None
    rbd: dict[str, Any] | None = None
    flex_volume: dict[str, Any] | None = None
    cinder: dict[str, Any] | None = None
    cephfs: dict[str, Any] | None = None
    flocker: dict[str, Any] | None = None
    fc: dict[str, Any] | None = None
    azure_file: dict[str, Any] | None = None
    azure_disk: dict[str, Any] | None = None
    vsphere_volume: dict[str, Any] | None = None
    quobyte: dict[str, Any] | None = None
    photon_persistent_disk: dict[str, Any] | None = None
    portworx_volume: dict[str, Any] | None = None
    scale_io: dict[str, Any] | None = Field(default=None, alias="scaleIO")
    storageos: dict[str, Any] | None = None


# -- pod -------------------------------------------------------------------------------------


class LocalObjectReference(KubeModel):
    name: str | None = None


class HostAlias(KubeModel):
    ip: str
    hostnames: list[str] | None = None


class PodDNSConfigOption(KubeModel):
    name: str | None = None
    value: str | None = None


class PodDNSConfig(KubeModel):
    nameservers: list[str] | None = None
    searches: list[str] | None = None
    options: list[PodDNSConfigOption] | None = None


class PodReadinessGate(KubeModel):
    condition_type: str


class PodOS(KubeModel):
    name: str


class PodResourceClaim(KubeModel):
    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodSchedulingGate(KubeModel):
    name: str


class PodSpec(KubeModel):
    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] | None = None
    ephemeral_containers: list[EphemeralContainer] | None = None
    volumes: list[Volume] | None = None
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
    security_context: PodSecurityContext | None = None
    image_pull_secrets: list[LocalObjectReference] | None = None
    hostname: str | None = None
    hostname_override: str | None = None
    subdomain: str | None = None
    set_hostname_as_fqdn: bool | None = Field(default=None, alias="setHostnameAsFQDN")
    affinity: Affinity | None = None
    scheduler_name: str | None = None
    tolerations: list[Toleration] | None = None
    host_aliases: list[HostAlias] | None = None
    priority_class_name: str | None = None
    priority: int | None = None
    dns_config: PodDNSConfig | None = None
    readiness_gates: list[PodReadinessGate] | None = None
    runtime_class_name: str | None = None
    enable_service_links: bool | None = None
    preemption_policy: str | None = None
    overhead: ResourceList | None = None
    topology_spread_constraints: list[TopologySpreadConstraint] | None = None
    os: PodOS | None = None
    host_users: bool | None = None
    scheduling_gates: list[PodSchedulingGate] | None = None
    resource_claims: list[PodResourceClaim] | None = None
    resources: ResourceRequirements | None = None
    # newer than the Kubernetes kubelite follows (1.32); declared so they are not "unknown"
    eviction_responders: list[dict[str, Any]] | None = None
    scheduling_group: dict[str, Any] | None = None


class PodCondition(KubeModel):
    type: str
    status: str
    observed_generation: int | None = None
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
    exit_code: int = 0
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
    state: ContainerState = Field(default_factory=ContainerState)
    last_state: ContainerState = Field(default_factory=ContainerState)
    ready: bool = False
    restart_count: int = 0
    image: str = ""
    image_id: str = Field(default="", alias="imageID")
    container_id: str | None = Field(default=None, alias="containerID")
    started: bool | None = None
    allocated_resources: ResourceList | None = None
    resources: ResourceRequirements | None = None
    volume_mounts: list[dict[str, Any]] | None = None
    user: dict[str, Any] | None = None
    allocated_resources_status: list[dict[str, Any]] | None = None
    stop_signal: str | None = None


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
    observed_generation: int | None = None
    resize: str | None = None
    resource_claim_statuses: list[dict[str, Any]] | None = None
    extended_resource_claim_status: dict[str, Any] | None = None
    node_allocatable_resource_claim_statuses: list[dict[str, Any]] | None = None
    allocated_resources: ResourceList | None = None
    resources: ResourceRequirements | None = None
    volume_health: list[dict[str, Any]] | None = None

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
    config_source: dict[str, Any] | None = None
    external_id: str | None = Field(default=None, alias="externalID")
    pod_preemption_policy: dict[str, Any] | None = None


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
    port: int = Field(default=0, alias="Port")


class NodeDaemonEndpoints(KubeModel):
    kubelet_endpoint: DaemonEndpoint = Field(default_factory=DaemonEndpoint)


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
    swap: dict[str, Any] | None = None
    running_in_user_namespace: bool | None = None


class ContainerImage(KubeModel):
    names: list[str] | None = None
    size_bytes: int | None = None


class NodeStatus(KubeModel):
    capacity: ResourceList | None = None
    allocatable: ResourceList | None = None
    phase: str | None = None
    conditions: list[NodeCondition] | None = None
    addresses: list[NodeAddress] | None = None
    daemon_endpoints: NodeDaemonEndpoints = Field(default_factory=NodeDaemonEndpoints)
    node_info: NodeSystemInfo = Field(default_factory=NodeSystemInfo)
    images: list[ContainerImage] | None = None
    volumes_in_use: list[str] | None = None
    volumes_attached: list[dict[str, Any]] | None = None
    config: dict[str, Any] | None = None
    runtime_handlers: list[dict[str, Any]] | None = None
    features: dict[str, Any] | None = None
    declared_features: list[str] | None = None

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
    source: EventSource = Field(default_factory=EventSource)
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    count: int | None = None
    type: str | None = None
    event_time: str | None = None
    series: EventSeries | None = None
    action: str | None = None
    related: ObjectReference | None = None
    reporting_component: str = ""
    reporting_instance: str = ""


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
