"""core/v1 Service: the stable name and virtual address in front of a set of pods.

Why: pods come and go with new IPs; a Service gives them one ClusterIP (and, by type, a port on
every node or a load-balancer address) that the proxy forwards and the cluster DNS names. Every
field Kubernetes declares on ``Service`` is declared here, so ``fieldValidation`` can tell a
typo from a field and the official clients read back what they wrote.

Wire facts kept here: ``spec`` and ``status.loadBalancer`` are non-pointer Go structs, so they are
always on the wire (``status: {"loadBalancer": {}}``); a port's ``port`` has no ``omitempty``;
``targetPort`` is an int or a port name (``intstr.IntOrString``). Defaults are ``api.defaults``',
checks ``api.validation``'s; the addresses and node ports themselves are allocated by the
apiserver (``services.apiserver.service_allocation``), never by a client.

Limits: IPv4 only — ``ipFamilies`` is ``[IPv4]`` and ``PreferDualStack``/``RequireDualStack``
get no second address, as on a single-stack Kubernetes cluster.
"""

from __future__ import annotations

from pydantic import Field

from api.core import IntOrString
from api.meta import Condition, KubeModel, ObjectMeta

__all__ = [
    "CLUSTER_SERVICE_LABEL",
    "HEADLESS",
    "SERVICE_TYPES",
    "ClientIPConfig",
    "LoadBalancerIngress",
    "LoadBalancerStatus",
    "PortStatus",
    "Service",
    "ServicePort",
    "ServiceSpec",
    "ServiceStatus",
    "SessionAffinityConfig",
    "cluster_ip_of",
    "has_cluster_ip",
    "node_ports_of",
    "wants_node_ports",
]

SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
HEADLESS = "None"
"""``spec.clusterIP: None``: a Service without a virtual address (DNS names its pods instead)."""
CLUSTER_SERVICE_LABEL = "kubernetes.io/cluster-service"
"""Services in kube-system labelled ``"true"`` are the ones ``kubectl cluster-info`` lists."""


class ServicePort(KubeModel):
    name: str | None = None
    protocol: str | None = None
    app_protocol: str | None = None
    port: int
    target_port: IntOrString | None = None
    node_port: int | None = None


class ClientIPConfig(KubeModel):
    timeout_seconds: int | None = None


class SessionAffinityConfig(KubeModel):
    client_ip: ClientIPConfig | None = Field(default=None, alias="clientIP")


class ServiceSpec(KubeModel):
    ports: list[ServicePort] | None = None
    selector: dict[str, str] | None = None
    cluster_ip: str | None = Field(default=None, alias="clusterIP")
    cluster_ips: list[str] | None = Field(default=None, alias="clusterIPs")
    type: str | None = None
    external_ips: list[str] | None = Field(default=None, alias="externalIPs")
    session_affinity: str | None = None
    load_balancer_ip: str | None = Field(default=None, alias="loadBalancerIP")
    load_balancer_source_ranges: list[str] | None = None
    external_name: str | None = None
    external_traffic_policy: str | None = None
    health_check_node_port: int | None = None
    publish_not_ready_addresses: bool | None = None
    session_affinity_config: SessionAffinityConfig | None = None
    ip_families: list[str] | None = None
    ip_family_policy: str | None = None
    allocate_load_balancer_node_ports: bool | None = None
    load_balancer_class: str | None = None
    internal_traffic_policy: str | None = None
    traffic_distribution: str | None = None


class PortStatus(KubeModel):
    port: int = 0
    protocol: str = ""
    error: str | None = None


class LoadBalancerIngress(KubeModel):
    ip: str | None = None
    hostname: str | None = None
    ip_mode: str | None = None
    ports: list[PortStatus] | None = None


class LoadBalancerStatus(KubeModel):
    ingress: list[LoadBalancerIngress] | None = None


class ServiceStatus(KubeModel):
    load_balancer: LoadBalancerStatus = Field(default_factory=LoadBalancerStatus)
    conditions: list[Condition] | None = None


class Service(KubeModel):
    api_version: str = "v1"
    kind: str = "Service"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ServiceSpec = Field(default_factory=ServiceSpec)
    status: ServiceStatus = Field(default_factory=ServiceStatus)


# -- what the spec of a stored Service (a dict) asks for --------------------------------------


def _spec(obj: object) -> dict[str, object]:
    spec = obj.get("spec") if isinstance(obj, dict) else None
    return spec if isinstance(spec, dict) else {}


def has_cluster_ip(obj: object) -> bool:
    """A ClusterIP, NodePort or LoadBalancer Service that is not headless gets an address."""
    spec = _spec(obj)
    return spec.get("type", "ClusterIP") != "ExternalName" and spec.get("clusterIP") != HEADLESS


def cluster_ip_of(obj: object) -> str | None:
    """The address a Service holds (``spec.clusterIP``), None when it holds none."""
    value = _spec(obj).get("clusterIP")
    return value if isinstance(value, str) and value not in ("", HEADLESS) else None


def wants_node_ports(obj: object) -> bool:
    """NodePort Services, and LoadBalancers unless ``allocateLoadBalancerNodePorts: false``."""
    spec = _spec(obj)
    kind = spec.get("type")
    if kind == "NodePort":
        return True
    return kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is not False


def node_ports_of(obj: object) -> list[int]:
    """Every ``nodePort`` (and ``healthCheckNodePort``) the Service holds, in port order."""
    spec = _spec(obj)
    ports: list[int] = []
    raw_ports = spec.get("ports")
    for port in raw_ports if isinstance(raw_ports, list) else []:
        value = port.get("nodePort") if isinstance(port, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value:
            ports.append(value)
    health = spec.get("healthCheckNodePort")
    if isinstance(health, int) and not isinstance(health, bool) and health:
        ports.append(health)
    return ports
