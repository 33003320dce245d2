"""Every component's ``--help`` names the same thing the same way: the shared flags are present
in each, with the same spelling and the same help text (``component.flags``)."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from kubelite.commands import MODULES

ROOT = Path(__file__).resolve().parents[2]

EVERYWHERE = ["--log-level", "-v", "--v"]
CLIENTS = ["--server", "--master", "--kubeconfig", "--context", "--kube-api-qps"]
HEALTH = ["--healthz-bind-address", "--healthz-port"]
LEADERS = [
    "--leader-elect",
    "--no-leader-elect",
    "--leader-elect-lease-duration",
    "--leader-elect-renew-deadline",
    "--leader-elect-retry-period",
    "--leader-elect-resource-name",
    "--leader-elect-resource-namespace",
]
SHARED = {
    "apiserver": EVERYWHERE,
    "scheduler": EVERYWHERE + CLIENTS + HEALTH + LEADERS,
    "controller-manager": EVERYWHERE + CLIENTS + HEALTH + LEADERS,
    "kubelet": EVERYWHERE + CLIENTS + HEALTH,
    "proxy": EVERYWHERE + CLIENTS + HEALTH,
    "dns": EVERYWHERE + CLIENTS + HEALTH,
    "node": [],  # passes every other flag to its kubelet (checked there) and its proxy
    "certs": [],  # a tool run once, not a component: no log, client or health flags
    "etcd": [],  # becomes etcd itself (member) or is a tool (snapshot): etcd's own flags
    "front": EVERYWHERE + HEALTH,  # relays bytes: not an API client
}


def _parser(component: str) -> argparse.ArgumentParser:
    """``build_parser`` of the component's ``main`` module (a package's) or of the module."""
    name = MODULES[component]
    package = importlib.import_module(name)
    module = importlib.import_module(f"{name}.main") if hasattr(package, "__path__") else package
    parser: argparse.ArgumentParser = module.build_parser()
    return parser


def _actions(component: str) -> dict[str, argparse.Action]:
    return {flag: a for a in _parser(component)._actions for flag in a.option_strings}


@pytest.mark.parametrize("component", sorted(MODULES))
def test_help_lists_the_shared_flags(component: str) -> None:
    """The real ``--help`` of the real command, as a person runs it."""
    done = subprocess.run(
        [sys.executable, "-m", MODULES[component], "--help"],
        capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for flag in SHARED[component]:
        assert f"{flag} " in done.stdout or f"{flag}," in done.stdout, (component, flag)


@pytest.mark.parametrize("flag", sorted({f for flags in SHARED.values() for f in flags}))
def test_a_shared_flag_means_the_same_in_every_component(flag: str) -> None:
    having = [c for c in sorted(SHARED) if flag in SHARED[c]]
    actions = [_actions(c)[flag] for c in having]
    first = actions[0]
    for component, action in zip(having[1:], actions[1:], strict=True):
        assert action.option_strings == first.option_strings, (component, flag)
        assert action.help == first.help, (component, flag)
        assert action.metavar == first.metavar, (component, flag)
        assert action.type == first.type, (component, flag)
        assert action.dest == first.dest, (component, flag)


def test_no_component_spells_a_shared_concept_its_own_way() -> None:
    """Old per-component spellings are gone from --help (``-v`` as a flag without a value,
    ``--verbose``) and port 0 never means "disabled"."""
    for component in MODULES:
        actions = _actions(component)
        assert "--verbose" not in actions, component
        if "-v" in SHARED[component]:
            assert actions["-v"].nargs is None and actions["-v"].dest == "verbosity", component
        for flag, action in actions.items():
            if flag.endswith("port") and action.help not in (None, argparse.SUPPRESS):
                assert "0 disables" not in action.help, (component, flag)
