"""The forwarding table from Service and EndpointSlice JSON alone: frontends, endpoints,
kube-proxy's ready / serving-terminating fallback, traffic policies and affinity."""

from __future__ import annotations

from services.proxy.service_table import (
    DEFAULT_AFFINITY_TIMEOUT,
    Frontend,
    NodeIdentity,
    service_routes,
    slice_service_key,
)
from tests.factories import endpoint_slice, service, slice_endpoint

NODE1 = NodeIdentity(names=frozenset({"node1"}), node_port_addresses=("127.0.0.1",))
CLUSTER_IP = "127.128.0.20"


def web(**spec: object) -> dict:
    svc = service("web", selector={"app": "web"}, **{"clusterIP": CLUSTER_IP, **spec})
    svc["metadata"]["namespace"] = "default"
    return svc


def test_cluster_ip_port_goes_to_ready_endpoints_on_the_slice_port() -> None:
    svc = web(ports=[{"port": 80, "protocol": "TCP"}])
    es = endpoint_slice(
        "web",
        slice_endpoint("127.1.0.2"),
        slice_endpoint("127.1.0.3", ready=False),
        ports=[{"name": "", "port": 8080, "protocol": "TCP"}],
    )
    routes = service_routes(svc, [es], NODE1)
    assert list(routes) == [Frontend("TCP", CLUSTER_IP, 80)]
    route = routes[Frontend("TCP", CLUSTER_IP, 80)]
    assert route.service == "default/web" and route.kind == "ClusterIP"
    assert route.endpoints == (("127.1.0.2", 8080),)
    assert route.affinity_timeout is None


def test_absent_conditions_mean_ready_and_duplicates_merge() -> None:
    svc = web()
    one = endpoint_slice("web", {"addresses": ["127.1.0.2"]}, name="web-1")
    two = endpoint_slice("web", slice_endpoint("127.1.0.2", ready=False), name="web-2")
    (route,) = service_routes(svc, [one, two], NODE1).values()
    assert route.endpoints == (("127.1.0.2", 80),)


def test_named_ports_match_by_name_and_protocol() -> None:
    svc = web(
        ports=[
            {"name": "http", "port": 80, "protocol": "TCP"},
            {"name": "dns", "port": 53, "protocol": "UDP"},
        ]
    )
    es = endpoint_slice(
        "web",
        slice_endpoint("127.1.0.2"),
        ports=[
            {"name": "http", "port": 8080, "protocol": "TCP"},
            {"name": "dns", "port": 5353, "protocol": "UDP"},
        ],
    )
    routes = service_routes(svc, [es], NODE1)
    assert routes[Frontend("TCP", CLUSTER_IP, 80)].endpoints == (("127.1.0.2", 8080),)
    assert routes[Frontend("UDP", CLUSTER_IP, 53)].endpoints == (("127.1.0.2", 5353),)


def test_serving_terminating_endpoints_only_when_none_is_ready() -> None:
    svc = web()
    draining = slice_endpoint("127.1.0.3", ready=False, serving=True, terminating=True)
    gone = slice_endpoint("127.1.0.4", ready=False, serving=False, terminating=True)
    with_ready = endpoint_slice("web", slice_endpoint("127.1.0.2"), draining, gone)
    (route,) = service_routes(svc, [with_ready], NODE1).values()
    assert route.endpoints == (("127.1.0.2", 80),)
    without_ready = endpoint_slice("web", draining, gone)
    (route,) = service_routes(svc, [without_ready], NODE1).values()
    assert route.endpoints == (("127.1.0.3", 80),)


def test_no_usable_endpoint_is_a_route_with_none() -> None:
    svc = web()
    es = endpoint_slice("web", slice_endpoint("127.1.0.2", ready=False))
    (route,) = service_routes(svc, [es], NODE1).values()
    assert route.endpoints == ()
    (route,) = service_routes(svc, [], NODE1).values()
    assert route.endpoints == ()


def test_node_port_and_load_balancer_ingress_are_frontends_too() -> None:
    svc = web(type="LoadBalancer", ports=[{"port": 80, "nodePort": 30080, "protocol": "TCP"}])
    svc["status"] = {"loadBalancer": {"ingress": [{"ip": "127.192.0.1"}]}}
    es = endpoint_slice("web", slice_endpoint("127.1.0.2"))
    routes = service_routes(svc, [es], NODE1)
    assert {str(f): r.kind for f, r in routes.items()} == {
        f"{CLUSTER_IP}:80/TCP": "ClusterIP",
        "127.0.0.1:30080/TCP": "NodePort",
        "127.192.0.1:80/TCP": "LoadBalancer",
    }
    assert {r.endpoints for r in routes.values()} == {(("127.1.0.2", 80),)}


def test_external_ips_are_served() -> None:
    svc = web(externalIPs=["127.200.0.9"])
    (frontend, *_) = [
        f for f, r in service_routes(svc, [], NODE1).items() if r.kind == "ExternalIP"
    ]
    assert frontend == Frontend("TCP", "127.200.0.9", 80)


def test_headless_external_name_and_sctp_get_no_frontend() -> None:
    assert service_routes(web(clusterIP="None"), [], NODE1) == {}
    external = service("db", type="ExternalName", externalName="db.example")
    assert service_routes(external, [], NODE1) == {}
    sctp = web(ports=[{"port": 80, "protocol": "SCTP"}])
    assert service_routes(sctp, [], NODE1) == {}


def test_local_traffic_policies_keep_traffic_on_this_node() -> None:
    svc = web(
        type="NodePort",
        ports=[{"port": 80, "nodePort": 30080}],
        externalTrafficPolicy="Local",
        internalTrafficPolicy="Cluster",
    )
    es = endpoint_slice(
        "web", slice_endpoint("127.1.0.2", node="node1"), slice_endpoint("127.1.1.2", node="node2")
    )
    routes = service_routes(svc, [es], NODE1)
    assert routes[Frontend("TCP", CLUSTER_IP, 80)].endpoints == (
        ("127.1.0.2", 80),
        ("127.1.1.2", 80),
    )
    assert routes[Frontend("TCP", "127.0.0.1", 30080)].endpoints == (("127.1.0.2", 80),)
    elsewhere = NodeIdentity(names=frozenset({"node3"}))
    local = web(internalTrafficPolicy="Local")
    (route,) = service_routes(local, [es], elsewhere).values()
    assert route.endpoints == ()  # Local with no local endpoint drops, never sends away


def test_client_ip_affinity_and_its_default_timeout() -> None:
    (route,) = service_routes(web(sessionAffinity="ClientIP"), [], NODE1).values()
    assert route.affinity_timeout == DEFAULT_AFFINITY_TIMEOUT == 10800
    svc = web(
        sessionAffinity="ClientIP", sessionAffinityConfig={"clientIP": {"timeoutSeconds": 60}}
    )
    (route,) = service_routes(svc, [], NODE1).values()
    assert route.affinity_timeout == 60


def test_slices_of_other_address_types_are_ignored_and_indexed_by_service() -> None:
    es = endpoint_slice("web", slice_endpoint("127.1.0.2"), address_type="FQDN")
    (route,) = service_routes(web(), [es], NODE1).values()
    assert route.endpoints == ()
    assert slice_service_key(es) == ["default/web"]
    assert slice_service_key({"metadata": {"name": "x", "namespace": "default"}}) == []
