"""What a pod contributes to a Service's endpoints: the rules the endpoints, endpointslice and
mirroring controllers share (``pkg/controller/util/endpoint``, ``endpointslice/util``).

* ``service_selector(svc)``: the Service's ``spec.selector`` as a ``LabelSelector``, or None
  for a Service the selector-driven controllers leave alone (no selector, or ``ExternalName``);
* ``should_be_in_endpoints(pod, include_terminating=...)``: not terminal, has an IP, and (unless
  terminating pods are wanted) not being deleted — ``ShouldPodBeInEndpoints``;
* ``find_port(pod, service_port)``: the target port number for this pod — an integer
  ``targetPort`` as is (``port`` when unset), a named one looked up in the pod's containers'
  ``ports`` by name and protocol (``podutil.FindPort``); None when the pod has no such port;
* ``hostname_for(pod, svc)``: ``spec.hostname`` when the pod's ``spec.subdomain`` names this
  Service in its namespace (how a headless Service gives pods DNS names), else None;
* ``pod_ref(pod)``: the ``targetRef`` pointing back at the pod;
* ``services_selecting(services, old, new)``: which Services a pod change concerns;
* ``enqueue_services_and_their_pods(queue, services=..., pods=...)``: the event handlers both
  Service-keyed controllers (endpoints, endpointslice) start with — a Service's add, update or
  delete enqueues it, a pod's enqueues the Services in its namespace selecting its old or new
  labels, straight from the watch event.

Limits: IPv4 and IPv6 pod addresses are read from ``status.podIP`` only (kubelite pods are
single-stack).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from api.selectors import LabelSelector, label_selector_from_dict
from client.cache import NAMESPACE_INDEX, object_key
from client.informer import Informer
from client.workqueue import WorkQueue
from services.controller_manager.pod_state import is_ready

__all__ = [
    "address_type",
    "enqueue_services_and_their_pods",
    "find_port",
    "hostname_for",
    "is_ready",
    "is_terminating",
    "pod_ref",
    "service_selector",
    "services_selecting",
    "should_be_in_endpoints",
]

Obj = Mapping[str, Any]


def _spec(obj: Obj) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def service_selector(svc: Obj) -> LabelSelector | None:
    """The pods ``svc`` selects; None when it has no selector or is an ``ExternalName``."""
    spec = _spec(svc)
    selector = spec.get("selector")
    if spec.get("type") == "ExternalName" or not isinstance(selector, Mapping) or not selector:
        return None
    return label_selector_from_dict({"matchLabels": dict(selector)})


def is_terminating(pod: Obj) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def should_be_in_endpoints(pod: Obj, *, include_terminating: bool) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed") or not status.get("podIP"):
        return False
    return include_terminating or not is_terminating(pod)


def address_type(ip: str) -> str:
    return "IPv6" if ":" in ip else "IPv4"


def find_port(pod: Obj, service_port: Mapping[str, Any]) -> int | None:
    target = service_port.get("targetPort")
    if target is None or target == 0 or target == "":
        target = service_port.get("port")
    if isinstance(target, int):
        return target
    protocol = service_port.get("protocol") or "TCP"
    for container in _spec(pod).get("containers") or []:
        for port in (container or {}).get("ports") or []:
            if port.get("name") == target and (port.get("protocol") or "TCP") == protocol:
                number = port.get("containerPort")
                return number if isinstance(number, int) else None
    return None


def hostname_for(pod: Obj, svc: Obj) -> str | None:
    pod_spec, meta = _spec(pod), pod.get("metadata") or {}
    svc_meta = svc.get("metadata") or {}
    if (
        pod_spec.get("hostname")
        and pod_spec.get("subdomain") == svc_meta.get("name")
        and meta.get("namespace") == svc_meta.get("namespace")
    ):
        return str(pod_spec["hostname"])
    return None


def pod_ref(pod: Obj) -> dict[str, Any]:
    meta = pod.get("metadata") or {}
    return {
        "kind": "Pod",
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
    }


def services_selecting(services: Iterable[Obj], *pods: Obj | None) -> set[str]:
    """Keys (``ns/name``) of the ``services`` whose selector matches any of ``pods`` (old and
    new versions of one pod: a relabelled pod leaves one Service for another)."""
    keys: set[str] = set()
    for svc in services:
        selector = service_selector(svc)
        if selector is None:
            continue
        meta = svc.get("metadata") or {}
        for pod in pods:
            if pod is None or (pod.get("metadata") or {}).get("namespace") != meta.get("namespace"):
                continue
            if selector.matches((pod.get("metadata") or {}).get("labels") or {}):
                keys.add(f"{meta.get('namespace')}/{meta.get('name')}")
    return keys


def enqueue_services_and_their_pods(
    queue: WorkQueue[str], *, services: Informer, pods: Informer
) -> None:
    """Add handlers that put into ``queue`` the key of every Service changed and of every
    Service selecting a changed pod (its old or new labels)."""

    def service_changed(svc: Obj) -> None:
        queue.add(object_key(svc))

    def pod_changed(old: Obj | None, new: Obj) -> None:
        namespace = str((new.get("metadata") or {}).get("namespace") or "")
        for key in services_selecting(services.by_index(NAMESPACE_INDEX, namespace), old, new):
            queue.add(key)

    services.add_handler(on_change=service_changed)
    pods.add_handler(
        on_add=lambda pod: pod_changed(None, pod),
        on_update=pod_changed,
        on_delete=lambda pod: pod_changed(None, pod),
    )
