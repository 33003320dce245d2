"""`kubectl edit`: kubectl GETs the object, hands it to $KUBE_EDITOR as YAML, and PATCHes what
the editor changed (a strategic merge patch for built-in kinds); an untouched file is no edit.

The "editor" here is a one-line sed script, so the whole round trip is the real binary's.
"""

from __future__ import annotations

import json
import re
import stat
import subprocess
from pathlib import Path

import pytest

from tests import factories
from tests.kubectl.harness import KUBECTL_TIMEOUT_S, Kubectl

pytestmark = pytest.mark.kubectl


def edit(kubectl: Kubectl, editor: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**kubectl.env(), "KUBE_EDITOR": str(editor)}
    cmd = [kubectl.binary, f"--server={kubectl.server}", f"--cache-dir={kubectl.cache_dir}"]
    return subprocess.run(
        [*cmd, "edit", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=kubectl.workdir,
        timeout=KUBECTL_TIMEOUT_S,
        check=False,
    )


def script(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_edit_patches_what_the_editor_changed(kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl.apply(factories.namespace("editing"))
    kubectl.apply(
        factories.sleeper("edited", image="busybox:1.36", labels={"app": "edited", "tier": "old"}),
        "-n",
        "editing",
    )
    editor = script(
        tmp_path / "editor.sh",
        "sed -i -e 's/tier: old/tier: new/' -e 's/image: busybox:1.36/image: busybox:1.37/' \"$1\"",
    )
    done = edit(kubectl, editor, "pod/edited", "-n", "editing")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pod/edited edited"
    pod = json.loads(kubectl("get", "pod", "edited", "-n", "editing", "-o", "json").stdout)
    assert pod["metadata"]["labels"]["tier"] == "new"
    assert pod["spec"]["containers"][0]["image"] == "busybox:1.37"


def test_edit_with_no_change_is_cancelled(kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl.apply(factories.namespace("not-editing"))
    kubectl.apply(factories.sleeper("untouched", image="busybox:1.36"), "-n", "not-editing")
    before = kubectl(
        "get", "pod", "untouched", "-n", "not-editing", "-o", "jsonpath={.metadata.resourceVersion}"
    ).stdout
    done = edit(kubectl, script(tmp_path / "noop.sh", "true"), "pod/untouched", "-n", "not-editing")
    assert done.returncode == 0, done.stderr
    assert "Edit cancelled, no changes made." in done.stderr
    after = kubectl(
        "get", "pod", "untouched", "-n", "not-editing", "-o", "jsonpath={.metadata.resourceVersion}"
    ).stdout
    assert after == before


def test_edit_to_an_invalid_object_shows_the_servers_reason(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    kubectl.apply(factories.namespace("breaking"))
    kubectl.apply(factories.sleeper("broken", image="busybox:1.36"), "-n", "breaking")
    editor = script(
        tmp_path / "bad.sh", "sed -i -e 's/restartPolicy: Always/restartPolicy: Sometimes/' \"$1\""
    )
    done = edit(kubectl, editor, "pod/broken", "-n", "breaking")
    assert done.returncode == 1
    assert 'error: pods "broken" is invalid' in done.stderr, done.stderr
    # kubectl keeps the user's copy, headed by the server's field causes as comments
    match = re.search(r'A copy of your changes has been stored to "([^"]+)"', done.stderr)
    assert match, done.stderr
    saved = Path(match.group(1))
    try:
        head = saved.read_text()
    finally:
        saved.unlink()
    assert '# pods "broken" was not valid:' in head
    assert '# * spec.restartPolicy: Unsupported value: "Sometimes"' in head
    assert "# * spec: Forbidden: pod updates may not change fields" in head
