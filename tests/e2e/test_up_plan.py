"""``kubelite up``'s plan and supervisor rules, without starting a cluster.

Every command line ``plan()`` produces must parse with that component's own parser (a flag
spelled the way one component likes and another rejects stops the whole cluster); the
per-node flags must be what each kubelet needs; a child that exits at once with a usage error
stops ``up`` instead of being restarted forever; ``--help`` documents every flag.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from pathlib import Path

import pytest

from kubelite import up
from kubelite.cli import COMMANDS

MODULE_OF = {
    "services.apiserver": COMMANDS["apiserver"],
    "services.scheduler": COMMANDS["scheduler"],
    "services.controller_manager": COMMANDS["controller-manager"],
    "services.kubelet": COMMANDS["kubelet"],
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
        "apiserver", "controller-manager", "scheduler", "node1", "node2", "node3"
    ]  # fmt: skip
    for child in children:
        args = _parse(child.argv)
        assert str(args.log_level).upper() == level.upper(), child.name
    api = _parse(children[0].argv)
    assert api.insecure_port == 8080 and api.store == f"sqlite:///{tmp_path / 'kubelite.db'}"
    assert _parse(children[1].argv).healthz_port == 10257
    assert _parse(children[2].argv).port == 10259
    kubelets = [_parse(c.argv) for c in children[3:]]
    assert [k.node_name for k in kubelets] == ["node1", "node2", "node3"]
    assert [k.port for k in kubelets] == [10250, 10251, 10252]
    assert [k.pod_cidr for k in kubelets] == [
        "127.140.0.0/18", "127.140.64.0/18", "127.140.128.0/18"
    ]  # fmt: skip
    assert {str(k.state_dir) for k in kubelets} == {
        str(tmp_path / "kubelets" / n) for n in ("node1", "node2", "node3")
    }
    assert all(k.stop_pods_on_exit and k.server == "http://127.0.0.1:8080" for k in kubelets)


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
