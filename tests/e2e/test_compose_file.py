"""docker-compose.yml checked statically (test_compose_stack.py runs it for real, under Podman).

Three independent checks: docker-compose itself validates the file against the compose
schema (offline); every service's command is exactly what the one argv source
(``kubelite.commands``) produces for the compose settings; and it is a real ``kubelite``
sub-command whose flags parse with that component's own argument parser, with ports and URLs
agreeing across services (a node runs ``kubelite node``: its kubelet's flags and the proxy it
derives from them are both checked, and its health check asks both). Every component reaches
the apiserver's secure port with a kubeconfig the one-shot ``pki`` service wrote into the
volume it mounts read-only, and starts only after that service completed. The ``ha``
profile's services (a second, highly available cluster) are checked the same way, and to agree
with each other: one etcd cluster, every apiserver on all of it, the front before every one.
Every kubelet serves TLS with the certificate ``certs init`` issues for its node name (run here),
and every apiserver dials it by that name with its own kubelet client certificate.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml
from cryptography import x509

from kubelite import cluster_pki, commands, node
from kubelite.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"


@pytest.fixture(scope="module")
def whole() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def compose(whole: dict) -> dict:
    """The file as ``docker compose up`` runs it: the services of no profile."""
    services = {n: s for n, s in whole["services"].items() if not s.get("profiles")}
    return {**whole, "services": services}


@pytest.fixture(scope="module")
def ha(whole: dict) -> dict:
    """The ``ha`` profile's services (``docker compose --profile ha up``)."""
    return {n: s for n, s in whole["services"].items() if "ha" in (s.get("profiles") or [])}


def test_compose_schema_is_valid() -> None:
    tool = shutil.which("docker-compose")
    assert tool, (
        "docker-compose is missing: `make test` installs it (apt-get install docker-compose)"
    )
    result = subprocess.run(
        [tool, "-f", str(COMPOSE), "config", "-q"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def _parse(command: list[str]):
    """The flags of ``command``; a node's are its kubelet's (``_node_proxy`` reads the rest)."""
    sub, *flags = command
    assert sub in COMMANDS, f"{sub!r} is not a kubelite sub-command"
    if sub == "node":
        return _parse(node.parse_options(flags).kubelet.kubelite())
    module = importlib.import_module(COMMANDS[sub])
    return module.build_parser().parse_args(flags)


def _node_proxy(command: list[str]):
    """The flags of the proxy a ``kubelite node`` command line starts."""
    sub, *flags = command
    assert sub == "node", command
    return _parse(node.parse_options(flags).proxy.kubelite())


def test_every_service_runs_a_kubelite_command_whose_flags_parse(compose: dict) -> None:
    services = compose["services"]
    assert set(services) == {
        "pki", "apiserver", "controller-manager", "scheduler", "node1", "node2"
    }  # fmt: skip
    for name, service in services.items():
        assert service.get("image") == "kubelite:latest", name
        _parse(service["command"])


KUBELET_CLIENT: dict[str, Any] = {
    "kubelet_client_certificate": Path("/pki/pki/apiserver-kubelet-client.crt"),
    "kubelet_client_key": Path("/pki/pki/apiserver-kubelet-client.key"),
    "kubelet_certificate_authority": Path("/pki/pki/ca.crt"),
    # a container's IP is known only once it starts; its name is in its kubelet's certificate
    "kubelet_preferred_address_types": ["Hostname", "InternalIP"],
}
"""How an apiserver of the compose file reaches kubelets: over https, as itself, by name."""


def _kubelet_tls(node: str) -> dict[str, Any]:
    """A compose kubelet's server: TLS with its ``certs init`` certificate, and only whom the
    apiserver authenticates and authorizes let in."""
    return {
        "tls_cert_file": Path(f"/pki/pki/kubelet-{node}.crt"),
        "tls_private_key_file": Path(f"/pki/pki/kubelet-{node}.key"),
        "client_ca_file": Path("/pki/pki/ca.crt"),
        "authentication_token_webhook": True,
        "authorization_mode": "Webhook",
    }


def test_every_command_is_what_the_argv_source_builds(compose: dict) -> None:
    """The compose settings, through ``kubelite.commands``, give the file's command lists."""
    pki, kubeconfigs = Path("/pki/pki"), Path("/pki/kubeconfigs")
    service_range = "127.128.0.0/16"
    expected = {
        "pki": commands.certs_init(
            state_dir="/pki",
            nodes=["node1", "node2"],
            apiserver_names=["apiserver"],
            server="https://apiserver:6443",
            service_cluster_ip_range=service_range,
        ),
        "apiserver": commands.apiserver(
            store="sqlite:///var/lib/kubelite/kubelite.db",
            state_dir="/var/lib/kubelite",
            bind_address="0.0.0.0",
            port=8080,
            insecure_allow_remote=True,
            secure_port=6443,
            tls_cert_file=pki / "apiserver.crt",
            tls_private_key_file=pki / "apiserver.key",
            client_ca_file=pki / "ca.crt",
            service_account_signing_key_file=pki / "sa.key",
            **KUBELET_CLIENT,
            service_cluster_ip_range=service_range,
        ),
        "controller-manager": commands.controller_manager(
            kubeconfig=kubeconfigs / "controller-manager.conf", healthz_port=10257
        ),
        "scheduler": commands.scheduler(
            kubeconfig=kubeconfigs / "scheduler.conf", healthz_port=10259
        ),
        **{
            node: commands.node(
                commands.kubelet(
                    kubeconfig=kubeconfigs / f"node-{node}.conf",
                    node_name=node,
                    node_ip=node,
                    runtime="process",
                    state_dir="/var/lib/kubelet",
                    address="0.0.0.0",
                    port=10250,
                    healthz_port=10248,
                    **_kubelet_tls(node),
                ),
                proxy_healthz_port=10256,
                proxy_kubeconfig=kubeconfigs / "proxy.conf",
            )
            for node in ("node1", "node2")
        },
    }
    services = compose["services"]
    assert set(services) == set(expected)
    for name, command in expected.items():
        assert services[name]["command"] == command.kubelite(), name


def test_ports_and_urls_agree(compose: dict) -> None:
    services = compose["services"]
    api = _parse(services["apiserver"]["command"])
    assert api.insecure_bind_address == "0.0.0.0"  # reachable from the other containers
    published = {p.rsplit(":", 2)[-1] for p in services["apiserver"]["ports"]}
    assert str(api.insecure_port) in published
    assert str(api.secure_port) in published
    # the kubeconfigs the pki service writes name the secure port, under the service's name,
    # which its certificate carries
    pki = _parse(services["pki"]["command"])
    url = urlparse(pki.server)
    assert (url.scheme, url.hostname, url.port) == ("https", "apiserver", api.secure_port)
    assert url.hostname in pki.apiserver_name
    assert pki.node == ["node1", "node2"]
    assert pki.service_cluster_ip_range == api.service_cluster_ip_range
    assert str(api.tls_cert_file).startswith(f"{pki.state_dir}/pki/")
    completed = {"condition": "service_completed_successfully"}
    for name in ("apiserver", "controller-manager", "scheduler", "node1", "node2"):
        service = services[name]
        assert service["depends_on"]["pki"] == completed, name
        assert f"pki:{pki.state_dir}:ro" in service["volumes"], name
    for name in ("controller-manager", "scheduler", "node1", "node2"):
        args = _parse(services[name]["command"])
        assert args.server is None, name  # no way back to the unauthenticated port
        who = "node-" + name if name.startswith("node") else name
        assert args.kubeconfig == f"{pki.state_dir}/kubeconfigs/{who}.conf", name
        assert services[name]["depends_on"]["apiserver"]["condition"] == "service_healthy"
    for name in ("node1", "node2"):
        args = _parse(services[name]["command"])
        assert args.node_name == name
        assert args.runtime == "process"
        proxy = _node_proxy(services[name]["command"])  # the node's proxy: as itself
        assert proxy.kubeconfig == f"{pki.state_dir}/kubeconfigs/proxy.conf", name
        assert proxy.server is None and proxy.node_names == {name}, name
    health = services["apiserver"]["healthcheck"]["test"]
    assert f"127.0.0.1:{api.insecure_port}/readyz" in health[-1]


def _health_urls(service: dict) -> list[str]:
    test = service["healthcheck"]["test"]
    assert test[:3] == ["CMD", "curl", "-fsS"], test
    urls = [arg for arg in test[3:] if not arg.startswith("-")]
    if len(urls) > 1:  # curl's status is its last URL's unless told to stop at the first failure
        assert "--fail-early" in test, test
    return urls


def _health_url(service: dict) -> str:
    [url] = _health_urls(service)
    return url


def test_health_checks_probe_what_each_component_serves(compose: dict) -> None:
    services = compose["services"]
    cm = _parse(services["controller-manager"]["command"])
    assert _health_url(services["controller-manager"]) == (
        f"http://127.0.0.1:{cm.healthz_port}/healthz"
    )
    sched = _parse(services["scheduler"]["command"])
    assert _health_url(services["scheduler"]) == f"http://127.0.0.1:{sched.healthz_port}/healthz"
    for name in ("node1", "node2"):
        kubelet = _parse(services[name]["command"])
        proxy = _node_proxy(services[name]["command"])
        # a node is healthy when both its agents are: the kubelet's and the proxy's /healthz
        assert _health_urls(services[name]) == [
            f"http://127.0.0.1:{kubelet.healthz_port}/healthz",
            f"http://{proxy.healthz_bind_address}:{proxy.healthz_port}/healthz",
        ]
        # the apiserver proxies logs and exec to the node's Hostname (its name) and kubelet
        # port: the kubelet must listen beyond its own loopback, under a name the network resolves
        assert kubelet.address == "0.0.0.0"
        assert kubelet.node_ip == services[name]["hostname"] == name
    for name, service in services.items():
        assert service["restart"] in ("always", "unless-stopped", "on-failure"), name
        if name != "pki":  # a one-shot: it completes, the others wait for that
            assert service["healthcheck"]["retries"] >= 1, name


def test_the_image_runs_the_kubelite_command() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["kubelite"]' in dockerfile
    for package in ("api", "store", "client", "component", "services", "kubelite"):
        assert f"COPY {package} ./{package}" in dockerfile, package
    assert "curl" in dockerfile  # the health checks run curl inside the container


def test_every_service_is_reachable_only_as_published_on_loopback(whole: dict) -> None:
    for name, service in whole["services"].items():
        assert "network_mode" not in service, name  # no host networking
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), (name, port)
        assert name in ("pki", "ha-pki") or service["healthcheck"]["test"][0] == "CMD", name
    named = set(whole["volumes"])
    for name, service in whole["services"].items():
        for volume in service.get("volumes", []):
            assert volume.split(":", 1)[0] in named, (name, volume)  # named, never a host path


HA_MEMBERS = ("etcd1", "etcd2", "etcd3")
HA_APISERVERS = ("ha-apiserver1", "ha-apiserver2", "ha-apiserver3")


def _ha_expected() -> dict[str, commands.Command]:
    """The ``ha`` profile's settings, through ``kubelite.commands``."""
    pki, kubeconfigs = Path("/pki/pki"), Path("/pki/kubeconfigs")
    service_range = "127.129.0.0/16"
    cluster = [f"{m}=http://ha-{m}:2380" for m in HA_MEMBERS]
    store = "etcd://" + ",".join(f"ha-{m}:2379" for m in HA_MEMBERS)
    expected = {
        "ha-pki": commands.certs_init(
            state_dir="/pki",
            nodes=["ha-node1"],
            apiserver_names=["ha-front", *HA_APISERVERS],
            server="https://ha-front:6443",
            service_cluster_ip_range=service_range,
        ),
        **{
            f"ha-{m}": commands.etcd_member(
                name=m,
                data_dir="/var/lib/etcd",
                client_url=f"http://ha-{m}:2379",
                peer_url=f"http://ha-{m}:2380",
                listen_address="0.0.0.0",
                initial_cluster=cluster,
            )
            for m in HA_MEMBERS
        },
        **{
            name: commands.apiserver(
                store=store,
                state_dir="/var/lib/kubelite",
                secure_port=6443,
                tls_cert_file=pki / "apiserver.crt",
                tls_private_key_file=pki / "apiserver.key",
                client_ca_file=pki / "ca.crt",
                service_account_signing_key_file=pki / "sa.key",
                **KUBELET_CLIENT,
                service_cluster_ip_range=service_range,
            )
            for name in HA_APISERVERS
        },
        "ha-front": commands.front(
            backends=[f"{name}:6443" for name in HA_APISERVERS],
            bind_address="0.0.0.0",
            port=6443,
            healthz_port=10258,
        ),
        "ha-node1": commands.node(
            commands.kubelet(
                kubeconfig=kubeconfigs / "node-ha-node1.conf",
                node_name="ha-node1",
                node_ip="ha-node1",
                runtime="process",
                state_dir="/var/lib/kubelet",
                address="0.0.0.0",
                port=10250,
                healthz_port=10248,
                **_kubelet_tls("ha-node1"),
            ),
            proxy_healthz_port=10256,
            proxy_kubeconfig=kubeconfigs / "proxy.conf",
        ),
    }
    for i in (1, 2):
        expected[f"ha-controller-manager{i}"] = commands.controller_manager(
            kubeconfig=kubeconfigs / "controller-manager.conf", healthz_port=10257,
            leader_elect=True,
        )  # fmt: skip
        expected[f"ha-scheduler{i}"] = commands.scheduler(
            kubeconfig=kubeconfigs / "scheduler.conf", healthz_port=10259, leader_elect=True
        )
    return expected


def test_the_ha_profile_is_what_the_argv_source_builds(ha: dict) -> None:
    """3 etcd members, 3 apiservers, the front, 2 + 2 leader-elected standbys, a node."""
    expected = _ha_expected()
    assert set(ha) == set(expected)
    for name, command in expected.items():
        assert ha[name]["command"] == command.kubelite(), name
        _parse(ha[name]["command"])  # a real sub-command whose flags parse
        assert ha[name]["image"] == "kubelite:latest", name


def test_the_ha_profile_agrees_with_itself(ha: dict) -> None:
    """The members form one cluster, the apiservers use all of them, the front relays to
    every apiserver's secure port, and every kubeconfig names the front, which the
    certificate names."""
    members = {name: _parse(ha[f"ha-{name}"]["command"]) for name in HA_MEMBERS}
    clusters = {m.initial_cluster for m in members.values()}
    assert len(clusters) == 1
    assert set(clusters.pop().split(",")) == {f"{n}={m.peer_url}" for n, m in members.items()}
    apis = [_parse(ha[name]["command"]) for name in HA_APISERVERS]
    clients = {urlparse(m.client_url).netloc for m in members.values()}
    for api in apis:
        assert set(api.store.removeprefix("etcd://").split(",")) == clients
    front = _parse(ha["ha-front"]["command"])
    assert [str(b) for b in front.backends] == [f"{n}:{a.secure_port}" for n, a in zip(
        HA_APISERVERS, apis, strict=True)]  # fmt: skip
    assert front.port == 6443 and any(p.endswith(":6443") for p in ha["ha-front"]["ports"])
    pki = _parse(ha["ha-pki"]["command"])
    url = urlparse(pki.server)
    assert (url.scheme, url.hostname, url.port) == ("https", "ha-front", front.port)
    assert {"ha-front", *HA_APISERVERS} <= set(pki.apiserver_name)
    for name in ("ha-controller-manager1", "ha-controller-manager2", "ha-scheduler1",
                 "ha-scheduler2"):  # fmt: skip
        args = _parse(ha[name]["command"])
        assert args.leader_elect is True and args.server is None, name
        assert ha[name]["depends_on"]["ha-front"] == {"condition": "service_healthy"}, name
    for service in ha.values():
        assert service["profiles"] == ["ha"]


@pytest.mark.parametrize("profile", ["default", "ha"])
def test_kubelets_serve_tls_with_certificates_naming_the_address_the_apiserver_dials(
    profile: str, compose: dict, ha: dict, tmp_path: Path
) -> None:
    """The ``pki`` service's own command, run here, issues every file the apiserver and the
    kubelets are given; each kubelet's certificate names its node, which the kubelet reports as
    its Hostname address (``node_status``) and which the apiserver dials first."""
    services = compose["services"] if profile == "default" else ha
    pki_name = "pki" if profile == "default" else "ha-pki"
    nodes = [n for n, s in services.items() if s["command"][0] == "node"]
    apiservers = [n for n, s in services.items() if s["command"][0] == "apiserver"]
    mount = _parse(services[pki_name]["command"]).state_dir
    # the pki service's arguments, its volume here in tmp_path (a later flag wins)
    assert cluster_pki.main([*services[pki_name]["command"][1:], f"--state-dir={tmp_path}"]) == 0

    def issued(path: object) -> Path:
        return tmp_path / Path(str(path)).relative_to(mount)

    def names(cert: Path) -> list[str]:
        parsed = x509.load_pem_x509_certificate(cert.read_bytes())
        alt = parsed.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        return alt.get_values_for_type(x509.DNSName)

    ca = None
    for name in apiservers:
        api = _parse(services[name]["command"])
        assert api.kubelet_preferred_address_types[0] == "Hostname", name
        client = x509.load_pem_x509_certificate(issued(api.kubelet_client_certificate).read_bytes())
        assert client.subject.rfc4514_string() == (
            "CN=kube-apiserver-kubelet-client,O=system:masters"
        )
        assert issued(api.kubelet_client_key).exists()
        ca = issued(api.kubelet_certificate_authority)
    assert ca is not None and ca.exists()
    for name in nodes:
        kubelet = _parse(services[name]["command"])
        assert kubelet.node_name == services[name]["hostname"] == name
        assert name in names(issued(kubelet.tls_cert_file)), name
        assert issued(kubelet.tls_private_key_file).exists()
        assert issued(kubelet.client_ca_file) == ca
        assert kubelet.authentication_token_webhook and kubelet.authorization_mode == "Webhook"
        # the health check stays on the unauthenticated health port, over plain http
        assert _health_urls(services[name])[0] == f"http://127.0.0.1:{kubelet.healthz_port}/healthz"
