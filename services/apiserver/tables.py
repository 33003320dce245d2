"""Server-side printing: lists rendered as ``meta.k8s.io/v1`` Tables, the columns kubectl shows.

Why: kubectl never computes ``READY``, ``STATUS`` or ``ROLES`` itself. It asks the apiserver for a
Table (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``) and prints the cells it gets,
hiding ``priority: 1`` columns unless ``-o wide``. So the cells here are computed the way
Kubernetes' own printers compute them (``pkg/printers/internalversion/printers.go``): the pod
status word (``Init:0/1``, ``CrashLoopBackOff``, ``Completed``, ``Terminating``...), restarts as
``"3 (5m ago)"``, node ``Ready,SchedulingDisabled`` and roles, replica counts, a Job's status word and ``1/1`` completions, a
CronJob's schedule, a budget's ``N/A``, endpoints as ``ip:port,... + N more...``, a revision's ``statefulset.apps/web``, event columns,
secrets' types and data counts, roles' RFC 3339 ``CREATED AT`` and bindings'
``ClusterRole/view``, a Service's ``CLUSTER-IP``, ``EXTERNAL-IP`` (``<pending>``) and
``80:30080/TCP`` ports, a storage class's ``(default)`` mark, volumes' and claims'
``RWO,ROX`` access modes and ``ns/claim``, and ages in ``HumanDuration`` form (``45s``,
``5m2s``, ``3h``, ``2d``).

What it owns: one ``TablePrinter`` per (group, kind) — its column definitions and a function from
an object dict to the row's cells — plus Accept-header negotiation (``wants_table``) and the Table
envelope (``to_table``): ``rows[].object`` as ``PartialObjectMetadata`` (``includeObject=Metadata``,
the default), the full object (``Object``) or nothing (``None``), and ``metadata.resourceVersion``
/ ``continue`` so ``kubectl get -w`` can resume. The server always emits the wide columns, as the
real apiserver does.

Limits: objects are plain dicts as stored (already defaulted); a field that is missing reads as
Kubernetes' zero value. Kinds without a printer get ``NAME AGE``. Only the ``v1`` Table version is
produced (kubectl asks for v1 first; ``v1beta1`` has the same shape and is accepted in negotiation).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from api.apiextensions import CustomResource, json_path_values
from api.errors import BadRequest
from api.registry import ResourceType
from api.storage import is_default_class

__all__ = [
    "TABLE_CONTENT_TYPE",
    "Column",
    "TablePrinter",
    "human_duration",
    "printer_for",
    "to_table",
    "translate_timestamp_since",
    "wants_table",
]

TABLE_CONTENT_TYPE = "application/json;as=Table;v=v1;g=meta.k8s.io"
"""The Content-Type a Table response carries (kubectl decodes by ``kind`` either way)."""

INCLUDE_OBJECT_POLICIES = ("None", "Metadata", "Object")

Obj = Mapping[str, Any]


# --------------------------------------------------------------------------------------------
# durations


def human_duration(seconds: float) -> str:
    """Kubernetes' ``duration.HumanDuration``: ~2-3 significant figures, as kubectl's AGE column.

    Up to 2 s in the future reads as ``0s`` (clock skew between machines); further is ``<invalid>``.
    """
    whole = int(seconds)  # truncates toward zero, as Go's int(d.Seconds())
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 60 * 2:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        s = whole % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y" if days == 0 else f"{years}y{days}d"
    return f"{hours // 24 // 365}y"


def _parse_time(value: Any) -> datetime | None:
    if not value or not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def translate_timestamp_since(timestamp: Any, now: datetime) -> str:
    """``"<unknown>"`` for a missing timestamp, else the human duration since it."""
    parsed = _parse_time(timestamp)
    if parsed is None:
        return "<unknown>"
    return human_duration((now - parsed).total_seconds())


# --------------------------------------------------------------------------------------------
# printers


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str = "string"
    description: str = ""
    priority: int = 0
    format: str = ""

    def definition(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


CellsFn = Callable[[Obj, datetime], list[Any]]
ConditionsFn = Callable[[Obj], list[dict[str, str]] | None]


@dataclass(frozen=True, slots=True)
class TablePrinter:
    """The columns of one kind and how to fill them; ``cells`` returns every column, wide included."""

    columns: tuple[Column, ...]
    cells: CellsFn
    conditions: ConditionsFn | None = None


NAME = Column("Name", format="name", description="Name must be unique within a namespace.")
AGE = Column("Age", description="CreationTimestamp is when this object was created.")


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _spec(obj: Obj) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def _status(obj: Obj) -> Mapping[str, Any]:
    return obj.get("status") or {}


def _age(obj: Obj, now: datetime) -> str:
    return translate_timestamp_since(_meta(obj).get("creationTimestamp"), now)


# ---- pods


def _is_restartable_init(container: Mapping[str, Any] | None) -> bool:
    return bool(container) and (container or {}).get("restartPolicy") == "Always"


def _condition_true(conditions: Any, type_: str) -> bool:
    """A condition of that type whose status is ``True`` (the printers' ``hasJobCondition``,
    the pod's Ready and Initialized)."""
    return any(c.get("type") == type_ and c.get("status") == "True" for c in conditions or [])


def _terminated_reason(terminated: Mapping[str, Any], *, prefix: str = "") -> str:
    if terminated.get("reason"):
        return prefix + str(terminated["reason"])
    if terminated.get("signal"):
        return f"{prefix}Signal:{terminated['signal']}"
    return f"{prefix}ExitCode:{terminated.get('exitCode', 0)}"


def _pod_cells(pod: Obj, now: datetime) -> list[Any]:
    """``printPod``: NAME READY STATUS RESTARTS AGE | IP NODE NOMINATED-NODE READINESS-GATES."""
    spec, status, meta = _spec(pod), _status(pod), _meta(pod)
    containers = spec.get("containers") or []
    init_specs = {c.get("name"): c for c in spec.get("initContainers") or []}
    total = len(containers) + sum(1 for c in init_specs.values() if _is_restartable_init(c))
    ready = 0
    restarts = 0
    sidecar_restarts = 0
    last_restart: datetime | None = None
    last_sidecar_restart: datetime | None = None

    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"

    def later(current: datetime | None, cs: Mapping[str, Any]) -> datetime | None:
        finished = _parse_time(
            ((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt")
        )
        if finished is not None and (current is None or finished > current):
            return finished
        return current

    initializing = False
    init_statuses = status.get("initContainerStatuses") or []
    for i, cs in enumerate(init_statuses):
        count = int(cs.get("restartCount") or 0)
        restarts += count
        last_restart = later(last_restart, cs)
        sidecar = _is_restartable_init(init_specs.get(cs.get("name")))
        if sidecar:
            sidecar_restarts += count
            last_sidecar_restart = later(last_sidecar_restart, cs)
        state = cs.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated is not None and int(terminated.get("exitCode") or 0) == 0:
            continue
        if sidecar and cs.get("started"):
            if cs.get("ready"):
                ready += 1
            continue
        if terminated is not None:
            reason = _terminated_reason(terminated, prefix="Init:")
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + str(waiting["reason"])
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break

    if not initializing or _condition_true(status.get("conditions"), "Initialized"):
        restarts = sidecar_restarts
        last_restart = last_sidecar_restart
        has_running = False
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += int(cs.get("restartCount") or 0)
            last_restart = later(last_restart, cs)
            state = cs.get("state") or {}
            waiting, terminated = state.get("waiting"), state.get("terminated")
            if waiting and waiting.get("reason"):
                reason = str(waiting["reason"])
            elif terminated is not None:
                reason = _terminated_reason(terminated)
            elif cs.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        # a container still running turns a "Completed" pod back into Running / NotReady
        if reason == "Completed" and has_running:
            ready_cond = _condition_true(status.get("conditions"), "Ready")
            reason = "Running" if ready_cond else "NotReady"

    if meta.get("deletionTimestamp") and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"

    restarts_cell = str(restarts)
    if restarts and last_restart is not None:
        ago = human_duration((now - last_restart).total_seconds())
        restarts_cell = f"{restarts} ({ago} ago)"

    pod_ips = status.get("podIPs") or []
    pod_ip = (pod_ips[0].get("ip") if pod_ips else None) or "<none>"
    gates = spec.get("readinessGates") or []
    gates_cell = "<none>"
    if gates:
        by_type = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        true_count = sum(1 for g in gates if by_type.get(g.get("conditionType")) == "True")
        gates_cell = f"{true_count}/{len(gates)}"
    return [
        meta.get("name", ""),
        f"{ready}/{total}",
        reason,
        restarts_cell,
        _age(pod, now),
        pod_ip,
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        gates_cell,
    ]


def _pod_conditions(pod: Obj) -> list[dict[str, str]] | None:
    phase = _status(pod).get("phase")
    if phase == "Succeeded":
        message = "The pod has completed successfully."
    elif phase == "Failed":
        message = "The pod failed."
    else:
        return None
    return [{"type": "Completed", "status": "True", "reason": phase, "message": message}]


POD_PRINTER = TablePrinter(
    columns=(
        NAME,
        Column(
            "Ready", description="The aggregate readiness state of this pod for accepting traffic."
        ),
        Column("Status", description="The aggregate status of the containers in this pod."),
        Column(
            "Restarts",
            description="The number of times the containers in this pod have been restarted "
            "and when the last container in this pod has restarted.",
        ),
        AGE,
        Column("IP", priority=1, description="The pod's primary IP address."),
        Column("Node", priority=1, description="The node the pod is bound to."),
        Column("Nominated Node", priority=1, description="The node the scheduler nominated."),
        Column("Readiness Gates", priority=1, description="Readiness gates that are true / all."),
    ),
    cells=_pod_cells,
    conditions=_pod_conditions,
)


# ---- nodes


def _node_roles(labels: Mapping[str, str]) -> list[str]:
    roles: set[str] = set()
    for key, value in labels.items():
        if key.startswith("node-role.kubernetes.io/"):
            role = key.removeprefix("node-role.kubernetes.io/")
            if role:
                roles.add(role)
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    return sorted(roles)


def _node_address(status: Mapping[str, Any], type_: str) -> str:
    for address in status.get("addresses") or []:
        if address.get("type") == type_:
            return str(address.get("address") or "")
    return "<none>"


def _node_cells(node: Obj, now: datetime) -> list[Any]:
    """``printNode``: NAME STATUS ROLES AGE VERSION | INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL CRI."""
    status = _status(node)
    words = []
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready":
            words = ["Ready" if cond.get("status") == "True" else "NotReady"]
    if not words:
        words = ["Unknown"]
    if _spec(node).get("unschedulable"):
        words.append("SchedulingDisabled")
    info = status.get("nodeInfo") or {}
    return [
        _meta(node).get("name", ""),
        ",".join(words),
        ",".join(_node_roles(_meta(node).get("labels") or {})) or "<none>",
        _age(node, now),
        info.get("kubeletVersion") or "",
        _node_address(status, "InternalIP"),
        _node_address(status, "ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


NODE_PRINTER = TablePrinter(
    columns=(
        NAME,
        Column("Status", description="The status of the node"),
        Column("Roles", description="The roles of the node"),
        AGE,
        Column("Version", description="Kubelet version reported by the node."),
        Column("Internal-IP", priority=1, description="The node's InternalIP address."),
        Column("External-IP", priority=1, description="The node's ExternalIP address."),
        Column("OS-Image", priority=1, description="OS image reported by the node."),
        Column("Kernel-Version", priority=1, description="Kernel version reported by the node."),
        Column("Container-Runtime", priority=1, description="Container runtime and version."),
    ),
    cells=_node_cells,
)


# ---- workload controllers


def _format_labels(labels: Mapping[str, str] | None) -> str:
    """``labels.FormatLabels``: ``k=v,...`` sorted by key, ``<none>`` when empty."""
    if not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def _selector_string(selector: Mapping[str, Any] | None) -> str:
    """A ``LabelSelector`` as ``metav1.LabelSelectorAsSelector(...).String()`` writes it."""
    if not selector:
        return ""
    reqs: list[tuple[str, str]] = []
    for key, value in (selector.get("matchLabels") or {}).items():
        reqs.append((key, f"{key}={value}"))
    for expr in selector.get("matchExpressions") or []:
        key, op = expr.get("key", ""), expr.get("operator", "")
        values = ",".join(sorted(expr.get("values") or []))
        if op == "In":
            reqs.append((key, f"{key} in ({values})"))
        elif op == "NotIn":
            reqs.append((key, f"{key} notin ({values})"))
        elif op == "Exists":
            reqs.append((key, key))
        elif op == "DoesNotExist":
            reqs.append((key, f"!{key}"))
    reqs.sort(key=lambda r: r[0])
    return ",".join(text for _, text in reqs)


def _template_containers(obj: Obj) -> tuple[str, str]:
    """``layoutContainerCells``: container names and images, comma-joined."""
    containers = ((_spec(obj).get("template") or {}).get("spec") or {}).get("containers") or []
    return (
        ",".join(str(c.get("name", "")) for c in containers),
        ",".join(str(c.get("image", "")) for c in containers),
    )


def _replicas(obj: Obj) -> int:
    value = _spec(obj).get("replicas")
    return 1 if value is None else int(value)  # the API defaults spec.replicas to 1


def _rc_cells(rc: Obj, now: datetime) -> list[Any]:
    names, images = _template_containers(rc)
    status = _status(rc)
    return [
        _meta(rc).get("name", ""),
        _replicas(rc),
        int(status.get("replicas") or 0),
        int(status.get("readyReplicas") or 0),
        _age(rc, now),
        names,
        images,
        _format_labels(_spec(rc).get("selector")),
    ]


def _rs_cells(rs: Obj, now: datetime) -> list[Any]:
    cells = _rc_cells(rs, now)
    cells[-1] = _selector_string(_spec(rs).get("selector")) or "<none>"
    return cells


def _controller_columns(selector_doc: str) -> tuple[Column, ...]:
    return (
        NAME,
        Column("Desired", type="integer", description="Number of desired pods."),
        Column("Current", type="integer", description="Number of pods currently present."),
        Column("Ready", type="integer", description="Number of ready pods."),
        AGE,
        Column("Containers", priority=1, description="Names of each container in the template."),
        Column(
            "Images", priority=1, description="Images referenced by each container in the template."
        ),
        Column("Selector", priority=1, description=selector_doc),
    )


RC_PRINTER = TablePrinter(
    columns=_controller_columns("Label keys and values pods must match to be controlled."),
    cells=_rc_cells,
)
RS_PRINTER = TablePrinter(
    columns=_controller_columns("Label query over pods that should match the replica count."),
    cells=_rs_cells,
)


def _deployment_cells(deploy: Obj, now: datetime) -> list[Any]:
    names, images = _template_containers(deploy)
    status = _status(deploy)
    return [
        _meta(deploy).get("name", ""),
        f"{int(status.get('readyReplicas') or 0)}/{_replicas(deploy)}",
        int(status.get("updatedReplicas") or 0),
        int(status.get("availableReplicas") or 0),
        _age(deploy, now),
        names,
        images,
        _selector_string(_spec(deploy).get("selector")),
    ]


DEPLOYMENT_PRINTER = TablePrinter(
    columns=(
        NAME,
        Column("Ready", description="Number of the pod with ready state"),
        Column("Up-to-date", description="Pods updated to the current template."),
        Column("Available", description="Pods available for at least minReadySeconds."),
        AGE,
        Column("Containers", priority=1, description="Names of each container in the template."),
        Column(
            "Images", priority=1, description="Images referenced by each container in the template."
        ),
        Column("Selector", priority=1, description="Label selector for pods."),
    ),
    cells=_deployment_cells,
)


def _daemon_set_cells(ds: Obj, now: datetime) -> list[Any]:
    names, images = _template_containers(ds)
    status = _status(ds)
    node_selector = ((_spec(ds).get("template") or {}).get("spec") or {}).get("nodeSelector")
    return [
        _meta(ds).get("name", ""),
        *(
            int(status.get(key) or 0)
            for key in (
                "desiredNumberScheduled",
                "currentNumberScheduled",
                "numberReady",
                "updatedNumberScheduled",
                "numberAvailable",
            )
        ),
        _format_labels(node_selector),
        _age(ds, now),
        names,
        images,
        _selector_string(_spec(ds).get("selector")),
    ]


DAEMON_SET_PRINTER = TablePrinter(
    columns=(
        NAME,
        Column("Desired", type="integer", description="Nodes that should run the daemon pod."),
        Column("Current", type="integer", description="Nodes running at least one daemon pod."),
        Column("Ready", type="integer", description="Nodes whose daemon pod is ready."),
        Column("Up-to-date", type="integer", description="Nodes running the updated daemon pod."),
        Column("Available", type="integer", description="Nodes whose daemon pod is available."),
        Column("Node Selector", description="The template's node selector."),
        AGE,
        Column("Containers", priority=1, description="Names of each container in the template."),
        Column(
            "Images", priority=1, description="Images referenced by each container in the template."
        ),
        Column("Selector", priority=1, description="Label query over pods of this daemon set."),
    ),
    cells=_daemon_set_cells,
)


def _stateful_set_cells(sts: Obj, now: datetime) -> list[Any]:
    names, images = _template_containers(sts)
    ready = int(_status(sts).get("readyReplicas") or 0)
    return [_meta(sts).get("name", ""), f"{ready}/{_replicas(sts)}", _age(sts, now), names, images]


STATEFUL_SET_PRINTER = TablePrinter(
    columns=(
        NAME,
        Column("Ready", description="Number of the pod with ready state"),
        AGE,
        Column("Containers", priority=1, description="Names of each container in the template."),
        Column(
            "Images", priority=1, description="Images referenced by each container in the template."
        ),
    ),
    cells=_stateful_set_cells,
)


def _controller_of(obj: Obj) -> str:
    """``formatResourceName`` of the controller: ``statefulset.apps/web``, else ``<none>``."""
    for ref in _meta(obj).get("ownerReferences") or []:
        if ref.get("controller") is True:
            group = str(ref.get("apiVersion", "")).rpartition("/")[0]
            kind = str(ref.get("kind", ""))
            group_kind = f"{kind}.{group}" if group else kind
            return f"{group_kind.lower()}/{ref.get('name', '')}" if group_kind else ref["name"]
    return "<none>"


def _controller_revision_cells(rev: Obj, now: datetime) -> list[Any]:
    revision = rev.get("revision")
    return [
        _meta(rev).get("name", ""),
        _controller_of(rev),
        revision if isinstance(revision, int) else 0,
        _age(rev, now),
    ]


CONTROLLER_REVISION_PRINTER = TablePrinter(
    columns=(
        NAME,
        Column("Controller", description="The controller that owns this revision."),
        Column("Revision", type="integer", description="The revision number."),
        AGE,
    ),
    cells=_controller_revision_cells,
)


# ---- batch


def _job_status(job: Obj) -> str:
    conditions = _status(job).get("conditions")
    if _condition_true(conditions, "Complete"):
        return "Complete"
    if _condition_true(conditions, "Failed"):
        return "Failed"
    if _meta(job).get("deletionTimestamp"):
        return "Terminating"
    if _condition_true(conditions, "Suspended"):
        return "Suspended"
    if _condition_true(conditions, "FailureTarget"):
        return "FailureTarget"
    return "Running"


def _job_completions(job: Obj) -> str:
    succeeded = int(_status(job).get("succeeded") or 0)
    completions = _spec(job).get("completions")
    if completions is not None:
        return f"{succeeded}/{completions}"
    parallelism = int(_spec(job).get("parallelism") or 0)
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def _job_duration(job: Obj, now: datetime) -> str:
    start = _parse_time(_status(job).get("startTime"))
    if start is None:
        return ""
    end = _parse_time(_status(job).get("completionTime")) or now
    return human_duration((end - start).total_seconds())


def _job_cells(job: Obj, now: datetime) -> list[Any]:
    names, images = _template_containers(job)
    return [
        _meta(job).get("name", ""),
        _job_status(job),
        _job_completions(job),
        _job_duration(job, now),
        _age(job, now),
        names,
        images,
        _selector_string(_spec(job).get("selector")),
    ]


_CONTAINERS = Column(
    "Containers", priority=1, description="Names of each container in the template."
)
_IMAGES = Column(
    "Images", priority=1, description="Images referenced by each container in the template."
)

JOB_PRINTER = TablePrinter(
    columns=(
        NAME,
        Column("Status", description="Status of the job."),
        Column("Completions", description="The number of pods which reached phase Succeeded."),
        Column("Duration", description="Time required to complete the job."),
        AGE,
        _CONTAINERS,
        _IMAGES,
        Column("Selector", priority=1, description="A label query over pods of the job."),
    ),
    cells=_job_cells,
)


def _cron_job_cells(cj: Obj, now: datetime) -> list[Any]:
    spec, status = _spec(cj), _status(cj)
    job_spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    names, images = _template_containers({"spec": job_spec})
    suspend = spec.get("suspend")
    last = status.get("lastScheduleTime")
    return [
        _meta(cj).get("name", ""),
        spec.get("schedule", ""),
        spec.get("timeZone") or "<none>",
        "<unset>" if suspend is None else ("True" if suspend else "False"),
        len(status.get("active") or []),
        "<none>" if last is None else translate_timestamp_since(last, now),
        _age(cj, now),
        names,
        images,
        _selector_string(job_spec.get("selector")),
    ]


CRON_JOB_PRINTER = TablePrinter(
    columns=(
        NAME,
        Column("Schedule", description="The schedule in Cron format."),
        Column("Timezone", description="The time zone the schedule is in."),
        Column("Suspend", description="Whether later executions are suspended."),
        Column("Active", type="integer", description="Jobs currently running."),
        Column("Last Schedule", description="When the job was last scheduled."),
        AGE,
        _CONTAINERS,
        _IMAGES,
        Column("Selector", priority=1, description="A label query over pods of the jobs."),
    ),
    cells=_cron_job_cells,
)


# ---- policy


def _int_or_string(value: Any) -> str:
    """``intstr.IntOrString.String()``, or ``N/A`` when unset (as ``printPodDisruptionBudget``)."""
    return "N/A" if value is None else str(value)


def _pdb_cells(pdb: Obj, now: datetime) -> list[Any]:
    spec = _spec(pdb)
    return [
        _meta(pdb).get("name", ""),
        _int_or_string(spec.get("minAvailable")),
        _int_or_string(spec.get("maxUnavailable")),
        int(_status(pdb).get("disruptionsAllowed") or 0),
        _age(pdb, now),
    ]


PDB_PRINTER = TablePrinter(
    columns=(
        NAME,
        Column("Min Available", description="Pods that must still be available after an eviction."),
        Column("Max Unavailable", description="Pods that may be unavailable after an eviction."),
        Column("Allowed Disruptions", type="integer", description="Evictions allowed now."),
        AGE,
    ),
    cells=_pdb_cells,
)


# ---- horizontal pod autoscalers

_HPA_MAX_METRICS = 2
"""``formatHPAMetrics`` shows two metrics, then ``+ N more...``."""
_HPA_METRIC_TYPES = ("ContainerResource", "External", "Object", "Pods", "Resource")


def _hpa_metric(spec: Mapping[str, Any], status: Mapping[str, Any] | None) -> str:
    """One metric as ``formatHPAMetrics`` writes it (``cpu: 45%/50%``, ``<unknown>`` unmeasured)."""
    kind = str(spec.get("type") or "")
    key = kind[:1].lower() + kind[1:]  # the source's field: resource, containerResource, pods ...
    if kind not in _HPA_METRIC_TYPES or not isinstance(spec.get(key), dict):
        return "<unknown type>"
    source = spec[key]
    target = source.get("target") or {}
    current = ((status or {}).get(key) or {}).get("current") or {}
    if kind in ("Resource", "ContainerResource"):
        name = f"{source.get('name', '')}: "
        if target.get("averageValue") is None:
            shown, wanted = current.get("averageUtilization"), target.get("averageUtilization")
            return (
                f"{name}{'<unknown>' if shown is None else f'{shown}%'}/"
                f"{'<auto>' if wanted is None else f'{wanted}%'}"
            )
        return f"{name}{current.get('averageValue', '<unknown>')}/{target['averageValue']}"
    if kind == "Pods":
        return f"{current.get('averageValue', '<unknown>')}/{target.get('averageValue')}"
    if target.get("averageValue") is not None:  # Object, External
        return f"{current.get('averageValue', '<unknown>')}/{target['averageValue']} (avg)"
    return f"{current.get('value', '<unknown>')}/{target.get('value')}"


def _hpa_metrics(specs: list[Any], statuses: list[Any]) -> str:
    if not specs:
        return "<none>"
    shown = [
        _hpa_metric(spec, statuses[i] if i < len(statuses) else None)
        for i, spec in enumerate(specs)
        if isinstance(spec, dict)
    ]
    text = ", ".join(shown[:_HPA_MAX_METRICS])
    more = len(shown) - _HPA_MAX_METRICS
    return f"{text} + {more} more..." if more > 0 else text


def _hpa_cells(hpa: Obj, now: datetime) -> list[Any]:
    spec, status = _spec(hpa), _status(hpa)
    ref = spec.get("scaleTargetRef") or {}
    minimum = spec.get("minReplicas")
    return [
        _meta(hpa).get("name", ""),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        _hpa_metrics(list(spec.get("metrics") or []), list(status.get("currentMetrics") or [])),
        "<unset>" if minimum is None else str(minimum),
        int(spec.get("maxReplicas") or 0),
        int(status.get("currentReplicas") or 0),
        _age(hpa, now),
    ]


HPA_PRINTER = TablePrinter(
    columns=(
        NAME,
        Column("Reference", description="The scale target: its kind and name."),
        Column("Targets", description="Each metric's current value and its target."),
        Column("MinPods", description="The least number of replicas scaled down to."),
        Column("MaxPods", type="integer", description="The most replicas scaled up to."),
        Column("Replicas", type="integer", description="The target's replicas, last seen."),
        AGE,
    ),
    cells=_hpa_cells,
)


# ---- endpoints and endpoint slices

_MAX_LISTED = 3
"""``formatEndpoints``/``formatDiscovery*`` show three entries, then ``+ N more...``."""


def _listed(items: list[str], count: int, *, unset: str) -> str:
    """The first three ``items`` joined, ``+ N more...`` past them (``listWithMoreString``)."""
    shown = ",".join(items[:_MAX_LISTED])
    if count > _MAX_LISTED:
        return f"{shown} + {count - _MAX_LISTED} more..."
    return shown or unset


def _host_port(ip: str, port: Any) -> str:
    """``net.JoinHostPort``: IPv6 addresses in brackets."""
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def _dict_items(value: Any) -> list[Mapping[str, Any]]:
    return [x for x in value if isinstance(x, Mapping)] if isinstance(value, list) else []


def _endpoints_cells(ep: Obj, now: datetime) -> list[Any]:
    """``printEndpoints``: NAME ENDPOINTS AGE; ready addresses by port, ``<none>`` without subsets."""
    subsets = _dict_items(ep.get("subsets"))
    listed: list[str] = []
    count = 0
    for subset in subsets:
        ips = [str(a.get("ip") or "") for a in _dict_items(subset.get("addresses"))]
        ports = _dict_items(subset.get("ports"))
        if not ports:  # a headless Service's endpoints may have no ports
            listed += ips
            count += len(ips)
            continue
        for port in ports:
            listed += [_host_port(ip, port.get("port", 0)) for ip in ips]
            count += len(ips)
    cell = _listed(listed, count, unset="") if subsets else "<none>"
    return [_meta(ep).get("name", ""), cell, _age(ep, now)]


ENDPOINTS_PRINTER = TablePrinter(
    columns=(
        NAME,
        Column("Endpoints", description="Endpoints is the list of IP addresses and ports."),
        AGE,
    ),
    cells=_endpoints_cells,
)


def _slice_port(port: Mapping[str, Any]) -> str:
    if port.get("port") is not None:
        return str(port["port"])
    return "*" if port.get("name") is None else str(port["name"])


def _endpoint_slice_cells(es: Obj, now: datetime) -> list[Any]:
    """``printEndpointSlice``: NAME ADDRESSTYPE PORTS ENDPOINTS AGE (``<unset>`` when empty)."""
    ports = [_slice_port(p) for p in _dict_items(es.get("ports"))]
    addresses = [str(a) for e in _dict_items(es.get("endpoints")) for a in e.get("addresses") or []]
    return [
        _meta(es).get("name", ""),
        es.get("addressType") or "",
        _listed(ports, len(ports), unset="<unset>"),
        _listed(addresses, len(addresses), unset="<unset>"),
        _age(es, now),
    ]


ENDPOINT_SLICE_PRINTER = TablePrinter(
    columns=(
        NAME,
        Column("AddressType", description="The type of address carried by the slice."),
        Column("Ports", description="The ports exposed by the slice."),
        Column("Endpoints", description="The addresses of the slice's endpoints."),
        AGE,
    ),
    cells=_endpoint_slice_cells,
)


# ---- events


def _event_cells(event: Obj, now: datetime) -> list[Any]:
    """``printEvent``: LAST SEEN TYPE REASON OBJECT | SUBOBJECT SOURCE | MESSAGE | FIRST SEEN COUNT NAME."""
    first = event.get("firstTimestamp")
    first_seen = (
        translate_timestamp_since(first, now)
        if _parse_time(first)
        else translate_timestamp_since(event.get("eventTime"), now)
    )
    last = event.get("lastTimestamp")
    last_seen = translate_timestamp_since(last, now) if _parse_time(last) else first_seen
    count = int(event.get("count") or 0)
    series = event.get("series")
    if series:
        last_seen = translate_timestamp_since(series.get("lastObservedTime"), now)
        count = int(series.get("count") or 0)
    elif count == 0:
        count = 1  # singleton events of the events.k8s.io API carry no count
    involved = event.get("involvedObject") or {}
    kind = str(involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingController") or ""
    instance = source.get("host") or event.get("reportingInstance") or ""
    return [
        last_seen,
        event.get("type") or "",
        event.get("reason") or "",
        target,
        involved.get("fieldPath") or "",
        f"{component}, {instance}" if instance else component,
        str(event.get("message") or "").strip(),
        first_seen,
        count,
        _meta(event).get("name", ""),
    ]


EVENT_PRINTER = TablePrinter(
    columns=(
        Column(
            "Last Seen", description="The time at which the most recent occurrence was recorded."
        ),
        Column("Type", description="Type of this event (Normal, Warning)."),
        Column("Reason", description="Short, machine understandable reason for the transition."),
        Column("Object", description="The object that this event is about."),
        Column("Subobject", priority=1, description="The part of the object the event is about."),
        Column("Source", priority=1, description="The component reporting this event."),
        Column(
            "Message", description="A human-readable description of the status of this operation."
        ),
        Column(
            "First Seen", priority=1, description="The time at which the event was first recorded."
        ),
        Column("Count", priority=1, description="The number of times this event has occurred."),
        Column("Name", priority=1, format="name", description="Name of the event."),
    ),
    cells=_event_cells,
)


# ---- namespaces, leases, anything else


def _namespace_cells(ns: Obj, now: datetime) -> list[Any]:
    return [_meta(ns).get("name", ""), _status(ns).get("phase") or "", _age(ns, now)]


NAMESPACE_PRINTER = TablePrinter(
    columns=(NAME, Column("Status", description="The status of the namespace"), AGE),
    cells=_namespace_cells,
)


def _lease_cells(lease: Obj, now: datetime) -> list[Any]:
    return [
        _meta(lease).get("name", ""),
        _spec(lease).get("holderIdentity") or "",
        _age(lease, now),
    ]


LEASE_PRINTER = TablePrinter(
    columns=(NAME, Column("Holder", description="The holder of the lease."), AGE),
    cells=_lease_cells,
)


# ---- flowcontrol: flow schemas, priority levels (printFlowSchema, printPriorityLevelConfiguration)


def _flow_schema_cells(fs: Obj, now: datetime) -> list[Any]:
    """NAME PRIORITYLEVEL MATCHINGPRECEDENCE DISTINGUISHERMETHOD AGE MISSINGPL; MISSINGPL is
    the status of the ``Dangling`` condition, ``?`` before the apiserver has set it."""
    spec = _spec(fs)
    method = (spec.get("distinguisherMethod") or {}).get("type") or "*"
    dangling = next(
        (
            c.get("status")
            for c in _status(fs).get("conditions") or []
            if c.get("type") == "Dangling"
        ),
        "?",
    )
    return [
        _meta(fs).get("name", ""),
        (spec.get("priorityLevelConfiguration") or {}).get("name") or "",
        spec.get("matchingPrecedence"),
        method,
        _age(fs, now),
        dangling,
    ]


FLOW_SCHEMA_PRINTER = TablePrinter(
    columns=(
        NAME,
        Column(
            "PriorityLevel",
            description="`name` is the name of the priority level configuration being referenced Required.",
        ),
        Column(
            "MatchingPrecedence",
            description="`matchingPrecedence` is used to choose among the FlowSchemas that match a given request.",
        ),
        Column(
            "DistinguisherMethod",
            description="`distinguisherMethod` defines how to compute the flow distinguisher for requests that match this schema. `nil` specifies that the distinguisher is disabled and thus will always be the empty string.",
        ),
        AGE,
        Column(
            "MissingPL",
            description="references a broken or non-existent PriorityLevelConfiguration",
        ),
    ),
    cells=_flow_schema_cells,
)


def _priority_level_cells(pl: Obj, now: datetime) -> list[Any]:
    """NAME TYPE NOMINALCONCURRENCYSHARES QUEUES HANDSIZE QUEUELENGTHLIMIT AGE; ``<none>``
    where the level has no such setting (exempt, or rejecting instead of queuing)."""
    spec = _spec(pl)
    limited = spec.get("limited") or {}
    queuing = (limited.get("limitResponse") or {}).get("queuing") or {}
    shares = limited.get("nominalConcurrencyShares", "<none>") if limited else "<none>"
    return [
        _meta(pl).get("name", ""),
        spec.get("type") or "",
        shares,
        queuing.get("queues", "<none>"),
        queuing.get("handSize", "<none>"),
        queuing.get("queueLengthLimit", "<none>"),
        _age(pl, now),
    ]


PRIORITY_LEVEL_PRINTER = TablePrinter(
    columns=(
        NAME,
        Column(
            "Type",
            description="`type` indicates whether this priority level is subject to limitation on request execution.",
        ),
        Column(
            "NominalConcurrencyShares",
            description="`nominalConcurrencyShares` (NCS) contributes to the computation of the NominalConcurrencyLimit (NominalCL) of this level.",
        ),
        Column("Queues", description="`queues` is the number of queues for this priority level."),
        Column(
            "HandSize",
            description="`handSize` is a small positive number that configures the shuffle sharding of requests into queues.",
        ),
        Column(
            "QueueLengthLimit",
            description="`queueLengthLimit` is the maximum number of requests allowed to be waiting in a given queue of this priority level at a time.",
        ),
        AGE,
    ),
    cells=_priority_level_cells,
)

# ---- configuration: configmaps, secrets, service accounts


def _count(value: Any) -> int:
    return len(value) if isinstance(value, Mapping | list) else 0


def _service_external_ip(svc: Obj) -> str:
    """``getServiceExternalIP``: external IPs, a LoadBalancer's ingress (``<pending>`` until it
    has one), an ExternalName's name; ``<none>`` otherwise."""
    spec = _spec(svc)
    external = [str(ip) for ip in spec.get("externalIPs") or []]
    kind = spec.get("type") or "ClusterIP"
    if kind == "ExternalName":
        return str(spec.get("externalName") or "")
    if kind == "LoadBalancer":
        ingress = (_status(svc).get("loadBalancer") or {}).get("ingress") or []
        addresses = [str(i.get("ip") or i.get("hostname") or "") for i in ingress]
        addresses = [a for a in addresses if a]
        if addresses:
            return ",".join(addresses + external)
        return "<pending>"
    return ",".join(external) if external else "<none>"


def _service_ports(ports: Any) -> str:
    """``makePortString``: ``80/TCP``, ``80:30080/TCP`` with a node port, comma-separated."""
    out = []
    for port in ports or []:
        text = f"{port.get('port')}/{port.get('protocol') or 'TCP'}"
        if port.get("nodePort"):
            text = f"{port.get('port')}:{port.get('nodePort')}/{port.get('protocol') or 'TCP'}"
        out.append(text)
    return ",".join(out) if out else "<none>"


def _service_cells(svc: Obj, now: datetime) -> list[Any]:
    spec = _spec(svc)
    cluster_ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
    return [
        _meta(svc).get("name"),
        spec.get("type") or "",
        ",".join(cluster_ips) if cluster_ips else "<none>",
        _service_external_ip(svc),
        _service_ports(spec.get("ports")),
        _age(svc, now),
        _format_labels(spec.get("selector")),
    ]


SERVICE_PRINTER = TablePrinter(
    columns=(
        NAME,
        Column("Type", description="type determines how the Service is exposed."),
        Column("Cluster-IP", description="clusterIP is the IP address of the service."),
        Column(
            "External-IP",
            description="externalIPs is a list of IP addresses for which nodes in the cluster "
            "will also accept traffic for this service.",
        ),
        Column("Port(s)", description="The list of ports that are exposed by this service."),
        AGE,
        Column(
            "Selector",
            priority=1,
            description="Route service traffic to pods with label keys and values matching "
            "this selector.",
        ),
    ),
    cells=_service_cells,
)


def _configmap_cells(cm: Obj, now: datetime) -> list[Any]:
    """``printConfigMap``: NAME DATA AGE (``data`` and ``binaryData`` keys together)."""
    data = _count(cm.get("data")) + _count(cm.get("binaryData"))
    return [_meta(cm).get("name", ""), data, _age(cm, now)]


CONFIGMAP_PRINTER = TablePrinter(
    columns=(
        NAME,
        Column("Data", description="Data contains the configuration data."),
        AGE,
    ),
    cells=_configmap_cells,
)


def _secret_cells(secret: Obj, now: datetime) -> list[Any]:
    """``printSecret``: NAME TYPE DATA AGE."""
    return [
        _meta(secret).get("name", ""),
        secret.get("type") or "",
        _count(secret.get("data")),
        _age(secret, now),
    ]


SECRET_PRINTER = TablePrinter(
    columns=(
        NAME,
        Column("Type", description="Used to facilitate programmatic handling of secret data."),
        Column("Data", description="Data contains the secret data."),
        AGE,
    ),
    cells=_secret_cells,
)


def _service_account_cells(sa: Obj, now: datetime) -> list[Any]:
    """``printServiceAccount``: NAME SECRETS AGE."""
    return [_meta(sa).get("name", ""), _count(sa.get("secrets")), _age(sa, now)]


SERVICE_ACCOUNT_PRINTER = TablePrinter(
    columns=(
        NAME,
        Column("Secrets", description="Secrets is a list of the secrets in the same namespace."),
        AGE,
    ),
    cells=_service_account_cells,
)


# ---- storage: storage classes, persistent volumes and claims

_BETA_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
_ACCESS_MODE_SHORT = (
    ("ReadWriteOnce", "RWO"),
    ("ReadOnlyMany", "ROX"),
    ("ReadWriteMany", "RWX"),
    ("ReadWriteOncePod", "RWOP"),
)


def _access_modes(modes: Any) -> str:
    """``helper.GetAccessModesAsString``: ``RWO,ROX,RWX,RWOP`` in that order, each once."""
    present = set(modes) if isinstance(modes, list) else set()
    return ",".join(short for mode, short in _ACCESS_MODE_SHORT if mode in present)


def _volume_class(obj: Obj) -> str:
    """The beta class annotation if set, else ``spec.storageClassName``."""
    annotations = _meta(obj).get("annotations") or {}
    if _BETA_CLASS_ANNOTATION in annotations:
        return str(annotations[_BETA_CLASS_ANNOTATION])
    return str(_spec(obj).get("storageClassName") or "")


def _volume_phase(obj: Obj) -> str:
    return "Terminating" if _meta(obj).get("deletionTimestamp") else _status(obj).get("phase") or ""


def _storage_class_cells(sc: Obj, now: datetime) -> list[Any]:
    """``printStorageClass``: NAME (``(default)`` after the default's) PROVISIONER RECLAIMPOLICY
    VOLUMEBINDINGMODE ALLOWVOLUMEEXPANSION AGE."""
    name = str(_meta(sc).get("name", ""))
    return [
        name + " (default)" if is_default_class(sc) else name,
        sc.get("provisioner") or "",
        sc.get("reclaimPolicy") or "Delete",
        sc.get("volumeBindingMode") or "Immediate",
        sc.get("allowVolumeExpansion") is True,
        _age(sc, now),
    ]


STORAGE_CLASS_PRINTER = TablePrinter(
    columns=(
        NAME,
        Column("Provisioner", description="Provisioner indicates the type of the provisioner."),
        Column("ReclaimPolicy", description="Dynamically provisioned volumes' reclaim policy."),
        Column("VolumeBindingMode", description="When volume binding and provisioning occur."),
        Column("AllowVolumeExpansion", description="Whether the class allows volume expansion."),
        AGE,
    ),
    cells=_storage_class_cells,
)

_VOLUME_MODE = Column("VolumeMode", priority=1, description="How a volume is consumed.")
_VOLUME_ATTRIBUTES_CLASS = Column(
    "VolumeAttributesClass", description="The VolumeAttributesClass the volume belongs to."
)


def _pv_cells(pv: Obj, now: datetime) -> list[Any]:
    """``printPersistentVolume``: NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM
    STORAGECLASS VOLUMEATTRIBUTESCLASS REASON AGE | VOLUMEMODE."""
    spec = _spec(pv)
    ref = spec.get("claimRef")
    claim = f"{ref.get('namespace') or ''}/{ref.get('name') or ''}" if ref else ""
    return [
        _meta(pv).get("name", ""),
        str((spec.get("capacity") or {}).get("storage") or "0"),
        _access_modes(spec.get("accessModes")),
        spec.get("persistentVolumeReclaimPolicy") or "",
        _volume_phase(pv),
        claim,
        _volume_class(pv),
        spec.get("volumeAttributesClassName") or "<unset>",
        _status(pv).get("reason") or "",
        _age(pv, now),
        spec.get("volumeMode") or "<unset>",
    ]


PV_PRINTER = TablePrinter(
    columns=(
        NAME,
        Column("Capacity", description="The actual resources of the volume."),
        Column("Access Modes", description="All ways the volume can be mounted."),
        Column("Reclaim Policy", description="What happens to the volume when released."),
        Column("Status", description="The phase of the volume."),
        Column("Claim", description="The claim bound to the volume."),
        Column("StorageClass", description="The StorageClass the volume belongs to."),
        _VOLUME_ATTRIBUTES_CLASS,
        Column("Reason", description="Why the volume is in this phase."),
        AGE,
        _VOLUME_MODE,
    ),
    cells=_pv_cells,
)


def _pvc_cells(pvc: Obj, now: datetime) -> list[Any]:
    """``printPersistentVolumeClaim``: NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS
    VOLUMEATTRIBUTESCLASS AGE | VOLUMEMODE. Capacity and modes are the bound volume's."""
    spec, status = _spec(pvc), _status(pvc)
    capacity = modes = ""
    if spec.get("volumeName"):
        modes = _access_modes(status.get("accessModes"))
        capacity = str((status.get("capacity") or {}).get("storage") or "0")
    return [
        _meta(pvc).get("name", ""),
        _volume_phase(pvc),
        spec.get("volumeName") or "",
        capacity,
        modes,
        _volume_class(pvc),
        spec.get("volumeAttributesClassName") or "<unset>",
        _age(pvc, now),
        spec.get("volumeMode") or "<unset>",
    ]


PVC_PRINTER = TablePrinter(
    columns=(
        NAME,
        Column("Status", description="The phase of the claim."),
        Column("Volume", description="The volume bound to the claim."),
        Column("Capacity", description="The actual resources of the bound volume."),
        Column("Access Modes", description="The access modes of the bound volume."),
        Column("StorageClass", description="The StorageClass the claim asks for."),
        _VOLUME_ATTRIBUTES_CLASS,
        AGE,
        _VOLUME_MODE,
    ),
    cells=_pvc_cells,
)


# ---- rbac: roles and bindings

_ZERO_TIME = "0001-01-01T00:00:00Z"
"""How Go prints an unset ``metav1.Time`` in RFC 3339."""


def _created_at(obj: Obj) -> str:
    parsed = _parse_time(_meta(obj).get("creationTimestamp"))
    return parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if parsed else _ZERO_TIME


def _role_cells(role: Obj, now: datetime) -> list[Any]:
    """Kubernetes has no printer for roles: the default table convertor's NAME CREATED AT."""
    return [_meta(role).get("name", ""), _created_at(role)]


ROLE_PRINTER = TablePrinter(
    columns=(
        NAME,
        Column(
            "Created At",
            type="date",
            description="CreationTimestamp is when this object was created.",
        ),
    ),
    cells=_role_cells,
)


def _subject_names(subjects: Any) -> tuple[str, str, str]:
    """``rbac.SubjectsStrings``: users, groups and ``namespace/name`` service accounts, each
    joined with ``", "`` (other kinds are not shown)."""
    users: list[str] = []
    groups: list[str] = []
    accounts: list[str] = []
    for subject in _dict_items(subjects):
        kind, name = subject.get("kind"), str(subject.get("name") or "")
        if kind == "ServiceAccount":
            accounts.append(f"{subject.get('namespace') or ''}/{name}")
        elif kind == "User":
            users.append(name)
        elif kind == "Group":
            groups.append(name)
    return ", ".join(users), ", ".join(groups), ", ".join(accounts)


def _binding_cells(binding: Obj, now: datetime) -> list[Any]:
    """``printRoleBinding`` / ``printClusterRoleBinding``: NAME ROLE AGE, wide USERS GROUPS
    SERVICEACCOUNTS; ROLE is ``<kind>/<name>`` of the roleRef."""
    ref = binding.get("roleRef") or {}
    return [
        _meta(binding).get("name", ""),
        f"{ref.get('kind') or ''}/{ref.get('name') or ''}",
        _age(binding, now),
        *_subject_names(binding.get("subjects")),
    ]


def _binding_printer(role_ref: str) -> TablePrinter:
    return TablePrinter(
        columns=(
            NAME,
            Column("Role", description=role_ref),
            AGE,
            Column("Users", priority=1, description="Users in the roleBinding"),
            Column("Groups", priority=1, description="Groups in the roleBinding"),
            Column("ServiceAccounts", priority=1, description="ServiceAccounts in the roleBinding"),
        ),
        cells=_binding_cells,
    )


ROLE_BINDING_PRINTER = _binding_printer(
    "RoleRef can reference a Role in the current namespace or a ClusterRole in the global "
    "namespace. This field is immutable."
)
CLUSTER_ROLE_BINDING_PRINTER = _binding_printer(
    "RoleRef can only reference a ClusterRole in the global namespace. This field is immutable."
)


def _default_cells(obj: Obj, now: datetime) -> list[Any]:
    return [_meta(obj).get("name", ""), _age(obj, now)]


DEFAULT_PRINTER = TablePrinter(columns=(NAME, AGE), cells=_default_cells)

PRINTERS: dict[tuple[str, str], TablePrinter] = {
    ("", "Pod"): POD_PRINTER,
    ("", "Node"): NODE_PRINTER,
    ("", "ReplicationController"): RC_PRINTER,
    ("apps", "ReplicaSet"): RS_PRINTER,
    ("apps", "Deployment"): DEPLOYMENT_PRINTER,
    ("apps", "DaemonSet"): DAEMON_SET_PRINTER,
    ("apps", "StatefulSet"): STATEFUL_SET_PRINTER,
    ("apps", "ControllerRevision"): CONTROLLER_REVISION_PRINTER,
    ("batch", "Job"): JOB_PRINTER,
    ("batch", "CronJob"): CRON_JOB_PRINTER,
    ("policy", "PodDisruptionBudget"): PDB_PRINTER,
    ("autoscaling", "HorizontalPodAutoscaler"): HPA_PRINTER,
    ("", "Endpoints"): ENDPOINTS_PRINTER,
    ("discovery.k8s.io", "EndpointSlice"): ENDPOINT_SLICE_PRINTER,
    ("", "Event"): EVENT_PRINTER,
    ("events.k8s.io", "Event"): EVENT_PRINTER,
    ("", "Namespace"): NAMESPACE_PRINTER,
    ("", "Service"): SERVICE_PRINTER,
    ("coordination.k8s.io", "Lease"): LEASE_PRINTER,
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"): FLOW_SCHEMA_PRINTER,
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"): PRIORITY_LEVEL_PRINTER,
    ("", "ConfigMap"): CONFIGMAP_PRINTER,
    ("", "Secret"): SECRET_PRINTER,
    ("", "ServiceAccount"): SERVICE_ACCOUNT_PRINTER,
    ("storage.k8s.io", "StorageClass"): STORAGE_CLASS_PRINTER,
    ("", "PersistentVolume"): PV_PRINTER,
    ("", "PersistentVolumeClaim"): PVC_PRINTER,
    ("rbac.authorization.k8s.io", "Role"): ROLE_PRINTER,
    ("rbac.authorization.k8s.io", "ClusterRole"): ROLE_PRINTER,
    ("rbac.authorization.k8s.io", "RoleBinding"): ROLE_BINDING_PRINTER,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): CLUSTER_ROLE_BINDING_PRINTER,
}


def printer_for(rt: ResourceType) -> TablePrinter:
    if rt.custom is not None:
        return custom_printer(rt.custom)
    return PRINTERS.get((rt.group, rt.kind), DEFAULT_PRINTER)


def _custom_cell(type_: str, values: list[Any], now: datetime) -> Any:
    """One ``additionalPrinterColumns`` cell as the apiextensions table convertor makes it:
    the first value the path selects, as the column's type (a date as its age); else null."""
    if not values:
        return None
    value = values[0]
    if type_ == "string":
        return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    if type_ == "date":
        return translate_timestamp_since(value, now)
    if type_ == "integer" and isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    if type_ == "number" and isinstance(value, int | float) and not isinstance(value, bool):
        return value
    if type_ == "boolean" and isinstance(value, bool):
        return value
    return None


_GO_ZERO: dict[str, Any] = {"integer": 0, "number": 0, "boolean": False, "string": ""}


def custom_printer(custom: CustomResource) -> TablePrinter:
    """A CRD version's columns: ``Name``, then its ``additionalPrinterColumns``; a built-in
    kind's from its schema (``api.schema_kinds``) likewise."""
    printed = custom.printer_columns
    columns = (
        NAME,
        *(
            Column(
                c.name, type=c.type, description=c.description, priority=c.priority, format=c.format
            )
            for c in printed
        ),
    )

    def cells(obj: Obj, now: datetime) -> list[Any]:
        row = [_custom_cell(c.type, json_path_values(obj, c.json_path), now) for c in printed]
        if custom.builtin:  # a Go printer prints a missing field as its zero value
            row = [
                _GO_ZERO.get(c.type) if v is None else v for c, v in zip(printed, row, strict=True)
            ]
        return [_meta(obj).get("name", ""), *row]

    return TablePrinter(columns=columns, cells=cells)


# --------------------------------------------------------------------------------------------
# negotiation and the Table envelope


def wants_table(accept: str | None) -> bool:
    """True if the first Accept entry the server can satisfy asks for a ``meta.k8s.io`` Table.

    kubectl sends ``application/json;as=Table;v=v1;g=meta.k8s.io,...v1beta1...,application/json``;
    entries are taken in the client's order (q-values are not weighed), so a client that lists
    plain JSON first gets plain JSON.
    """
    if not accept:
        return False
    for entry in accept.split(","):
        media, *raw_params = (part.strip() for part in entry.split(";"))
        params = {}
        for raw in raw_params:
            key, _, value = raw.partition("=")
            params[key.strip().lower()] = value.strip()
        if media not in ("application/json", "application/*", "*/*"):
            continue
        if "as" not in params:
            return False  # plain JSON (or anything) satisfies this entry first
        if (
            params["as"] == "Table"
            and params.get("g") == "meta.k8s.io"
            and params.get("v") in ("v1", "v1beta1")
        ):
            return True
    return False


def _partial_object_metadata(obj: Obj) -> dict[str, Any]:
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": dict(_meta(obj)),
    }


def to_table(
    rt: ResourceType,
    objects: list[dict[str, Any]],
    *,
    include_object: str = "Metadata",
    resource_version: str | None = None,
    continue_token: str | None = None,
    with_headers: bool = True,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The ``meta.k8s.io/v1`` Table of ``objects`` (one row each, in order) of type ``rt``.

    ``include_object`` is the ``includeObject`` query parameter (``""`` means the default,
    ``Metadata``); anything else is a 400. ``with_headers=False`` leaves ``columnDefinitions``
    null, as the apiserver does for every watch event after the first.
    """
    policy = include_object or "Metadata"
    if policy not in INCLUDE_OBJECT_POLICIES:
        raise BadRequest(
            f'unsupported includeObject "{include_object}": supported values are '
            + ", ".join(f'"{p}"' for p in INCLUDE_OBJECT_POLICIES)
        )
    printer = printer_for(rt)
    moment = now or datetime.now(UTC)
    rows: list[dict[str, Any]] = []
    for obj in objects:
        # a version served from another's storage prints as the stored one (as Kubernetes
        # prints from its internal version): `kubectl get hpa` reads the same via v1 and v2
        printed = obj if rt.conversion is None else rt.conversion.to_storage(obj)
        row: dict[str, Any] = {"cells": printer.cells(printed, moment)}
        conditions = printer.conditions(printed) if printer.conditions else None
        if conditions:
            row["conditions"] = conditions
        if policy == "Metadata":
            row["object"] = _partial_object_metadata(obj)
        elif policy == "Object":
            row["object"] = obj
        rows.append(row)
    metadata: dict[str, Any] = {}
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    if continue_token:
        metadata["continue"] = continue_token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": [c.definition() for c in printer.columns] if with_headers else None,
        "rows": rows,
    }
