"""``kubelite up``'s plan and supervisor rules, without starting a cluster.

Every command line ``plan()`` produces must parse with that component's own parser (a flag
spelled the way one component likes and another rejects stops the whole cluster); the
per-node flags must be what each kubelet needs; a child that exits at once with a usage error
stops ``up`` instead of being restarted forever; ``--help`` documents every flag.
"""

from __future__ import annotations

import asyncio
import importlib
import ipaddress
import os
import sys
from ipaddress import IPv4Network
from pathlib import Path

import pytest

from kubelite import commands, up
from kubelite.cli import COMMANDS

MODULE_OF = {
    "services.apiserver": COMMANDS["apiserver"],
    "services.scheduler": COMMANDS["scheduler"],
    "services.controller_manager": COMMANDS["controller-manager"],
    "services.kubelet": COMMANDS["kubelet"],
    "services.proxy": COMMANDS["proxy"],
    "services.dns": COMMANDS["dns"],
}


def _parse(argv: list[str]):
    assert argv[:2] == [sys.executable, "-m"], argv
    module = importlib.import_module(MODULE_OF[argv[2]])
    return module.build_parser().parse_args(argv[3:])


@pytest.mark.parametrize("level", ["debug", "info", "WARNING", "error"])
def test_every_planned_command_line_parses(tmp_path: Path, level: str) -> None:
    opts = up.parse_options(
        ["--state-dir", str(tmp_path), "--nodes", "3", "--log-level", level, "--pod-cidr",
         "127.140.0.0/16"]
    )  # fmt: skip
    children = up.plan(opts)
    assert [c.name for c in children] == [
        "apiserver", "controller-manager", "scheduler", "proxy", "dns", "node1", "node2", "node3"
    ]  # fmt: skip
    for child in children:
        args = _parse(child.argv)
        assert str(args.log_level).upper() == level.upper(), child.name
    api = _parse(children[0].argv)
    assert api.insecure_port == 8080 and api.store == f"sqlite://{tmp_path / 'kubelite.db'}"
    assert _parse(children[1].argv).healthz_port == 10257
    assert _parse(children[2].argv).healthz_port == 10259
    proxy = _parse(children[3].argv)
    assert proxy.healthz_port == 10256  # one proxy stands for every node of this host
    assert proxy.node_names == {"node1", "node2", "node3"}
    dns = _parse(children[4].argv)
    service_range = ipaddress.ip_network(api.service_cluster_ip_range)
    assert service_range.subnet_of(ipaddress.ip_network("127.128.0.0/10"))
    assert dns.cluster_dns_ip == str(service_range[10]) and dns.healthz_port == 8181
    kubelets = [_parse(c.argv) for c in children[5:]]
    assert all(k.cluster_dns == (dns.cluster_dns_ip,) for k in kubelets)
    assert [k.node_name for k in kubelets] == ["node1", "node2", "node3"]
    assert [k.port for k in kubelets] == [10250, 10251, 10252]
    assert [k.pod_cidr for k in kubelets] == [
        "127.140.0.0/18", "127.140.64.0/18", "127.140.128.0/18"
    ]  # fmt: skip
    assert {str(k.state_dir) for k in kubelets} == {
        str(tmp_path / "kubelets" / n) for n in ("node1", "node2", "node3")
    }
    # on the secure port, each with its own identity: no --server, its own kubeconfig
    assert all(k.stop_pods_on_exit and k.server is None for k in kubelets)
    assert [k.kubeconfig for k in kubelets] == [
        str(tmp_path / "kubeconfigs" / f"node-{n}.conf") for n in ("node1", "node2", "node3")
    ]
    for child, name in zip(
        children[1:5], ("controller-manager", "scheduler", "proxy", "dns"), strict=True
    ):
        args = _parse(child.argv)
        assert args.server is None and args.kubeconfig == str(
            tmp_path / "kubeconfigs" / f"{name}.conf"
        )
    # each kubelet's server speaks TLS and asks the apiserver about every request, so
    # /healthz without credentials is on a free health port of its own (several share 10248)
    assert all(k.healthz_port == 0 for k in kubelets)
    assert [(k.tls_cert_file, k.tls_private_key_file) for k in kubelets] == [
        (tmp_path / "pki" / f"kubelet-{n}.crt", tmp_path / "pki" / f"kubelet-{n}.key")
        for n in ("node1", "node2", "node3")
    ]
    assert all(k.client_ca_file == tmp_path / "pki" / "ca.crt" for k in kubelets)
    assert all(k.authentication_token_webhook for k in kubelets)
    assert all(k.authorization_mode == "Webhook" for k in kubelets)
    assert (api.kubelet_client_certificate, api.kubelet_certificate_authority) == (
        tmp_path / "pki" / "apiserver-kubelet-client.crt",
        tmp_path / "pki" / "ca.crt",
    )


def test_the_plan_is_the_argv_source(tmp_path: Path) -> None:
    """``up`` builds no command line by hand: each is ``kubelite.commands``' for its child."""
    opts = up.parse_options(["--state-dir", str(tmp_path), "--nodes", "1", "-v", "4"])
    api, cm, sched, proxy, dns, node1 = up.plan(opts)
    service_range = up.cluster_service_cidr(opts.state_dir)
    pki_dir, kubeconfigs = opts.state_dir / "pki", opts.state_dir / "kubeconfigs"
    assert api.argv == commands.apiserver(
        store=opts.store, state_dir=opts.state_dir, bind_address="127.0.0.1", port=8080,
        secure_bind_address="127.0.0.1", secure_port=6443,
        tls_cert_file=pki_dir / "apiserver.crt", tls_private_key_file=pki_dir / "apiserver.key",
        client_ca_file=pki_dir / "ca.crt", service_account_signing_key_file=pki_dir / "sa.key",
        kubelet_client_certificate=pki_dir / "apiserver-kubelet-client.crt",
        kubelet_client_key=pki_dir / "apiserver-kubelet-client.key",
        kubelet_certificate_authority=pki_dir / "ca.crt",
        service_cluster_ip_range=service_range, log_level="INFO", verbosity=4,
    ).python()  # fmt: skip
    assert (
        cm.argv
        == commands.controller_manager(
            kubeconfig=kubeconfigs / "controller-manager.conf",
            healthz_port=10257,
            root_ca_file=pki_dir / "ca.crt",
            log_level="INFO",
            verbosity=4,
        ).python()
    )
    assert (
        sched.argv
        == commands.scheduler(
            kubeconfig=kubeconfigs / "scheduler.conf",
            healthz_port=10259,
            log_level="INFO",
            verbosity=4,
        ).python()
    )
    assert (
        proxy.argv
        == commands.proxy(
            kubeconfig=kubeconfigs / "proxy.conf", hostname_override=["node1"], healthz_port=10256, log_level="INFO",
            verbosity=4,
        ).python()
    )  # fmt: skip
    assert (
        dns.argv
        == commands.dns(
            kubeconfig=kubeconfigs / "dns.conf", cluster_dns_ip=up.cluster_dns_ip(service_range),
            dns_port=53 if os.geteuid() == 0 else 0,
            healthz_port=8181, log_level="INFO", verbosity=4,
        ).python()
    )  # fmt: skip
    assert node1.argv[:3] == commands.kubelet().python()[:3]
    assert _parse(node1.argv).verbosity == 4


def test_ready_lines_give_the_banner_its_ports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    supervisor = up.Supervisor(up.parse_options(["--state-dir", str(tmp_path), "--nodes", "1"]))
    api, cm, sched, _proxy, _dns, node1 = supervisor.children
    lines = [
        (api, "kubelite: apiserver api listening on http://127.0.0.1:41000"),
        (api, "kubelite: apiserver ready"),
        (sched, "kubelite: scheduler health listening on http://127.0.0.1:41001"),
        (node1, "kubelite: kubelet server listening on http://127.0.0.1:41002"),
        (node1, "kubelite: kubelet ready"),
        (cm, "kubelite: scheduler health listening on http://127.0.0.1:1"),  # not its component
    ]
    for child, line in lines:
        supervisor._note(child, line)
    assert api.ready.is_set() and node1.ready.is_set() and not sched.ready.is_set()
    assert cm.endpoints == {}
    supervisor._banner(tmp_path / "kubeconfig")
    out = capsys.readouterr().out
    assert "apiserver           api     http://127.0.0.1:41000\n" in out
    assert "scheduler           health  http://127.0.0.1:41001/healthz\n" in out
    assert "node1               server  http://127.0.0.1:41002/healthz\n" in out


def test_pod_cidr_must_stay_on_loopback_and_fit_the_nodes() -> None:
    with pytest.raises(ValueError, match="stays on loopback"):
        up.node_pod_cidrs("203.0.113.0/24", 2)
    with pytest.raises(ValueError, match="too small"):
        up.node_pod_cidrs("127.9.9.0/30", 4)
    assert up.node_pod_cidrs("127.50.0.0/24", 1) == ["127.50.0.0/24"]


def test_help_documents_every_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        up.build_parser().parse_args(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for action in up.build_parser()._actions:
        for flag in action.option_strings:
            assert flag in text
        assert action.help, action.option_strings


async def test_a_child_with_a_usage_error_stops_up_instead_of_restarting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    supervisor = up.Supervisor(up.parse_options(["--state-dir", str(tmp_path), "--no-color"]))
    child = up.Child(
        name="apiserver",
        kind="apiserver",
        argv=[sys.executable, "-c", "import sys; print('bad flag'); sys.exit(2)"],
        colour="36",
    )
    await asyncio.wait_for(supervisor._run_child(child), 30)
    assert supervisor.exit_code == 2 and child.restarts == 0
    out = capsys.readouterr().out
    assert "apiserver          | bad flag" in out
    assert "usage error (code 2)" in out


async def test_a_child_that_cannot_listen_stops_up_instead_of_restarting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit code 3 (``component.errors.CannotListen``): the port is taken; a restart would
    only fail the same way, at any time, so ``up`` stops and says why."""
    supervisor = up.Supervisor(up.parse_options(["--state-dir", str(tmp_path), "--no-color"]))
    child = up.Child(
        name="scheduler",
        kind="scheduler",
        argv=[sys.executable, "-c", "import sys; sys.exit(3)"],
        colour="36",
    )
    await asyncio.wait_for(supervisor._run_child(child), 30)
    assert supervisor.exit_code == 3 and child.restarts == 0
    assert "cannot listen on its port (code 3" in capsys.readouterr().out


def _kubelet_cidrs(state_dir: Path, *flags: str) -> list[str]:
    opts = up.parse_options(["--state-dir", str(state_dir), *flags])
    return [_parse(c.argv).pod_cidr for c in up.plan(opts) if c.kind == "kubelet"]


def test_clusters_in_different_state_dirs_get_disjoint_pod_ranges(tmp_path: Path) -> None:
    """Two ``kubelite up`` on one host: each cluster's pods get addresses of their own."""
    first = _kubelet_cidrs(tmp_path / "one", "--nodes", "3")
    second = _kubelet_cidrs(tmp_path / "two", "--nodes", "3")
    ranges = [IPv4Network(c) for c in first + second]
    assert all(r.subnet_of(IPv4Network("127.0.0.0/8")) for r in ranges)
    assert not any(r.subnet_of(IPv4Network("127.0.0.0/16")) for r in ranges)  # the host's own
    for i, a in enumerate(ranges):
        for b in ranges[i + 1 :]:
            assert not a.overlaps(b), (first, second)


def test_the_same_state_dir_gets_the_same_pod_ranges_on_every_start(tmp_path: Path) -> None:
    """Resumed pods keep their IPs: the ranges depend on the directory, not on chance, and a
    node added later leaves the others' ranges as they were."""
    two = _kubelet_cidrs(tmp_path / "c", "--nodes", "2")
    assert _kubelet_cidrs(tmp_path / "c", "--nodes", "2") == two
    assert _kubelet_cidrs(tmp_path / "x" / ".." / "c", "--nodes", "2") == two
    assert _kubelet_cidrs(tmp_path / "c", "--nodes", "3")[:2] == two
    assert all(IPv4Network(c).prefixlen == 24 for c in two)


def test_an_explicit_pod_cidr_still_overrides_the_derived_ranges(tmp_path: Path) -> None:
    assert _kubelet_cidrs(tmp_path, "--nodes", "2", "--pod-cidr", "127.140.0.0/16") == [
        "127.140.0.0/17", "127.140.128.0/17"
    ]  # fmt: skip


def test_without_a_secure_port_the_components_use_the_plain_port(tmp_path: Path) -> None:
    opts = up.parse_options(["--state-dir", str(tmp_path), "--nodes", "1", "--secure-port", "-1"])
    for child in up.plan(opts)[1:]:
        args = _parse(child.argv)
        assert args.server == ["http://127.0.0.1:8080"] and args.kubeconfig is None, child.name


def test_closing_both_apiserver_ports_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        up.parse_options(["--state-dir", str(tmp_path), "--port", "-1", "--secure-port", "-1"])
    assert exc.value.code == 2
    closed = up.parse_options(["--state-dir", str(tmp_path), "--port", "-1"])
    assert _parse(up.plan(closed)[0].argv).insecure_port == -1
