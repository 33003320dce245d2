"""``kubelite trace``: the seed's steps as they really happened, for one pod or replica set.

Why: the seed follows one pod through the apiserver, the controller-manager, the scheduler
and the kubelet; no Kubernetes tool shows that flow for a real pod. ``api.pod_trace`` reads it
from what the components left on the API; this command fetches those objects and prints the
steps as a table (``OFFSET COMPONENT STEP DETAIL``) or as JSON (``-o json``):

* ``kubelite trace pod NAME [-n NS]``: the pod, the Events of its namespace, and the objects
  named in its ``ownerReferences`` (whose ``SuccessfulCreate`` Events say when the
  controller-manager made it);
* ``kubelite trace rs|replicaset|rc|replicationcontroller NAME``: the owner's scale-up — each
  of its pods created, scheduled, started and ready;
* ``--watch``: informers on the object, its pods and the namespace's Events; every step is
  printed once, as soon as its evidence arrives, until the pod is Running and Ready (or has
  finished) — a replica set: until all its replicas are ready. Waits for a pod not created
  yet. A watched pod also gets a **running observed** step: when this command's watch first
  saw phase Running (this machine's clock).

Connection flags are the components' own (``--kubeconfig``, ``--server``, ``--context`` ...);
with none, ``$KUBECONFIG``, else ``http://127.0.0.1:8080``.

What it does not do: it reads Events of one namespace only, and Events expire (``--event-ttl``,
one hour by default): an old pod's trace has gaps. Without ``--watch`` it prints what is there
now, once; steps are ordered by the servers' clocks, which on one machine are one clock.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import uvloop

from api.errors import NotFound, StatusError
from api.pod_trace import TraceStep, pod_trace, replicaset_trace
from api.registry import REGISTRY, ResourceType
from client.informer import Informer
from client.kubeconfig import DEFAULT_SERVER, ClientConfig, KubeconfigError, add_client_arguments
from client.rest import ApiClient

__all__ = ["build_parser", "format_table", "main"]

Obj = dict[str, Any]

KINDS = {
    "pod": ("", "Pod"),
    "pods": ("", "Pod"),
    "po": ("", "Pod"),
    "rs": ("apps", "ReplicaSet"),
    "replicaset": ("apps", "ReplicaSet"),
    "replicasets": ("apps", "ReplicaSet"),
    "rc": ("", "ReplicationController"),
    "replicationcontroller": ("", "ReplicationController"),
    "replicationcontrollers": ("", "ReplicationController"),
}
HEADER = ("OFFSET", "COMPONENT", "STEP", "DETAIL")
WIDTHS = (10, 20, 28)
RUNNING_OBSERVED = "running observed"


PODS = REGISTRY.require("", "Pod")
EVENTS = REGISTRY.require("", "Event")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubelite trace",
        description="Print the steps a pod (or a replica set's scale-up) went through — "
        "created, scheduled, seen by the kubelet, started, ready — with each step's time "
        "offset and the component that did it, from Events, conditions and managedFields.",
    )
    p.add_argument(
        "kind",
        choices=sorted(KINDS),
        metavar="KIND",
        help="pod (po), or a replica set's owner: rs (replicaset) or rc (replicationcontroller)",
    )
    p.add_argument("name")
    p.add_argument("-n", "--namespace", default=None, help="namespace (default: the context's)")
    p.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help="print each step as it happens, until the pod is Running and Ready (a replica "
        "set: all replicas ready); waits for a pod not created yet",
    )
    p.add_argument(
        "-o", "--output", choices=("table", "json"), default="table", help="(default table)"
    )
    add_client_arguments(p)
    return p


# -- printing -------------------------------------------------------------------------------


def _row(cells: Sequence[str]) -> str:
    padded = [cell.ljust(width) for cell, width in zip(cells, WIDTHS, strict=False)]
    return "  ".join([*padded, *cells[len(WIDTHS) :]]).rstrip()


def format_table(steps: Sequence[TraceStep], *, header: bool = True) -> list[str]:
    """``OFFSET COMPONENT STEP DETAIL`` lines (the offset in seconds, to the millisecond)."""
    rows = [_row(HEADER)] if header else []
    for s in steps:
        rows.append(_row((f"+{s.offset:.3f}s", s.component, s.step, s.detail)))
    return rows


class Printer:
    """Prints each step once: a step already printed is recognised by its step, component
    and detail, less a trailing parenthesis (an Event's growing ``(xN)``, a resourceVersion
    learnt later)."""

    def __init__(self, output: str) -> None:
        self.output = output
        self.printed: set[tuple[str, str, str]] = set()
        self.header = output == "table"

    @staticmethod
    def _key(step: TraceStep) -> tuple[str, str, str]:
        return step.step, step.component, re.sub(r" \([^()]*\)$", "", step.detail)

    def show(self, steps: Sequence[TraceStep]) -> None:
        fresh = [s for s in steps if self._key(s) not in self.printed]
        self.printed.update(self._key(s) for s in fresh)
        if self.output == "json":
            for step in fresh:
                print(json.dumps(step.to_json()))
        else:
            for line in format_table(fresh, header=self.header):
                print(line)
            self.header = self.header and not fresh
        sys.stdout.flush()


# -- what is traced ---------------------------------------------------------------------------


@dataclass
class Subject:
    """What a trace is computed from: the traced object, its pods or owners, the Events."""

    kind: str
    name: str
    namespace: str
    obj: Obj | None = None
    pods: list[Obj] = field(default_factory=list)
    owners: list[Obj] = field(default_factory=list)
    events: list[Obj] = field(default_factory=list)
    running_seen: datetime | None = None

    @property
    def is_pod(self) -> bool:
        return self.kind == "Pod"

    def steps(self) -> list[TraceStep]:
        if self.obj is None:
            return []
        if not self.is_pod:
            return replicaset_trace(self.obj, self.pods, self.events)
        steps = pod_trace(self.obj, self.events, self.owners)
        if self.running_seen is None or not steps:
            return steps
        offset = (self.running_seen - steps[0].at).total_seconds()
        seen = TraceStep(
            RUNNING_OBSERVED,
            "kubelite trace",
            self.running_seen,
            offset,
            "phase Running, seen by this watch",
        )
        return sorted([*steps, seen], key=lambda step: step.at)

    def done(self) -> bool:
        obj = self.obj
        if obj is None:
            return False
        status = obj.get("status") or {}
        if self.is_pod:
            phase = status.get("phase")
            return phase in ("Succeeded", "Failed") or (phase == "Running" and _ready(obj))
        wanted = (obj.get("spec") or {}).get("replicas")
        wanted = 1 if wanted is None else int(wanted)
        return int(status.get("readyReplicas") or 0) >= wanted and len(self.pods) >= wanted


def _ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _owned_by(pod: Obj, owner: Obj) -> bool:
    uid = (owner.get("metadata") or {}).get("uid")
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    return any(ref.get("uid") == uid for ref in refs)


def _owner_type(ref: Obj) -> ResourceType | None:
    group = str(ref.get("apiVersion") or "").rpartition("/")[0]
    return REGISTRY.by_kind(group, str(ref.get("kind") or ""))


async def _owners(client: ApiClient, pod: Obj, namespace: str) -> list[Obj]:
    owners = []
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        rt = _owner_type(ref)
        if rt is None:
            continue
        try:
            owners.append(await client.get(rt, str(ref.get("name")), namespace=namespace))
        except NotFound:
            continue
    return owners


async def read_once(client: ApiClient, subject: Subject, rt: ResourceType) -> None:
    """Fill ``subject`` with what the API holds now."""
    ns = subject.namespace
    subject.obj = await client.get(rt, subject.name, namespace=ns)
    subject.events = (await client.list(EVENTS, namespace=ns))["items"]
    if subject.is_pod:
        subject.owners = await _owners(client, subject.obj, ns)
    else:
        pods = (await client.list(PODS, namespace=ns))["items"]
        subject.pods = [p for p in pods if _owned_by(p, subject.obj)]


async def watch(client: ApiClient, subject: Subject, rt: ResourceType, printer: Printer) -> None:
    """Print steps as the informers deliver their evidence, until ``subject.done()``."""
    ns = subject.namespace
    selector = f"metadata.name={subject.name}"
    target = Informer(client, rt, namespace=ns, field_selector=selector, name="trace target")
    events = Informer(client, EVENTS, namespace=ns, name="trace events")
    pods = Informer(client, PODS, namespace=ns, name="trace pods") if not subject.is_pod else None
    informers = [i for i in (target, events, pods) if i is not None]
    changed = asyncio.Event()
    for informer in informers:
        informer.add_handler(on_change=lambda _obj: changed.set())
    tasks = [informer.start() for informer in informers]
    try:
        await asyncio.gather(*(informer.wait_synced() for informer in informers))
        while True:
            changed.clear()
            await _refresh(client, subject, target=target, events=events, pods=pods)
            printer.show(subject.steps())
            if subject.done():
                return
            await changed.wait()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _refresh(
    client: ApiClient,
    subject: Subject,
    *,
    target: Informer,
    events: Informer,
    pods: Informer | None,
) -> None:
    found = target.list()
    obj = found[0] if found else None
    if subject.is_pod and obj is not None and not subject.owners:
        subject.owners = await _owners(client, obj, subject.namespace)
    if obj is not None and subject.is_pod and subject.running_seen is None:
        if (obj.get("status") or {}).get("phase") == "Running":
            subject.running_seen = datetime.now(UTC)
    subject.obj = obj
    subject.events = events.list()
    if pods is not None and obj is not None:
        subject.pods = [p for p in pods.list() if _owned_by(p, obj)]


# -- the command ------------------------------------------------------------------------------


async def run(args: argparse.Namespace, config: ClientConfig) -> int:
    group, kind = KINDS[args.kind]
    rt = REGISTRY.require(group, kind)
    namespace = args.namespace or config.namespace or "default"
    subject = Subject(kind=kind, name=args.name, namespace=namespace)
    printer = Printer(args.output)
    async with ApiClient(config) as client:
        if args.watch:
            await watch(client, subject, rt, printer)
            return 0
        try:
            await read_once(client, subject, rt)
        except NotFound:
            missing = f'{rt.plural} "{args.name}" not found'
            print(f"Error from server (NotFound): {missing}", file=sys.stderr)
            return 1
        printer.show(subject.steps())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    try:
        config = ClientConfig.from_args(args, default_server=DEFAULT_SERVER)
    except KubeconfigError as exc:
        parser.error(str(exc))
    try:
        return uvloop.run(run(args, config))
    except (ConnectionError, StatusError) as exc:
        print(f"kubelite trace: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
