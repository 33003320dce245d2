"""Stock kubectl with the workload kinds: ``create job``, ``create cronjob``, ``create job
--from=cronjob/...``, ``create pdb`` (protobuf bodies), ``apply -f`` of a DaemonSet and a
StatefulSet, ``scale sts`` through the scale subresource, ``get job,cj,ds,sts,pdb,
controllerrevisions`` with Kubernetes' columns, and a bad schedule refused in kubectl's words."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests import factories
from tests.kubectl.harness import Kubectl

pytestmark = pytest.mark.kubectl


def get_json(kubectl: Kubectl, *args: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(kubectl("get", *args, "-o", "json").stdout)
    return loaded


def tables(output: str) -> dict[str, list[list[str]]]:
    """``kubectl get a,b`` output: each block's rows (cells split on 2+ spaces), by the kind
    prefix of its first row's name (``job.batch``), header first."""
    blocks: dict[str, list[list[str]]] = {}
    for block in output.strip().split("\n\n"):
        rows = [re.split(r"\s{2,}", line.strip()) for line in block.strip().splitlines()]
        blocks[rows[1][0].split("/")[0]] = rows
    return blocks


def test_create_job_cronjob_job_from_cronjob_and_pdb(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "batch")
    ns = ("-n", "batch")
    done = kubectl("create", "job", "x", "--image=busybox", *ns, "--", "echo", "hi")
    assert (done.stdout.strip(), done.stderr) == ("job.batch/x created", "")
    kubectl(
        "create", "cronjob", "c", "--image=busybox", "--schedule=*/1 * * * *", *ns,
        "--", "echo", "hi",
    )  # fmt: skip
    done = kubectl("create", "job", "--from=cronjob/c", "j2", *ns)
    assert done.stdout.strip() == "job.batch/j2 created"
    done = kubectl("create", "pdb", "p", "--selector=app=x", "--min-available=1", *ns)
    assert done.stdout.strip() == "poddisruptionbudget.policy/p created"

    job = get_json(kubectl, "job", "x", *ns)
    uid = job["metadata"]["uid"]
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["echo", "hi"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    cron = get_json(kubectl, "cronjob", "c", *ns)
    from_cron = get_json(kubectl, "job", "j2", *ns)
    assert from_cron["metadata"]["annotations"] == {"cronjob.kubernetes.io/instantiate": "manual"}
    [owner] = from_cron["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("CronJob", "c", cron["metadata"]["uid"])
    assert get_json(kubectl, "pdb", "p", *ns)["spec"] == {
        "minAvailable": 1,
        "selector": {"matchLabels": {"app": "x"}},
    }

    got = tables(kubectl("get", "job,cj,pdb", *ns).stdout)
    assert got["job.batch"][0] == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert [r[:3] for r in got["job.batch"][1:]] == [
        ["job.batch/j2", "Running", "0/1"],
        ["job.batch/x", "Running", "0/1"],
    ]
    assert got["cronjob.batch"][0] == [
        "NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST SCHEDULE", "AGE",
    ]  # fmt: skip
    assert got["cronjob.batch"][1][:6] == [
        "cronjob.batch/c", "*/1 * * * *", "<none>", "False", "0", "<none>",
    ]  # fmt: skip
    assert got["poddisruptionbudget.policy"][0] == [
        "NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE",
    ]  # fmt: skip
    assert got["poddisruptionbudget.policy"][1][:4] == [
        "poddisruptionbudget.policy/p", "1", "N/A", "0",
    ]  # fmt: skip
    wide = kubectl("get", "job", "x", "-o", "wide", *ns).stdout.splitlines()
    assert re.split(r"\s{2,}", wide[0].strip())[-3:] == ["CONTAINERS", "IMAGES", "SELECTOR"]
    assert wide[1].split()[-3:] == ["x", "busybox", f"batch.kubernetes.io/controller-uid={uid}"]


def test_a_bad_schedule_is_refused_in_kubernetes_words(kubectl: Kubectl) -> None:
    done = kubectl(
        "create", "cronjob", "bad", "--image=busybox", "--schedule=x", "--", "true", check=False
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        'error: failed to create cronjob: CronJob.batch "bad" is invalid: spec.schedule: '
        'Invalid value: "x": expected exactly 5 fields, found 1: [x]'
    )


def test_apply_daemonset_and_statefulset_then_scale_and_get(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "apps")
    ns = ("-n", "apps")
    assert kubectl.apply(factories.daemon_set("agent"), *ns).stdout.strip() == (
        "daemonset.apps/agent created"
    )
    web = factories.stateful_set("web", claim="data")
    assert kubectl.apply(web, *ns).stdout.strip() == "statefulset.apps/web created"
    web["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.27"
    assert kubectl.apply(web, *ns).stdout.strip() == "statefulset.apps/web configured"
    done = kubectl("scale", "sts", "web", "--replicas=3", *ns)
    assert done.stdout.strip() == "statefulset.apps/web scaled"
    sts = get_json(kubectl, "sts", "web", *ns)
    assert (sts["spec"]["replicas"], sts["metadata"]["generation"]) == (3, 3)
    [claim] = sts["spec"]["volumeClaimTemplates"]
    assert (claim["spec"]["volumeMode"], claim["status"]) == ("Filesystem", {"phase": "Pending"})

    revision = {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": "web-1",
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "name": "web",
                    "uid": sts["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "data": {"spec": {"template": web["spec"]["template"]}},
        "revision": 1,
    }
    kubectl.apply(revision, *ns)

    got = tables(kubectl("get", "ds,sts,controllerrevisions", *ns).stdout)
    assert got["daemonset.apps"][0] == [
        "NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE SELECTOR", "AGE",
    ]  # fmt: skip
    assert got["daemonset.apps"][1][:7] == [
        "daemonset.apps/agent",
        "0",
        "0",
        "0",
        "0",
        "0",
        "<none>",
    ]
    assert got["statefulset.apps"][0] == ["NAME", "READY", "AGE"]
    assert got["statefulset.apps"][1][:2] == ["statefulset.apps/web", "0/3"]
    assert got["controllerrevision.apps"][0] == ["NAME", "CONTROLLER", "REVISION", "AGE"]
    assert got["controllerrevision.apps"][1][:3] == [
        "controllerrevision.apps/web-1", "statefulset.apps/web", "1",
    ]  # fmt: skip
    # every one of them is in the "all" category but the revision, as in Kubernetes
    names = kubectl("get", "all", *ns, "-o", "name").stdout.split()
    assert sorted(names) == ["daemonset.apps/agent", "statefulset.apps/web"]
