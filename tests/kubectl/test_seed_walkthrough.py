"""The seed's kubectl walkthrough, as one scripted session of the stock kubectl against a real
cluster of separate processes (apiserver over SQLite, scheduler, controller-manager, two
kubelets with the process runtime: ``tests/e2e/cluster.py``, the cluster ``kubelite up`` runs).

The session does what the seed's reader does, with the seed's own YAML (fixed to be valid):
label node1 and node2, apply the nodeName pod and the nodeSelector pod, see each on its node with
``get pods -o wide`` and the labels with ``get nodes --show-labels``; the seed's selector nobody
matches leaves a pod Pending and ``describe`` shows its FailedScheduling event; ``logs`` of the
nginx pod and of a failed pod; ``exec -- sh -c 'echo hi'`` and ``exec -it`` under a real
pseudo-terminal; ``delete -f`` returns once the pod (and its process) is gone. Beside it, in the
same session: ``get -w`` printing the pod's transitions, ``get events``, ``-o json|yaml``,
``-A``, ``scale rc`` to 3, ``set image`` then ``rollout status`` of a Deployment,
``api-resources``, and Kubernetes' own error output.

It runs three times on one cluster (module-scoped; each run in a namespace of its own, the node
labels removed at the end): with the ``kubectl`` on the PATH (the dispatcher, which asks
``/version`` and picks kubectl 1.32), then with ``kubectl.1.30`` and ``kubectl.1.33`` from the
folder the dispatcher links to. kubectl gets a private ``--cache-dir`` and a kubeconfig of its
own whose context names the run's namespace, so the commands read as the seed writes them.
kubectl runs as a subprocess of the test's event loop, never blocking it (the cluster's output
pumps and informers run on that loop).

Skips, loudly, only when no ``kubectl`` is installed at all (or one pinned minor is missing).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pty
import re
import shutil
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from api.registry import REGISTRY
from api.schema_validation import unknown_fields as unknown_to_schema
from services.apiserver.fieldvalidation import unknown_fields
from tests.e2e.cluster import NODES, Cluster, http_get, running, started_cluster
from tests.kubectl.harness import kubectl_binary

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.e2e,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.timeout(300),
]

NO_KUBECTL = (
    "\n" + "!" * 78 + "\n"
    "!! NO kubectl ON THE PATH: the seed walkthrough against stock kubectl DID NOT RUN.\n"
    "!! Install kubectl (1.30+) to check issue 8's promise.\n" + "!" * 78
)
KUBECTL_TIMEOUT = 90.0
"""One kubectl command; ``rollout status`` waits for a rolling update of real processes."""
WITHIN = 60.0
"""Waiting for a pod, an event or a watch line: the machine's 2 cores are shared and busy."""

# ---- the seed's manifests, made valid -----------------------------------------------------

NODE_NAME_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: pod-example
  labels:
    app: nginx
spec:
  nodeName: node1
  terminationGracePeriodSeconds: 5
  containers:
  - name: nginx
    image: nginx:1.15
"""

NODE_SELECTOR_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: pod-selector
  labels:
    app: nginx
spec:
  nodeSelector:
    cc: cxk
  containers:
  - name: nginx
    image: nginx:1.15
"""

# the seed's own nodeSelector ("lc: fuheinan"), which no node carries
UNMATCHED_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: pod-nowhere
  labels:
    app: nginx
spec:
  nodeSelector:
    lc: fuheinan
  containers:
  - name: nginx
    image: nginx:1.15
"""

FAILING_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: pod-failing
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "echo starting; echo 'cannot reach db' >&2; exit 1"]
"""

RC = """\
apiVersion: v1
kind: ReplicationController
metadata:
  name: web
spec:
  replicas: 1
  selector:
    app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: nginx
        image: nginx:1.15
        ports:
        - containerPort: 80
"""

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: frontend
spec:
  replicas: 2
  selector:
    matchLabels:
      app: frontend
  template:
    metadata:
      labels:
        app: frontend
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: nginx
        image: nginx:1.15
"""


# ---- kubectl as a subprocess of the loop ----------------------------------------------------


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str


@dataclass(frozen=True)
class Kubectl:
    """One kubectl binary with its own kubeconfig (context namespace = the run's) and cache."""

    binary: str
    minor: str
    workdir: Path
    cluster: Cluster

    def env(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(self.workdir),
            "KUBECONFIG": str(self.workdir / "kubeconfig"),
            "TERM": "xterm",
        }

    def argv(self, args: tuple[str, ...]) -> list[str]:
        return [self.binary, f"--cache-dir={self.workdir / 'kube-cache'}", *args]

    async def run(self, *args: str, stdin: str | None = None) -> Ran:
        proc = await asyncio.create_subprocess_exec(
            *self.argv(args),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env(),
            cwd=self.workdir,
        )
        try:
            out, err = await asyncio.wait_for(
                proc.communicate(stdin.encode() if stdin is not None else None), KUBECTL_TIMEOUT
            )
        except TimeoutError:
            proc.kill()
            await proc.wait()
            self.fail(f"kubectl {' '.join(args)} did not finish in {KUBECTL_TIMEOUT}s")
        return Ran(proc.returncode or 0, out.decode(), err.decode())

    async def __call__(self, *args: str, stdin: str | None = None) -> str:
        """Run kubectl, expect success and an empty stderr; its stdout."""
        ran = await self.run(*args, stdin=stdin)
        if ran.code != 0 or ran.err:
            self.fail(f"kubectl {' '.join(args)} exited {ran.code}\n{ran.out}\n{ran.err}")
        return ran.out

    async def fails(self, *args: str) -> Ran:
        ran = await self.run(*args)
        if ran.code == 0:
            self.fail(f"kubectl {' '.join(args)} succeeded:\n{ran.out}")
        return ran

    async def start(self, *args: str) -> Streaming:
        """A long-running kubectl (``get -w``, ``logs -f``) whose output lines are awaited."""
        proc = await asyncio.create_subprocess_exec(
            *self.argv(args),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env(),
            cwd=self.workdir,
            start_new_session=True,  # the dispatcher's child goes with it on stop()
        )
        return Streaming(proc, " ".join(args))

    async def tty(self, *args: str, keys: list[bytes]) -> tuple[int, str]:
        """Run kubectl with a pseudo-terminal as stdin/stdout/stderr; type each of ``keys``
        once the previous answer arrived. (exit code, everything the terminal showed)."""
        controller, terminal = pty.openpty()
        proc = await asyncio.create_subprocess_exec(
            *self.argv(args),
            stdin=terminal,
            stdout=terminal,
            stderr=terminal,
            env=self.env(),
            cwd=self.workdir,
            start_new_session=True,
        )
        os.close(terminal)
        loop = asyncio.get_running_loop()
        chunks: asyncio.Queue[bytes] = asyncio.Queue()

        def readable() -> None:
            try:
                data = os.read(controller, 4096)
            except OSError:  # EIO: every end of the terminal is closed
                data = b""
            if not data:
                loop.remove_reader(controller)
            chunks.put_nowait(data)

        os.set_blocking(controller, False)
        loop.add_reader(controller, readable)
        shown = b""
        try:
            async with asyncio.timeout(KUBECTL_TIMEOUT):
                for key in keys:
                    seen = len(shown)
                    while len(shown) == seen:  # wait for the remote side to answer
                        data = await chunks.get()
                        if not data:
                            self.fail(f"kubectl {' '.join(args)} ended early: {shown!r}")
                        shown += data
                    os.write(controller, key)
                while data := await chunks.get():
                    shown += data
                await proc.wait()
        except TimeoutError:
            proc.kill()
            await proc.wait()
            self.fail(f"kubectl {' '.join(args)} under a tty hung; the terminal showed {shown!r}")
        finally:
            loop.remove_reader(controller)
            os.close(controller)
        return proc.returncode or 0, shown.decode(errors="replace")

    def fail(self, message: str) -> Any:
        tails = "\n".join(f"===== {c.name}\n{c.tail(15)}" for c in self.cluster.components.values())
        pytest.fail(f"{message}\npods: {self.cluster.summary()}\n{tails}")


class Streaming:
    def __init__(self, proc: asyncio.subprocess.Process, what: str) -> None:
        self.proc, self.what = proc, what
        self.lines: list[str] = []

    async def until(self, predicate: Callable[[str], bool], *, within: float = WITHIN) -> str:
        """Read lines until one satisfies ``predicate``; that line."""
        assert self.proc.stdout is not None
        try:
            async with asyncio.timeout(within):
                while raw := await self.proc.stdout.readline():
                    line = raw.decode().rstrip("\n")
                    self.lines.append(line)
                    if predicate(line):
                        return line
        except TimeoutError:
            pass
        pytest.fail(f"kubectl {self.what} never printed the awaited line; it printed {self.lines}")

    async def watching(self, *, within: float = WITHIN) -> None:
        """Wait until a ``get -w -v=6`` logs its watch request's answer: from then on every
        change reaches it as a watch event, none is folded into its initial list."""
        assert self.proc.stderr is not None
        async with asyncio.timeout(within):
            while raw := await self.proc.stderr.readline():
                # 1.30-1.32 log "GET URL 200 OK", 1.33 logs url="URL" status="200 OK"
                if b"watch=true" in raw and b"200 OK" in raw:
                    return
        pytest.fail(f"kubectl {self.what} never started its watch; it printed {self.lines}")

    async def stop(self) -> str:
        """Stop it (its whole session); what it printed on stderr."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        _, err = await self.proc.communicate()
        return err.decode()


def columns(table: str) -> list[dict[str, str]]:
    """kubectl's column output as dicts (header words as keys; single-word cells only)."""
    header, *rows = table.splitlines()
    starts = [m.start() for m in re.finditer(r"\S+(?: \S+)*", header)]
    names = [header[s:e].strip() for s, e in zip(starts, [*starts[1:], None], strict=True)]
    out = []
    for row in rows:
        cells = [row[s:e].strip() for s, e in zip(starts, [*starts[1:], None], strict=True)]
        out.append(dict(zip(names, cells, strict=True)))
    return out


# ---- the cluster, once per module -----------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def seed_cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Cluster]:
    if shutil.which("kubectl") is None:
        pytest.skip(NO_KUBECTL)
    async with started_cluster(tmp_path_factory.mktemp("seed-cluster")) as c:
        yield c


def kubeconfig(*, server: str, namespace: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "kubelite", "cluster": {"server": server}}],
            "users": [{"name": "seed-reader", "user": {}}],
            "contexts": [
                {
                    "name": "kubelite",
                    "context": {
                        "cluster": "kubelite",
                        "user": "seed-reader",
                        "namespace": namespace,
                    },
                }
            ],
            "current-context": "kubelite",
        }
    )


@pytest_asyncio.fixture(loop_scope="module")
async def kubectl(
    request: pytest.FixtureRequest, seed_cluster: Cluster, tmp_path: Path
) -> AsyncIterator[Kubectl]:
    binary = shutil.which("kubectl") if request.param == "dispatcher" else None
    if request.param != "dispatcher":
        binary = kubectl_binary(int(request.param.rsplit(".", 1)[1]))
    if binary is None:
        pytest.skip(f"{request.param} is not installed beside the kubectl on the PATH")
    namespace = "seed-" + request.param.replace(".", "-")
    (tmp_path / "kube-cache").mkdir()
    (tmp_path / "kubeconfig").write_text(
        kubeconfig(server=seed_cluster.server, namespace=namespace)
    )
    for name, text in {
        "node1.yaml": NODE_NAME_POD,
        "nodeselector.yaml": NODE_SELECTOR_POD,
        "nowhere.yaml": UNMATCHED_POD,
        "failing.yaml": FAILING_POD,
        "rc.yaml": RC,
        "deployment.yaml": DEPLOYMENT,
        "namespace.yaml": f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {namespace}\n",
    }.items():
        (tmp_path / name).write_text(text)
    try:
        yield Kubectl(
            binary=binary,
            minor="32" if request.param == "dispatcher" else request.param.rsplit(".", 1)[1],
            workdir=tmp_path,
            cluster=seed_cluster,
        )
    finally:
        # the next run labels the nodes afresh, whatever happened to this one
        for node, key in (("node1", "zz"), ("node2", "cc")):
            await seed_cluster.client.patch(NODES, node, {"metadata": {"labels": {key: None}}})


# ---- the walkthrough ------------------------------------------------------------------------


def ready(c: Cluster, namespace: str, name: str) -> Callable[[], bool]:
    """Running with its pod IP and the Ready condition: what ``1/1 Running`` prints from."""

    def check() -> bool:
        pod = c.pod(name, namespace)
        conditions = ((pod or {}).get("status") or {}).get("conditions") or []
        return running(pod) and any(
            x.get("type") == "Ready" and x.get("status") == "True" for x in conditions
        )

    return check


@pytest.mark.parametrize("kubectl", ["dispatcher", "kubectl.1.30", "kubectl.1.33"], indirect=True)
async def test_seed_walkthrough(kubectl: Kubectl, seed_cluster: Cluster) -> None:
    c = seed_cluster
    ns = (await kubectl("config", "view", "--minify", "-o", "jsonpath={..namespace}")).strip()
    assert (await kubectl("apply", "-f", "namespace.yaml")).strip() == f"namespace/{ns} created"

    # -- the dispatcher asked /version and picked a WebSocket-capable kubectl
    asked = await kubectl.run("version", "-o", "json")  # 1.30 warns of the version skew
    assert asked.code == 0, asked.err
    version = json.loads(asked.out)
    assert version["clientVersion"]["minor"].rstrip("+") == kubectl.minor  # "32+": dispatcher
    assert (version["serverVersion"]["major"], version["serverVersion"]["minor"]) == ("1", "32")
    assert "kubelite" in version["serverVersion"]["gitVersion"]

    # -- api-resources lists our kinds with their short names
    resources = await kubectl("api-resources")
    for name, short in [
        ("pods", "po"), ("nodes", "no"), ("replicationcontrollers", "rc"), ("events", "ev"),
        ("namespaces", "ns"), ("replicasets", "rs"), ("deployments", "deploy"),
    ]:  # fmt: skip
        assert re.search(rf"^{name}\s+{short}\s", resources, re.M), resources
    assert re.search(r"^leases\s+coordination.k8s.io/v1\s+true\s+Lease$", resources, re.M)

    # -- label the nodes as the seed does; --overwrite and key- behave as kubectl says
    assert (await kubectl("get", "node")).split()[:5] == [
        "NAME",
        "STATUS",
        "ROLES",
        "AGE",
        "VERSION",
    ]
    assert (await kubectl("label", "nodes", "node1", "zz=cxk")).strip() == "node/node1 labeled"
    assert (await kubectl("label", "nodes", "node2", "cc=cxk")).strip() == "node/node2 labeled"
    refused = await kubectl.fails("label", "nodes", "node1", "zz=other")
    assert "'zz' already has a value (cxk), and --overwrite is false" in refused.err
    await kubectl("label", "nodes", "node1", "zz=other", "--overwrite")
    await kubectl("label", "nodes", "node1", "zz=cxk", "--overwrite")
    await kubectl("label", "nodes", "node1", "gone=soon")
    assert (await kubectl("label", "nodes", "node1", "gone-")).strip() == "node/node1 unlabeled"
    shown = {
        row["NAME"]: row["LABELS"]
        for row in columns(await kubectl("get", "nodes", "--show-labels"))
    }
    assert "zz=cxk" in shown["node1"].split(",") and "gone=soon" not in shown["node1"]
    assert "cc=cxk" in shown["node2"].split(",") and "zz=cxk" not in shown["node2"]

    # -- get -w prints the nodeName pod's transitions, from Pending to Running
    watch = await kubectl.start("get", "pods", "-w", "-v=6")
    try:
        await watch.watching()  # else a quick pod may already be Running when it lists
        created = await kubectl("apply", "-f", "node1.yaml")
        assert created.strip() == "pod/pod-example created"
        assert (
            await kubectl("apply", "-f", "nodeselector.yaml")
        ).strip() == "pod/pod-selector created"
        await watch.until(lambda line: line.split()[:3] == ["pod-example", "1/1", "Running"])
    finally:
        await watch.stop()
    seen = [line.split()[2] for line in watch.lines if line.startswith("pod-example ")]
    assert seen[0] in ("Pending", "ContainerCreating") and seen[-1] == "Running", watch.lines
    assert watch.lines[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"], watch.lines

    # -- get pods -o wide: each pod on the right node, with its pod IP
    await c.until(ready(c, ns, "pod-selector"), within=WITHIN, what="pod-selector Ready")
    wide = {row["NAME"]: row for row in columns(await kubectl("get", "pods", "-o", "wide"))}
    assert wide["pod-example"]["NODE"] == "node1" and wide["pod-selector"]["NODE"] == "node2"
    for name in ("pod-example", "pod-selector"):
        pod = c.pod(name, ns)
        assert pod is not None
        assert wide[name]["IP"] == pod["status"]["podIP"]
        assert (wide[name]["READY"], wide[name]["STATUS"]) == ("1/1", "Running")
        assert (wide[name]["NOMINATED NODE"], wide[name]["READINESS GATES"]) == ("<none>", "<none>")
    as_json = json.loads(await kubectl("get", "pod", "pod-selector", "-o", "json"))
    assert as_json["spec"]["nodeName"] == "node2" and as_json["kind"] == "Pod"
    as_yaml = yaml.safe_load(await kubectl("get", "po", "pod-example", "-o", "yaml"))
    assert as_yaml["status"]["phase"] == "Running"
    assert "kubectl.kubernetes.io/last-applied-configuration" in as_yaml["metadata"]["annotations"]
    everywhere = columns(await kubectl("get", "pods", "-A"))
    assert any(r["NAMESPACE"] == ns and r["NAME"] == "pod-example" for r in everywhere)
    assert (await kubectl.run("get", "pods", "-n", "kube-nothing")).err.strip() == (
        "No resources found in kube-nothing namespace."
    )

    # -- the seed's selector nobody matches: Pending, and describe says why
    events = await kubectl.start(
        "get", "events", "-w", "--field-selector", "involvedObject.name=pod-nowhere"
    )
    try:
        await kubectl("apply", "-f", "nowhere.yaml")
        line = await events.until(lambda line: "FailedScheduling" in line)
    finally:
        await events.stop()
    assert "pod/pod-nowhere" in line and "Warning" in line
    described = await kubectl("describe", "pod", "pod-nowhere")
    assert re.search(r"^Status:\s+Pending$", described, re.M), described
    assert re.search(r"^Node-Selectors:\s+lc=fuheinan$", described, re.M), described
    tail = described[described.index("Events:") :]
    assert re.search(
        r"Warning\s+FailedScheduling\s+\S+\s+default-scheduler\s+0/2 nodes are available: "
        r"2 node\(s\) didn't match Pod's node affinity/selector\.",
        tail,
    ), tail
    assert "FailedScheduling" in await kubectl("get", "events")

    # -- logs: the nginx pod's access log, following it, and a failed pod's output
    follow = await kubectl.start("logs", "-f", "pod-example")
    try:
        pod = c.pod("pod-example", ns)
        assert pod is not None
        status, _ = await http_get(f"http://{pod['status']['podIP']}:80/seed")
        assert status == 404
        await follow.until(lambda line: '"GET /seed HTTP/1.1" 404' in line)
    finally:
        await follow.stop()
    assert '"GET /seed HTTP/1.1" 404' in await kubectl("logs", "pod-example")
    await kubectl("apply", "-f", "failing.yaml")
    await c.until(
        lambda: ((c.pod("pod-failing", ns) or {}).get("status") or {}).get("phase") == "Failed",
        within=WITHIN,
        what="pod-failing Failed",
    )
    assert (await kubectl("logs", "pod-failing")) == "starting\ncannot reach db\n"
    previous = await kubectl.fails("logs", "pod-example", "--previous")
    assert previous.err.strip() == (
        'Error from server (BadRequest): previous terminated container "nginx" in pod '
        '"pod-example" not found'
    )

    # -- exec: a command, a non-zero exit, and an interactive shell under a real terminal
    assert (await kubectl("exec", "pod-example", "--", "sh", "-c", "echo hi")) == "hi\n"
    exited = await kubectl.fails("exec", "pod-example", "--", "sh", "-c", "exit 3")
    assert exited.code == 3 and "command terminated with exit code 3" in exited.err
    code, screen = await kubectl.tty(
        "exec", "-it", "pod-example", "--", "sh",
        keys=[b"echo $((6 * 7)) $POD_NAME\r", b"exit 4\r"],
    )  # fmt: skip
    assert "42 pod-example" in screen, screen
    assert "Unable to use a TTY" not in screen, screen  # kubectl saw a terminal and used it
    assert code == 4, screen

    # -- scale rc to 3
    assert (await kubectl("apply", "-f", "rc.yaml")).strip() == "replicationcontroller/web created"
    assert (await kubectl("scale", "rc", "web", "--replicas=3")).strip() == (
        "replicationcontroller/web scaled"
    )
    await c.until(
        lambda: ((c.rcs.get(f"{ns}/web") or {}).get("status") or {}).get("readyReplicas") == 3,
        within=WITHIN,
        what="rc web with 3 ready replicas",
    )
    (rc,) = columns(await kubectl("get", "rc", "web"))
    assert (rc["DESIRED"], rc["CURRENT"], rc["READY"]) == ("3", "3", "3")
    web_pods = [p for p in c.live_pods(label="app=web") if p["metadata"]["namespace"] == ns]
    assert len(web_pods) == 3 and all(running(p) for p in web_pods)

    # -- a Deployment: rollout status, set image, rollout status again
    await kubectl("apply", "-f", "deployment.yaml")
    rolled = await kubectl("rollout", "status", "deployment/frontend", "--timeout=80s")
    assert 'deployment "frontend" successfully rolled out' in rolled
    assert (await kubectl("set", "image", "deployment/frontend", "nginx=nginx:1.16")).strip() == (
        "deployment.apps/frontend image updated"
    )
    rolled = await kubectl("rollout", "status", "deploy/frontend", "--timeout=80s")
    assert 'deployment "frontend" successfully rolled out' in rolled
    (deploy,) = columns(await kubectl("get", "deploy", "frontend", "-o", "wide"))
    assert (deploy["READY"], deploy["UP-TO-DATE"], deploy["IMAGES"]) == ("2/2", "2", "nginx:1.16")

    # -- delete -f returns once the pod is gone, its process with it
    gone = await kubectl("delete", "-f", "node1.yaml")
    assert gone.strip() == 'pod "pod-example" deleted'
    missing = await kubectl.fails("get", "pod", "pod-example")
    assert missing.err.strip() == 'Error from server (NotFound): pods "pod-example" not found'
    assert f"{ns}/pod-example" not in c.pod_processes()

    # -- the labels come off as they went on
    assert (await kubectl("label", "nodes", "node1", "zz-")).strip() == "node/node1 unlabeled"
    assert (await kubectl("label", "nodes", "node2", "cc-")).strip() == "node/node2 unlabeled"

    # -- leave the next run a quiet cluster: this run's pods stop with their namespace
    await kubectl("delete", "namespace", ns, "--wait=false")


async def test_no_component_writes_a_field_kubernetes_does_not_declare(
    seed_cluster: Cluster,
) -> None:
    """After the walkthroughs (pods run, restart, get deleted; RCs, Deployments, ReplicaSets,
    events, leases, node status): every stored object passes ``fieldValidation=Strict``, and the
    apiserver never had to drop an unknown field from a component's write."""
    c = seed_cluster
    found: dict[str, list[str]] = {}
    for rt in REGISTRY:
        if "list" not in rt.verbs:
            continue
        for obj in (await c.client.list(rt))["items"]:
            if rt.custom is not None:  # a kind served from its schema
                unknown = [u.path for u in unknown_to_schema(rt.custom.schema, obj)]
            else:
                unknown = [u.path for u in unknown_fields(rt.model, obj)]
            if unknown:
                found[f"{rt.kind} {obj['metadata'].get('name')}"] = unknown
    assert found == {}
    log = c.components["apiserver"].log_path.read_text(errors="replace")
    assert [line for line in log.splitlines() if "dropped unknown field" in line] == []
