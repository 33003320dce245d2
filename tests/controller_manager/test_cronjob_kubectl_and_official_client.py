"""The CronJob controller in a real controller-manager process (wall clock), driven by the stock
kubectl and read by the official client's BatchV1Api: ``kubectl create cronjob``, a run the
controller starts, ``kubectl get cj`` with LAST SCHEDULE and ACTIVE filled, ``kubectl create
job --from=cronjob/c`` (made client side; the controller reports it as UnexpectedJob, as
Kubernetes' does).

Nothing is waited for on the wall clock: the CronJob runs ``@yearly`` and the test writes its
``status.lastScheduleTime`` two years back, as if the controller-manager had been down since; the
controller starts the most recent missed activation (this year's 1 January, 00:00 UTC) at once,
and the next one is months away, so exactly one run exists while the test looks.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import pytest
from kubernetes import client as k8s

from api.meta import format_time
from kubelite.testing.waiting import Watcher
from services.controller_manager.cronjob import CRONJOBS, JOBS
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import EVENTS, Obj
from tests.kubectl.harness import Kubectl

pytestmark = [pytest.mark.e2e, pytest.mark.kubectl, pytest.mark.timeout(180)]


def active(cronjob: Obj | None) -> list[str]:
    return [r["name"] for r in ((cronjob or {}).get("status") or {}).get("active") or []]


def columns(table: str, name: str) -> dict[str, str]:
    """One row of kubectl's table output by column header; a column starts where the header
    has a word after two spaces (a header such as ``LAST SCHEDULE`` holds a single one)."""
    header, *rows = table.splitlines()
    starts = [0] + [
        i for i in range(2, len(header)) if header[i] != " " and header[i - 2 : i] == "  "
    ]
    row = next(r for r in rows if r.split()[0] == name)
    bounds = [*starts, max(len(header), len(row))]
    return {header[a:b].strip(): row[a:b].strip() for a, b in pairwise(bounds)}


async def test_kubectl_creates_a_cronjob_that_runs_and_shows_it(
    cluster: Cluster, tmp_path: Path
) -> None:
    kubectl = Kubectl.on(cluster.api.url, workdir=tmp_path)

    async def run(*args: str) -> str:
        return (await asyncio.to_thread(kubectl, *args)).stdout

    async with (
        Watcher(cluster.client, CRONJOBS, namespace="default") as cronjobs,
        Watcher(cluster.client, EVENTS, namespace="default") as events,
    ):
        await run("create", "cronjob", "c", "--image=busybox", "--schedule=@yearly",
                  "--", "echo", "hi")  # fmt: skip
        now = datetime.now(UTC)
        two_years_ago = now - timedelta(days=731)
        await cluster.client.patch(
            CRONJOBS, "c", {"status": {"lastScheduleTime": format_time(two_years_ago)}},
            namespace="default", subresource="status",
        )  # fmt: skip
        await cronjobs.wait_until(
            lambda _o: len(active(cronjobs.get("default/c"))) == 1, what="a run started"
        )
        run_name = active(cronjobs.get("default/c"))[0]
        new_year = datetime(now.year, 1, 1, tzinfo=UTC)
        assert run_name == f"c-{int(new_year.timestamp()) // 60}"
        assert cronjobs.get("default/c")["status"]["lastScheduleTime"] == format_time(new_year)

        row = columns(await run("get", "cj", "c"), "c")
        assert row["SCHEDULE"] == "@yearly"
        assert row["SUSPEND"] == "False"
        assert row["ACTIVE"] == "1"
        assert row["LAST SCHEDULE"] not in ("", "<none>", "<invalid>")

        await run("create", "job", "--from=cronjob/c", "manual-1")
        await events.wait_until(
            lambda o: any(
                e["reason"] == "UnexpectedJob"
                and e["message"]
                == "Saw a job that the controller did not create or forgot: manual-1"
                for e in o
            ),
            what="UnexpectedJob for manual-1",
        )
        created = await events.wait_until(
            lambda o: any(e["message"] == f"Created job {run_name}" for e in o),
            what="SuccessfulCreate",
        )
        about_c = [e for e in created if e["involvedObject"]["kind"] == "CronJob"]
        assert {e["source"]["component"] for e in about_c} == {"cronjob-controller"}

    manual = await cluster.client.get(JOBS, "manual-1", namespace="default")
    assert manual["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
    assert manual["metadata"]["ownerReferences"][0]["name"] == "c"

    batch = k8s.BatchV1Api(k8s.ApiClient(k8s.Configuration(host=cluster.api.url)))
    cj = await asyncio.to_thread(batch.read_namespaced_cron_job_status, "c", "default")
    assert isinstance(cj, k8s.V1CronJob)
    assert isinstance(cj.status.last_schedule_time, datetime)
    assert [ref.name for ref in cj.status.active] == [run_name]
    assert cj.status.active[0].kind == "Job"
    listed = await asyncio.to_thread(batch.list_namespaced_cron_job, "default")
    assert [c.metadata.name for c in listed.items] == ["c"]
    jobs = await asyncio.to_thread(batch.list_namespaced_job, "default")
    by_name = {j.metadata.name: j for j in jobs.items}
    assert set(by_name) == {run_name, "manual-1"}
    owner = by_name[run_name].metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.controller) == ("CronJob", "c", True)
    await asyncio.to_thread(
        batch.patch_namespaced_cron_job, "c", "default", {"spec": {"suspend": True}}
    )
    row = columns(await run("get", "cj", "c"), "c")
    assert row["SUSPEND"] == "True"
