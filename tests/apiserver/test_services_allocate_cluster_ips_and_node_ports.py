"""Services get a ClusterIP and node ports from the apiserver's ranges, with Kubernetes' errors.

Against the real app on a loopback port (memory and SQLite stores): defaults, the ``kubernetes``
Service at the range's first address, requested and random addresses, 422s for a taken or
out-of-range address and a taken or out-of-range node port, headless and ExternalName Services
without an address, updates that keep or drop what was allocated, and addresses and ports freed
by a delete handed out again.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from kubelite.testing.waiting import apoll_until
from tests.apiserver.conftest import Api, MakeApi
from tests.factories import service

SVCS = "/api/v1/namespaces/default/services"
RANGE = ipaddress.IPv4Network("127.128.0.0/16")


def _message(body: Any) -> str:
    return str(body["message"])


async def test_a_service_gets_defaults_and_an_address_from_the_range(api: Api) -> None:
    created = await api.ok("POST", SVCS, service("web", selector={"app": "web"}))
    spec = created["spec"]
    assert ipaddress.IPv4Address(spec["clusterIP"]) in RANGE
    assert spec["clusterIPs"] == [spec["clusterIP"]]
    assert spec["type"] == "ClusterIP"
    assert spec["sessionAffinity"] == "None"
    assert spec["ipFamilies"] == ["IPv4"]
    assert spec["ipFamilyPolicy"] == "SingleStack"
    assert spec["internalTrafficPolicy"] == "Cluster"
    assert spec["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80}]
    assert created["status"] == {"loadBalancer": {}}
    # dynamic addresses come from above the static band, so .10 (DNS) stays free
    offset = int(ipaddress.IPv4Address(spec["clusterIP"])) - int(RANGE.network_address)
    assert offset > 256


async def test_the_kubernetes_service_holds_the_first_address(api: Api) -> None:
    svc = await api.ok("GET", f"{SVCS}/kubernetes")
    assert svc["spec"]["clusterIP"] == "127.128.0.1"
    assert svc["spec"]["ports"][0]["name"] == "https"
    assert svc["spec"]["ports"][0]["port"] == 443
    assert svc["metadata"]["labels"] == {"component": "apiserver", "provider": "kubernetes"}
    status, body = await api.post(SVCS, service("thief", clusterIP="127.128.0.1"))
    assert status == 422
    assert _message(body) == (
        'Service "thief" is invalid: spec.clusterIPs: Invalid value: []string{"127.128.0.1"}: '
        "failed to allocate IP 127.128.0.1: provided IP is already allocated"
    )


async def test_a_requested_address_is_given_once_and_must_be_in_range(api: Api) -> None:
    first = await api.ok("POST", SVCS, service("dns", clusterIP="127.128.0.10"))
    assert first["spec"]["clusterIP"] == "127.128.0.10"
    status, body = await api.post(SVCS, service("dns2", clusterIP="127.128.0.10"))
    assert status == 422
    assert body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == "spec.clusterIPs"
    assert "provided IP is already allocated" in _message(body)
    status, body = await api.post(SVCS, service("far", clusterIP="127.5.0.1"))
    assert status == 422
    assert _message(body).endswith(
        "failed to allocate IP 127.5.0.1: provided IP is not in the valid range. "
        "The range of valid IPs is 127.128.0.0/16"
    )
    # the refused creates left nothing behind: the address is still the first one's alone
    assert (await api.get(f"{SVCS}/dns2"))[0] == 404


async def test_node_ports_are_allocated_validated_and_unique(api: Api) -> None:
    ports = [{"name": "http", "port": 80}, {"name": "dns", "port": 53, "protocol": "UDP"}]
    created = await api.ok("POST", SVCS, service("np", type="NodePort", ports=ports))
    allocated = [p["nodePort"] for p in created["spec"]["ports"]]
    assert all(30000 <= p <= 32767 for p in allocated) and len(set(allocated)) == 2
    assert created["spec"]["externalTrafficPolicy"] == "Cluster"
    fixed = [{"port": 80, "nodePort": 30080}]
    await api.ok("POST", SVCS, service("fixed", type="NodePort", ports=fixed))
    status, body = await api.post(SVCS, service("clash", type="NodePort", ports=fixed))
    assert status == 422
    assert _message(body) == (
        'Service "clash" is invalid: spec.ports[0].nodePort: Invalid value: 30080: '
        "provided port is already allocated"
    )
    status, body = await api.post(
        SVCS, service("low", type="NodePort", ports=[{"port": 80, "nodePort": 8080}])
    )
    assert status == 422
    assert _message(body) == (
        'Service "low" is invalid: spec.ports[0].nodePort: Invalid value: 8080: '
        "provided port is not in the valid range. The range of valid ports is 30000-32767"
    )
    lb = await api.ok("POST", SVCS, service("lb", type="LoadBalancer"))
    assert lb["spec"]["allocateLoadBalancerNodePorts"] is True
    assert 30000 <= lb["spec"]["ports"][0]["nodePort"] <= 32767


async def test_headless_and_external_name_services_get_no_address(api: Api) -> None:
    headless = await api.ok("POST", SVCS, service("db", selector={"app": "db"}, clusterIP="None"))
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["clusterIPs"] == ["None"]
    external = await api.ok(
        "POST",
        SVCS,
        service("ext", ports=[], type="ExternalName", externalName="example.org"),
    )
    assert "clusterIP" not in external["spec"]
    status, body = await api.post(SVCS, service("noname", ports=[], type="ExternalName"))
    assert status == 422
    assert "spec.externalName: Required value" in _message(body)


async def test_validation_speaks_kubernetes(api: Api) -> None:
    status, body = await api.post(SVCS, service("two", ports=[{"port": 80}, {"port": 81}]))
    assert status == 422
    assert "spec.ports[0].name: Required value" in _message(body)
    status, body = await api.post(SVCS, service("proto", ports=[{"port": 80, "protocol": "ICMP"}]))
    assert status == 422
    assert 'spec.ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP"' in (
        _message(body)
    )
    status, body = await api.post(
        SVCS, service("nodeport-on-clusterip", ports=[{"port": 80, "nodePort": 30001}])
    )
    assert status == 422
    assert "may not be used when `type` is 'ClusterIP'" in _message(body)


async def test_updates_keep_the_address_and_refuse_to_change_it(api: Api) -> None:
    created = await api.ok("POST", SVCS, service("keep", type="NodePort"))
    ip, node_port = created["spec"]["clusterIP"], created["spec"]["ports"][0]["nodePort"]
    # a PUT without clusterIP or nodePort (kubectl replace of the original manifest) keeps both
    replaced = await api.ok(
        "PUT",
        f"{SVCS}/keep",
        {**service("keep", type="NodePort"), "metadata": created["metadata"]},
    )
    assert replaced["spec"]["clusterIP"] == ip
    assert replaced["spec"]["ports"][0]["nodePort"] == node_port
    status, body = await api.patch(f"{SVCS}/keep", {"spec": {"clusterIP": "127.128.7.7"}})
    assert status == 422
    assert "spec.clusterIPs[0]" in _message(body) and "may not change once set" in _message(body)
    # turning it into a ClusterIP Service gives the node port back
    await api.ok(
        "PATCH",
        f"{SVCS}/keep",
        {"spec": {"type": "ClusterIP"}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    taken = service("taker", type="NodePort", ports=[{"port": 80, "nodePort": node_port}])

    async def node_port_free() -> bool:
        status, _ = await api.post(SVCS, taken)
        return status == 201

    await apoll_until(node_port_free, what=f"node port {node_port} released by the type change")


async def test_deleting_a_service_frees_its_address_and_ports(make_api: MakeApi) -> None:
    api = await make_api("sqlite")
    created = await api.ok(
        "POST",
        SVCS,
        service(
            "gone",
            type="NodePort",
            clusterIP="127.128.3.3",
            ports=[{"port": 80, "nodePort": 30303}],
        ),
    )
    assert created["spec"]["clusterIP"] == "127.128.3.3"
    await api.ok("DELETE", f"{SVCS}/gone")
    again = service(
        "again", type="NodePort", clusterIP="127.128.3.3", ports=[{"port": 80, "nodePort": 30303}]
    )

    async def reused() -> bool:
        status, _ = await api.post(SVCS, again)
        return status == 201

    await apoll_until(reused, what="the deleted Service's address and node port handed out again")
    assert (await api.ok("GET", f"{SVCS}/again"))["spec"]["clusterIP"] == "127.128.3.3"
