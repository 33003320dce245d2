"""Object validation: a request body (dict) in, Kubernetes field causes out.

Why: a bad object must be refused before it is stored, with the 422 ``Invalid`` answer a real
cluster gives — ``Pod "web" is invalid: spec.containers[0].image: Required value`` — because
kubectl prints those causes to people, and clients key on their ``reason``. The apiserver calls
``validate(rt, obj)`` on create (after ``api.defaults.apply_defaults``),
``validate_update(rt, new, old)`` on update and ``validate_status_update(rt, new, old)`` on a
status write (metadata and status only, as Kubernetes' status strategies check); an empty list
means valid.

How: two passes over the same dict. First the resource's pydantic model (``rt.model``) checks
shape and types; its errors become causes, their ``loc`` turned into Kubernetes field paths
(JSON names, ``[i]`` for list items, ``[key]`` for map keys). Then semantic checks, written
after ``pkg/apis/*/validation``: name syntax, labels and annotations, containers, ports,
resources, enums, tolerations, node affinity, controller selectors versus template labels,
node addresses and the kubelet port (``api.addresses``), leases, events, ConfigMap and Secret
keys, base64, sizes and per-type keys (``ValidateConfigMap``/``ValidateSecret``), StorageClass,
PersistentVolume and PersistentVolumeClaim specs, DaemonSet/StatefulSet strategies, Job specs
and their generated selectors, CronJob schedules (``api.cron``) and time zones (``zoneinfo``),
PodDisruptionBudget specs, Endpoints subsets and EndpointSlices (addresses, ports,
protocols; loopback addresses allowed, unlike Kubernetes: kubelite's pods live on 127.0.0.0/8),
RBAC roles' rules and bindings' roleRef and subjects (``pkg/apis/rbac/validation``; their names
need only be path segments),
and for updates the immutable fields (``immutable: true`` contents,
a Secret's type, StorageClass parameters, PV sources, PVC specs, a Job's selector and template,
a StatefulSet's spec beyond replicas/template/strategy, a ControllerRevision's data, an
EndpointSlice's addressType, a binding's roleRef). Semantic checks read the dict defensively, and a cause under a path pydantic
already reported is dropped, so one mistake gives one cause.

Messages follow Kubernetes' ``field.Error`` wording (``Required value``, ``Invalid value: "x":
...``, ``Unsupported value: "x": supported values: "a", "b"``, ``Duplicate value: "x"``,
``Forbidden: ...``). Causes have keys ``reason``, ``message``, ``field``.

Limits: only the rules listed above; no cross-object checks (quota, priority classes, whether
a node exists). Type errors, which Kubernetes reports as 400 decode errors, are reported here
as ``FieldValueInvalid`` causes instead.
"""

from __future__ import annotations

import base64
import binascii
import functools
import ipaddress
import json
import re
import types
import urllib.parse
import zoneinfo
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, TypeGuard, Union, cast, get_args, get_origin

from pydantic import BaseModel, ValidationError, create_model

from api.addresses import address_errors
from api.admissionregistration import (
    FAILURE_POLICIES,
    MATCH_POLICIES,
    REINVOCATION_POLICIES,
    VALIDATION_ACTIONS,
)
from api.admissionregistration import OPERATIONS as ADMISSION_OPERATIONS
from api.admissionregistration import SCOPES as ADMISSION_SCOPES
from api.admissionregistration import SIDE_EFFECTS as ADMISSION_SIDE_EFFECTS
from api.batch import (
    CONTROLLER_UID_LABEL,
    JOB_NAME_LABEL,
    LEGACY_CONTROLLER_UID_LABEL,
    LEGACY_JOB_NAME_LABEL,
)
from api.cron import parse_schedule
from api.discovery import ADDRESS_TYPES, MAX_ENDPOINTS_PER_SLICE
from api.errors import BadRequest, Cause
from api.flowcontrol import (
    DISTINGUISHER_METHODS,
    LIMIT_RESPONSE_TYPES,
    PRIORITY_LEVEL_TYPES,
    SUBJECT_KINDS,
)
from api.meta import parse_time
from api.names import (
    is_config_map_key,
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_qualified_name,
    is_valid_label_value,
)
from api.policy import UNHEALTHY_POD_EVICTION_POLICIES
from api.quantity import parse_quantity
from api.registry import ResourceType
from api.selectors import label_selector_from_dict

__all__ = [
    "POD_UPDATE_FORBIDDEN",
    "duplicate",
    "forbidden",
    "invalid",
    "not_supported",
    "only_status_differs",
    "required",
    "validate",
    "validate_status_update",
    "validate_update",
]

POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
    "`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)
SELECTOR_MISMATCH = "`selector` does not match template `labels`"
IMMUTABLE = "field is immutable"
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024


# -- causes ----------------------------------------------------------------------------------


def _show(value: Any) -> str:
    """A value as Kubernetes prints it in an error: strings quoted, numbers bare."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def required(field: str, detail: str = "") -> Cause:
    msg = "Required value" + (f": {detail}" if detail else "")
    return {"reason": "FieldValueRequired", "message": msg, "field": field}


def invalid(field: str, value: Any, detail: str = "") -> Cause:
    msg = f"Invalid value: {_show(value)}" + (f": {detail}" if detail else "")
    return {"reason": "FieldValueInvalid", "message": msg, "field": field}


def not_supported(field: str, value: Any, supported: Iterable[str]) -> Cause:
    values = ", ".join(json.dumps(s) for s in supported)
    msg = f"Unsupported value: {_show(value)}: supported values: {values}"
    return {"reason": "FieldValueNotSupported", "message": msg, "field": field}


def duplicate(field: str, value: Any) -> Cause:
    return {
        "reason": "FieldValueDuplicate",
        "message": f"Duplicate value: {_show(value)}",
        "field": field,
    }


def forbidden(field: str, detail: str) -> Cause:
    return {"reason": "FieldValueForbidden", "message": f"Forbidden: {detail}", "field": field}


# -- pydantic errors -> causes ---------------------------------------------------------------


def _unwrap(tp: Any) -> Any:
    """Strip ``Annotated`` and ``Optional``; a real union (``int | str``) is returned as is."""
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp = get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            members = [a for a in get_args(tp) if a is not type(None)]
            if len(members) != 1:
                return tp
            tp = members[0]
        else:
            return tp


def _loc_to_path(model: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    """``('spec', 'containers', 0, 'name')`` -> ``spec.containers[0].name``, map keys in ``[]``."""
    path, tp = "", cast(Any, model)
    for part in loc:
        tp = _unwrap(tp)
        origin = get_origin(tp)
        if isinstance(part, int):
            path += f"[{part}]"
            args = get_args(tp)
            tp = args[0] if args else Any
        elif isinstance(tp, type) and issubclass(tp, BaseModel):
            name = str(part)
            for fname, info in tp.model_fields.items():
                if part in (info.alias, fname):
                    name, tp = info.alias or fname, info.annotation
                    break
            else:
                tp = Any
            path += f".{name}" if path else name
        elif origin is dict:
            path += f"[{part}]"
            tp = get_args(tp)[1]
        elif origin in (Union, types.UnionType):
            continue  # a union member tag such as 'int' or 'str', not a field
        else:
            path += f".{part}" if path else str(part)
    return path


def _pydantic_causes(model: type[BaseModel], obj: dict[str, Any]) -> list[Cause]:
    try:
        model.model_validate(obj)
    except ValidationError as e:
        causes: list[Cause] = []
        seen: set[str] = set()
        for err in e.errors(include_url=False):
            path = _loc_to_path(model, tuple(err["loc"]))
            if path in seen:
                continue  # a union reports once per member
            seen.add(path)
            if err["type"] == "missing" or (err.get("input", ...) is None):
                causes.append(required(path))  # JSON null is an absent field to Kubernetes
            elif err["type"] == "literal_error":
                expected = (err.get("ctx") or {}).get("expected", "")
                supported = re.findall(r"'([^']*)'", str(expected))
                causes.append(not_supported(path, err.get("input"), supported))
            else:
                msg = str(err["msg"]).removeprefix("Value error, ")
                msg = re.sub(r" or instance of \w+$", "", msg)
                causes.append(invalid(path, err.get("input"), msg))
        return causes
    return []


# -- helpers for semantic checks -------------------------------------------------------------


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _items(value: Any) -> list[tuple[int, dict[str, Any]]]:
    return [(i, x) for i, x in enumerate(_list(value)) if isinstance(x, dict)]


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _non_negative(field: str, value: Any) -> list[Cause]:
    if _is_int(value) and value < 0:
        return [invalid(field, value, "must be greater than or equal to 0")]
    return []


def _name_checker(fn: Callable[[str], list[str]]) -> Callable[[str, str], list[Cause]]:
    def check(field: str, value: str) -> list[Cause]:
        return [invalid(field, value, msg) for msg in fn(value)]

    return check


_dns_label = _name_checker(is_dns1123_label)
_dns_subdomain = _name_checker(is_dns1123_subdomain)
_dns1035_label = _name_checker(is_dns1035_label)


def _path_segment_name(field: str, name: str) -> list[Cause]:
    """``path.IsValidPathSegmentName``: a role's or binding's name (``system:node`` is fine)."""
    if name in (".", ".."):
        return [invalid(field, name, f"may not be '{name}'")]
    return [invalid(field, name, f"may not contain '{c}'") for c in ("/", "%") if c in name]


_NAME_CHECKS: dict[str, Callable[[str, str], list[Cause]]] = {
    "Namespace": _dns_label,
    "Service": _dns1035_label,
    **dict.fromkeys(
        ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"), _path_segment_name
    ),
}
"""Kinds whose names are not checked as a DNS subdomain: a Namespace's and a Service's are DNS
labels, the RBAC kinds' only path segments (``system:controller:...``)."""
_qualified_name = _name_checker(is_qualified_name)


def _labels(field: str, labels: Any) -> list[Cause]:
    causes: list[Cause] = []
    for k, v in _map(labels).items():
        causes += [invalid(field, k, msg) for msg in is_qualified_name(k)]
        if isinstance(v, str):
            causes += [invalid(field, v, msg) for msg in is_valid_label_value(v)]
    return causes


def _annotations(field: str, annotations: Any) -> list[Cause]:
    causes: list[Cause] = []
    total = 0
    for k, v in _map(annotations).items():
        causes += [invalid(field, k.lower(), msg) for msg in is_qualified_name(k.lower())]
        total += len(k) + (len(v) if isinstance(v, str) else 0)
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        causes.append(
            {
                "reason": "FieldValueTooLong",
                "message": f"Too long: must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} bytes",
                "field": field,
            }
        )
    return causes


# -- metadata --------------------------------------------------------------------------------


def _metadata(rt: ResourceType, meta: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    name_check = _NAME_CHECKS.get(rt.kind, _dns_subdomain)
    name, generate = meta.get("name"), meta.get("generateName")
    if isinstance(generate, str) and generate:
        masked = generate[:-1] + "a" if generate.endswith("-") else generate
        causes += [
            invalid("metadata.generateName", generate, c["message"].split(": ", 2)[-1])
            for c in name_check("metadata.generateName", masked)
        ]
    if not name:
        if not generate:
            causes.append(required("metadata.name", "name or generateName is required"))
    elif isinstance(name, str):
        causes += name_check("metadata.name", name)
    namespace = meta.get("namespace")
    if rt.namespaced:
        if not namespace:
            causes.append(required("metadata.namespace"))
        elif isinstance(namespace, str):
            causes += _dns_label("metadata.namespace", namespace)
    causes += _non_negative("metadata.generation", meta.get("generation"))
    causes += _labels("metadata.labels", meta.get("labels"))
    causes += _annotations("metadata.annotations", meta.get("annotations"))
    for i, fin in enumerate(_list(meta.get("finalizers"))):
        if isinstance(fin, str):
            causes += _qualified_name(f"metadata.finalizers[{i}]", fin)
    for i, ref in _items(meta.get("ownerReferences")):
        for key in ("apiVersion", "kind", "name", "uid"):
            if not ref.get(key):
                causes.append(required(f"metadata.ownerReferences[{i}].{key}"))
    controllers = [r for _, r in _items(meta.get("ownerReferences")) if r.get("controller") is True]
    if len(controllers) > 1:
        causes.append(
            invalid(
                "metadata.ownerReferences",
                [r.get("name") for r in controllers],
                "Only one reference can have Controller set to true",
            )
        )
    return causes


# -- pods ------------------------------------------------------------------------------------

_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_PROTOCOLS = ("SCTP", "TCP", "UDP")
_MESSAGE_POLICIES = ("FallbackToLogsOnError", "File")
_TAINT_EFFECTS = ("NoExecute", "NoSchedule", "PreferNoSchedule")
_TOLERATION_OPERATORS = ("Equal", "Exists")
_NODE_SELECTOR_OPERATORS = ("DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn")
_PORT_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")


def _port_name(field: str, name: str) -> list[Cause]:
    """An IANA_SVC_NAME (``IsValidPortName``): what container ports and target ports are named."""
    if len(name) > 15:
        return [invalid(field, name, "must be no more than 15 characters")]
    if not _PORT_NAME.match(name) or "--" in name or not re.search("[a-z]", name):
        return [
            invalid(
                field,
                name,
                "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"
                " and must contain at least one letter (a-z)",
            )
        ]
    return []


def _port_in_range(field: str, port: Any) -> list[Cause]:
    if _is_int(port) and not 1 <= port <= 65535:
        return [invalid(field, port, "must be between 1 and 65535, inclusive")]
    return []


def _resources(field: str, res: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    parsed: dict[str, dict[str, Any]] = {}
    for part in ("limits", "requests"):
        parsed[part] = {}
        for rname, q in _map(res.get(part)).items():
            path = f"{field}.{part}[{rname}]"
            causes += [invalid(path, rname, m) for m in is_qualified_name(rname)]
            try:
                value = parse_quantity(q)
            except (ValueError, TypeError):
                continue  # pydantic reported it
            if value < 0:
                causes.append(invalid(path, q, "must be greater than or equal to 0"))
            parsed[part][rname] = (q, value)
    for rname, (q, value) in parsed["requests"].items():
        limit = parsed["limits"].get(rname)
        if limit is not None and value > limit[1]:
            causes.append(
                invalid(
                    f"{field}.requests[{rname}]",
                    q,
                    f"must be less than or equal to {rname} limit of {limit[0]}",
                )
            )
    return causes


def _container(field: str, c: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    name = c.get("name")
    if name == "":
        causes.append(required(f"{field}.name"))
    elif isinstance(name, str):
        causes += _dns_label(f"{field}.name", name)
    image = c.get("image")
    if image is None or (isinstance(image, str) and not image.strip()):
        causes.append(required(f"{field}.image"))
    policy = c.get("imagePullPolicy")
    if isinstance(policy, str) and policy not in _PULL_POLICIES:
        causes.append(not_supported(f"{field}.imagePullPolicy", policy, _PULL_POLICIES))
    policy = c.get("terminationMessagePolicy")
    if isinstance(policy, str) and policy not in _MESSAGE_POLICIES:
        causes.append(not_supported(f"{field}.terminationMessagePolicy", policy, _MESSAGE_POLICIES))
    port_names: set[str] = set()
    for i, port in _items(c.get("ports")):
        p = f"{field}.ports[{i}]"
        cp = port.get("containerPort")
        causes += _port_in_range(f"{p}.containerPort", cp)
        hp = port.get("hostPort")
        if _is_int(hp) and hp != 0:
            causes += _port_in_range(f"{p}.hostPort", hp)
        proto = port.get("protocol")
        if isinstance(proto, str) and proto not in _PROTOCOLS:
            causes.append(not_supported(f"{p}.protocol", proto, _PROTOCOLS))
        pname = port.get("name")
        if isinstance(pname, str) and pname:
            causes += _port_name(f"{p}.name", pname)
            if pname in port_names:
                causes.append(duplicate(f"{p}.name", pname))
            port_names.add(pname)
    for i, env in _items(c.get("env")):
        ename = env.get("name")
        if ename == "":
            causes.append(required(f"{field}.env[{i}].name"))
        elif isinstance(ename, str) and "=" in ename:
            causes.append(
                invalid(
                    f"{field}.env[{i}].name",
                    ename,
                    "a valid environment variable name "
                    "must consist only of printable ASCII characters other than '='",
                )
            )
        if env.get("value") and env.get("valueFrom"):
            causes.append(
                invalid(
                    f"{field}.env[{i}].valueFrom",
                    "",
                    "may not be specified when `value` is not empty",
                )
            )
    resources = c.get("resources")
    if isinstance(resources, dict):
        causes += _resources(f"{field}.resources", resources)
    return causes


def _node_selector_requirement(field: str, req: dict[str, Any], *, fields: bool) -> list[Cause]:
    causes: list[Cause] = []
    op, values = req.get("operator"), _list(req.get("values"))
    key = req.get("key")
    if fields:
        if key != "metadata.name":
            causes.append(not_supported(f"{field}.key", key, ["metadata.name"]))
        if op not in ("In", "NotIn"):
            causes.append(not_supported(f"{field}.operator", op, ["In", "NotIn"]))
        elif len(values) != 1:
            causes.append(
                required(
                    f"{field}.values",
                    "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                )
            )
        return causes
    if isinstance(key, str):
        causes += _qualified_name(f"{field}.key", key)
    if op in ("In", "NotIn"):
        if not values:
            causes.append(
                required(f"{field}.values", "must be specified when `operator` is 'In' or 'NotIn'")
            )
    elif op in ("Exists", "DoesNotExist"):
        if values:
            causes.append(
                forbidden(
                    f"{field}.values",
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )
            )
    elif op in ("Gt", "Lt"):
        if len(values) != 1:
            causes.append(
                required(
                    f"{field}.values",
                    "must be specified single value when `operator` is 'Lt' or 'Gt'",
                )
            )
        elif not re.fullmatch(r"[+-]?[0-9]+", str(values[0])):
            causes.append(invalid(f"{field}.values[0]", values[0], "must be an integer"))
    elif isinstance(op, str):
        causes.append(not_supported(f"{field}.operator", op, _NODE_SELECTOR_OPERATORS))
    return causes


def _node_selector_term(field: str, term: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    for i, req in _items(term.get("matchExpressions")):
        causes += _node_selector_requirement(f"{field}.matchExpressions[{i}]", req, fields=False)
    for i, req in _items(term.get("matchFields")):
        causes += _node_selector_requirement(f"{field}.matchFields[{i}]", req, fields=True)
    return causes


def _affinity(field: str, affinity: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    na = _map(affinity.get("nodeAffinity"))
    req_field = f"{field}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    required_ = na.get("requiredDuringSchedulingIgnoredDuringExecution")
    if isinstance(required_, dict):
        terms = _list(required_.get("nodeSelectorTerms"))
        if not terms:
            causes.append(
                required(
                    f"{req_field}.nodeSelectorTerms", "must have at least one node selector term"
                )
            )
        for i, term in _items(terms):
            causes += _node_selector_term(f"{req_field}.nodeSelectorTerms[{i}]", term)
    pref_field = f"{field}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
    for i, pref in _items(na.get("preferredDuringSchedulingIgnoredDuringExecution")):
        weight = pref.get("weight")
        if _is_int(weight) and not 1 <= weight <= 100:
            causes.append(
                invalid(f"{pref_field}[{i}].weight", weight, "must be in the range 1-100")
            )
        causes += _node_selector_term(f"{pref_field}[{i}].preference", _map(pref.get("preference")))
    return causes


def _toleration(field: str, t: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    key, op, value, effect = t.get("key"), t.get("operator"), t.get("value"), t.get("effect")
    if isinstance(key, str) and key:
        causes += _qualified_name(f"{field}.key", key)
    elif op != "Exists":
        causes.append(
            invalid(
                f"{field}.operator",
                op or "",
                'operator must be Exists when `key` is empty, which means "match all values '
                'and all keys"',
            )
        )
    if op == "Exists" and value:
        causes.append(
            invalid(
                f"{field}.operator",
                t.get("value"),
                "value must be empty when `operator` is 'Exists'",
            )
        )
    elif op not in (None, "", "Equal", "Exists"):
        causes.append(not_supported(f"{field}.operator", op, _TOLERATION_OPERATORS))
    elif isinstance(value, str) and value:
        causes += [invalid(f"{field}.value", value, m) for m in is_valid_label_value(value)]
    if t.get("tolerationSeconds") is not None and effect != "NoExecute":
        causes.append(
            invalid(
                f"{field}.effect",
                effect or "",
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            )
        )
    if effect not in (None, "") and effect not in _TAINT_EFFECTS:
        causes.append(not_supported(f"{field}.effect", effect, _TAINT_EFFECTS))
    return causes


def _pod_spec(field: str, spec: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    containers = spec.get("containers")
    if not containers:
        causes.append(required(f"{field}.containers"))
    names: set[str] = set()
    for list_name in ("initContainers", "containers"):
        for i, c in _items(spec.get(list_name)):
            path = f"{field}.{list_name}[{i}]"
            causes += _container(path, c)
            name = c.get("name")
            if isinstance(name, str) and name:
                if name in names:
                    causes.append(duplicate(f"{path}.name", name))
                names.add(name)
    restart = spec.get("restartPolicy")
    if restart is None or restart == "":
        causes.append(required(f"{field}.restartPolicy"))
    elif isinstance(restart, str) and restart not in _RESTART_POLICIES:
        causes.append(not_supported(f"{field}.restartPolicy", restart, _RESTART_POLICIES))
    dns = spec.get("dnsPolicy")
    if dns is None or dns == "":
        causes.append(required(f"{field}.dnsPolicy"))
    elif isinstance(dns, str) and dns not in _DNS_POLICIES:
        causes.append(not_supported(f"{field}.dnsPolicy", dns, _DNS_POLICIES))
    causes += _labels(f"{field}.nodeSelector", spec.get("nodeSelector"))
    node_name = spec.get("nodeName")
    if isinstance(node_name, str) and node_name:
        causes += _dns_subdomain(f"{field}.nodeName", node_name)
    ads = spec.get("activeDeadlineSeconds")
    if _is_int(ads) and not 1 <= ads <= 2**31 - 1:
        causes.append(
            invalid(
                f"{field}.activeDeadlineSeconds", ads, "must be between 1 and 2147483647, inclusive"
            )
        )
    causes += _non_negative(
        f"{field}.terminationGracePeriodSeconds", spec.get("terminationGracePeriodSeconds")
    )
    affinity = spec.get("affinity")
    if isinstance(affinity, dict):
        causes += _affinity(f"{field}.affinity", affinity)
    for i, t in _items(spec.get("tolerations")):
        causes += _toleration(f"{field}.tolerations[{i}]", t)
    scheduler = spec.get("schedulerName")
    if isinstance(scheduler, str) and scheduler:
        causes += _dns_subdomain(f"{field}.schedulerName", scheduler)
    return causes


def _pod(obj: dict[str, Any]) -> list[Cause]:
    return _pod_spec("spec", _map(obj.get("spec")))


# -- controllers -----------------------------------------------------------------------------


def _template(
    field: str,
    template: Any,
    selector_matches: Callable[[Mapping[str, str]], bool] | None,
    *,
    restart_policies: tuple[str, ...] = ("Always",),
) -> list[Cause]:
    if not isinstance(template, dict):
        return [required(field)]
    causes: list[Cause] = []
    meta = _map(template.get("metadata"))
    labels = _map(meta.get("labels"))
    causes += _labels(f"{field}.metadata.labels", labels)
    causes += _annotations(f"{field}.metadata.annotations", meta.get("annotations"))
    if selector_matches is not None and not selector_matches(labels):
        causes.append(invalid(f"{field}.metadata.labels", labels, SELECTOR_MISMATCH))
    spec = _map(template.get("spec"))
    causes += _pod_spec(f"{field}.spec", spec)
    restart = spec.get("restartPolicy")
    if (
        isinstance(restart, str)
        and restart in _RESTART_POLICIES
        and restart not in restart_policies
    ):
        causes.append(not_supported(f"{field}.spec.restartPolicy", restart, restart_policies))
    return causes


def _replication_controller(obj: dict[str, Any]) -> list[Cause]:
    spec = _map(obj.get("spec"))
    causes = _non_negative("spec.replicas", spec.get("replicas"))
    causes += _non_negative("spec.minReadySeconds", spec.get("minReadySeconds"))
    selector = _map(spec.get("selector"))
    matcher = None
    if not selector:
        causes.append(required("spec.selector"))
    else:
        causes += _labels("spec.selector", selector)

        def matcher(labels: Mapping[str, str]) -> bool:
            return all(labels.get(k) == v for k, v in selector.items())

    if spec.get("template") is not None or not selector:
        causes += _template("spec.template", spec.get("template"), matcher)
    else:
        causes.append(required("spec.template"))
    return causes


_EXPRESSION_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def _label_selector(field: str, selector: dict[str, Any]) -> list[Cause]:
    causes = _labels(f"{field}.matchLabels", selector.get("matchLabels"))
    for i, expr in _items(selector.get("matchExpressions")):
        path = f"{field}.matchExpressions[{i}]"
        op, values, key = expr.get("operator"), _list(expr.get("values")), expr.get("key")
        if isinstance(key, str):
            causes += _qualified_name(f"{path}.key", key)
        if op in ("In", "NotIn"):
            if not values:
                causes.append(
                    required(
                        f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'"
                    )
                )
        elif op in ("Exists", "DoesNotExist"):
            if values:
                causes.append(
                    forbidden(
                        f"{path}.values",
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    )
                )
        else:
            causes.append(invalid(f"{path}.operator", op, "not a valid selector operator"))
    return causes


def _selector_matcher(selector: dict[str, Any]) -> Callable[[Mapping[str, str]], bool] | None:
    """A matcher for a structured selector, or None when it cannot be built (already reported)."""
    try:
        parsed = label_selector_from_dict(selector)
    except BadRequest:
        return None
    return parsed.matches


def _replica_set_like(obj: dict[str, Any], *, kind: str) -> list[Cause]:
    spec = _map(obj.get("spec"))
    causes = _non_negative("spec.replicas", spec.get("replicas"))
    causes += _non_negative("spec.minReadySeconds", spec.get("minReadySeconds"))
    selector = spec.get("selector")
    matcher = None
    if not isinstance(selector, dict):
        causes.append(required("spec.selector"))
    elif not selector.get("matchLabels") and not selector.get("matchExpressions"):
        causes.append(invalid("spec.selector", selector, f"empty selector is invalid for {kind}"))
    else:
        causes += _label_selector("spec.selector", selector)
        matcher = _selector_matcher(selector)
    causes += _template("spec.template", spec.get("template"), matcher)
    return causes


def _replica_set(obj: dict[str, Any]) -> list[Cause]:
    return _replica_set_like(obj, kind="replicaset")


_PERCENT = re.compile(r"^([0-9]+)%$")


def _int_or_percent(field: str, value: Any) -> tuple[list[Cause], int | None, bool]:
    """Causes, the number (int or percent), and whether it is a percent."""
    if _is_int(value):
        return _non_negative(field, value), value, False
    if isinstance(value, str):
        m = _PERCENT.match(value)
        if not m:
            return (
                [
                    invalid(
                        field,
                        value,
                        "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
                    )
                ],
                None,
                True,
            )
        return [], int(m.group(1)), True
    return [], None, False


def _deployment(obj: dict[str, Any]) -> list[Cause]:
    causes = _replica_set_like(obj, kind="deployment")
    spec = _map(obj.get("spec"))
    strategy = _map(spec.get("strategy"))
    stype = strategy.get("type")
    if stype not in (None, "Recreate", "RollingUpdate"):
        causes.append(not_supported("spec.strategy.type", stype, ["Recreate", "RollingUpdate"]))
    rolling = strategy.get("rollingUpdate")
    if stype == "Recreate" and rolling is not None:
        causes.append(
            forbidden(
                "spec.strategy.rollingUpdate",
                "may not be specified when strategy `type` is 'Recreate'",
            )
        )
    elif isinstance(rolling, dict):
        base = "spec.strategy.rollingUpdate"
        c1, unavailable, unavailable_pct = _int_or_percent(
            f"{base}.maxUnavailable", rolling.get("maxUnavailable")
        )
        c2, surge, _ = _int_or_percent(f"{base}.maxSurge", rolling.get("maxSurge"))
        causes += c1 + c2
        if unavailable_pct and unavailable is not None and unavailable > 100:
            causes.append(
                invalid(
                    f"{base}.maxUnavailable",
                    rolling.get("maxUnavailable"),
                    "must not be greater than 100%",
                )
            )
        if unavailable == 0 and surge == 0:
            causes.append(
                invalid(
                    f"{base}.maxUnavailable",
                    rolling.get("maxUnavailable"),
                    "may not be 0 when `maxSurge` is 0",
                )
            )
    causes += _non_negative("spec.revisionHistoryLimit", spec.get("revisionHistoryLimit"))
    pds, mrs = spec.get("progressDeadlineSeconds"), spec.get("minReadySeconds") or 0
    if _is_int(pds):
        causes += _non_negative("spec.progressDeadlineSeconds", pds)
        if _is_int(mrs) and pds <= mrs:
            causes.append(
                invalid("spec.progressDeadlineSeconds", pds, "must be greater than minReadySeconds")
            )
    return causes


def _controller_selector(
    field: str, selector: Any, *, kind: str
) -> tuple[list[Cause], Callable[[Mapping[str, str]], bool] | None]:
    """A required, non-empty structured selector: its causes and a matcher (None if bad)."""
    if not isinstance(selector, dict):
        return [required(field)], None
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return [invalid(field, selector, f"empty selector is invalid for {kind}")], None
    return _label_selector(field, selector), _selector_matcher(selector)


def _percent_at_most_100(field: str, value: Any) -> list[Cause]:
    causes, number, percent = _int_or_percent(field, value)
    if percent and number is not None and number > 100:
        causes.append(invalid(field, value, "must not be greater than 100%"))
    return causes


def _daemon_set(obj: dict[str, Any]) -> list[Cause]:
    spec = _map(obj.get("spec"))
    causes, matcher = _controller_selector("spec.selector", spec.get("selector"), kind="daemonset")
    causes += _template("spec.template", spec.get("template"), matcher)
    causes += _non_negative("spec.minReadySeconds", spec.get("minReadySeconds"))
    causes += _non_negative("spec.revisionHistoryLimit", spec.get("revisionHistoryLimit"))
    strategy = _map(spec.get("updateStrategy"))
    stype = strategy.get("type")
    if stype not in ("OnDelete", "RollingUpdate"):
        causes.append(
            not_supported("spec.updateStrategy.type", stype, ["OnDelete", "RollingUpdate"])
        )
    rolling = strategy.get("rollingUpdate")
    if stype == "RollingUpdate" and not isinstance(rolling, dict):
        causes.append(required("spec.updateStrategy.rollingUpdate"))
    elif stype == "RollingUpdate" and isinstance(rolling, dict):
        base = "spec.updateStrategy.rollingUpdate"
        unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
        causes += _percent_at_most_100(f"{base}.maxUnavailable", unavailable)
        causes += _percent_at_most_100(f"{base}.maxSurge", surge)
        has_unavailable = _int_or_percent("", unavailable)[1] not in (0, None)
        has_surge = _int_or_percent("", surge)[1] not in (0, None)
        if has_unavailable and has_surge:
            causes.append(
                invalid(f"{base}.maxSurge", surge, "may not be set when maxUnavailable is non-zero")
            )
        elif not has_unavailable and not has_surge:
            causes.append(required(f"{base}.maxUnavailable", "cannot be 0 when maxSurge is 0"))
    return causes


STATEFULSET_SPEC_FORBIDDEN = (
    "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', "
    "'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and "
    "'minReadySeconds' are forbidden"
)
_STATEFULSET_MUTABLE = (
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "revisionHistoryLimit",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
)
_RETENTION_POLICIES = ("Retain", "Delete")


def _stateful_set(obj: dict[str, Any]) -> list[Cause]:
    spec = _map(obj.get("spec"))
    causes = _non_negative("spec.replicas", spec.get("replicas"))
    causes += _non_negative("spec.minReadySeconds", spec.get("minReadySeconds"))
    causes += _non_negative("spec.revisionHistoryLimit", spec.get("revisionHistoryLimit"))
    causes += _non_negative("spec.ordinals.start", _map(spec.get("ordinals")).get("start"))
    policy = spec.get("podManagementPolicy")
    if not policy:
        causes.append(required("spec.podManagementPolicy"))
    elif policy not in ("OrderedReady", "Parallel"):
        causes.append(
            invalid("spec.podManagementPolicy", policy, "must be 'OrderedReady' or 'Parallel'")
        )
    strategy = _map(spec.get("updateStrategy"))
    stype, rolling = strategy.get("type"), strategy.get("rollingUpdate")
    if not stype:
        causes.append(required("spec.updateStrategy"))
    elif stype not in ("RollingUpdate", "OnDelete"):
        causes.append(
            invalid("spec.updateStrategy", stype, "must be 'RollingUpdate' or 'OnDelete'")
        )
    elif stype == "OnDelete" and rolling is not None:
        causes.append(
            invalid(
                "spec.updateStrategy.rollingUpdate",
                rolling,
                "only allowed for updateStrategy 'RollingUpdate'",
            )
        )
    elif isinstance(rolling, dict):
        base = "spec.updateStrategy.rollingUpdate"
        causes += _non_negative(f"{base}.partition", rolling.get("partition"))
        if rolling.get("maxUnavailable") is not None:
            causes += _percent_at_most_100(f"{base}.maxUnavailable", rolling["maxUnavailable"])
    retention = spec.get("persistentVolumeClaimRetentionPolicy")
    for key in ("whenDeleted", "whenScaled"):
        value = _map(retention).get(key)
        if isinstance(value, str) and value not in _RETENTION_POLICIES:
            path = f"spec.persistentVolumeClaimRetentionPolicy.{key}"
            causes.append(not_supported(path, value, _RETENTION_POLICIES))
    service = spec.get("serviceName")
    if isinstance(service, str) and service:
        causes += _dns_label("spec.serviceName", service)
    selector_causes, matcher = _controller_selector(
        "spec.selector", spec.get("selector"), kind="statefulset"
    )
    causes += selector_causes
    causes += _template("spec.template", spec.get("template"), matcher)
    return causes


def _stateful_set_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    """Only the fields Kubernetes lets change may differ (``replicas``, ``template`` ...)."""
    new_spec, old_spec = _map(new.get("spec")), _map(old.get("spec"))
    others_new = {k: v for k, v in new_spec.items() if k not in _STATEFULSET_MUTABLE}
    others_old = {k: v for k, v in old_spec.items() if k not in _STATEFULSET_MUTABLE}
    if others_new != others_old:
        return [forbidden("spec", STATEFULSET_SPEC_FORBIDDEN)]
    return []


def _controller_revision(obj: dict[str, Any]) -> list[Cause]:
    causes = _non_negative("revision", obj.get("revision"))
    if obj.get("data") is None:
        causes.append(required("data", "data is mandatory"))
    return causes


# -- batch: Job, CronJob ----------------------------------------------------------------------

_COMPLETION_MODES = ("NonIndexed", "Indexed")
_POD_REPLACEMENT_POLICIES = ("Failed", "TerminatingOrFailed")
_CONCURRENCY_POLICIES = ("Allow", "Forbid", "Replace")
_JOB_RESTART_POLICIES = ("OnFailure", "Never")
_TIME_ZONE_PART = re.compile(r"^[A-Za-z\.\-_0-9+]{1,14}$")
CRONJOB_NAME_MAX = 52
"""A CronJob's name leaves room for the 11 characters its Jobs' names append."""


def _job_spec(field: str, spec: dict[str, Any], *, in_template: bool) -> list[Cause]:
    """``validateJobSpec``: what a Job and a CronJob's job template share."""
    causes: list[Cause] = []
    for key in (
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
    ):
        causes += _non_negative(f"{field}.{key}", spec.get(key))
    mode = spec.get("completionMode")
    if isinstance(mode, str) and mode not in _COMPLETION_MODES:
        causes.append(not_supported(f"{field}.completionMode", mode, _COMPLETION_MODES))
    if mode == "Indexed" and spec.get("completions") is None:
        causes.append(required(f"{field}.completions", "when completion mode is Indexed"))
    replacement = spec.get("podReplacementPolicy")
    if isinstance(replacement, str) and replacement not in _POD_REPLACEMENT_POLICIES:
        causes.append(
            not_supported(f"{field}.podReplacementPolicy", replacement, _POD_REPLACEMENT_POLICIES)
        )
    selector, matcher = spec.get("selector"), None
    if isinstance(selector, dict):
        causes += _label_selector(f"{field}.selector", selector)
        matcher = _selector_matcher(selector)
    elif not in_template:
        causes.append(required(f"{field}.selector"))
    causes += _template(
        f"{field}.template",
        spec.get("template"),
        matcher,
        restart_policies=_JOB_RESTART_POLICIES,
    )
    return causes


def _generated_selector(obj: dict[str, Any]) -> list[Cause]:
    """A generated selector's labels must carry this Job's own uid and name."""
    spec, meta = _map(obj.get("spec")), _map(obj.get("metadata"))
    if spec.get("manualSelector") is True:
        return []
    labels = _map(_map(_map(spec.get("template")).get("metadata")).get("labels"))
    wanted = {
        LEGACY_CONTROLLER_UID_LABEL: meta.get("uid"),
        CONTROLLER_UID_LABEL: meta.get("uid"),
        LEGACY_JOB_NAME_LABEL: meta.get("name"),
        JOB_NAME_LABEL: meta.get("name"),
    }
    causes: list[Cause] = []
    for key, value in wanted.items():
        if isinstance(value, str) and key in labels and labels[key] != value:
            causes.append(
                invalid("spec.template.metadata.labels", labels[key], f"must be '{value}'")
            )
    return causes


def _job(obj: dict[str, Any]) -> list[Cause]:
    return _job_spec("spec", _map(obj.get("spec")), in_template=False) + _generated_selector(obj)


_JOB_IMMUTABLE = (
    "selector",
    "completionMode",
    "podFailurePolicy",
    "backoffLimitPerIndex",
    "successPolicy",
    "managedBy",
)
_SCHEDULING_DIRECTIVES = ("nodeSelector", "tolerations", "schedulingGates", "affinity")


def _job_template_comparable(template: Any, *, scheduling_mutable: bool) -> Any:
    """A Job's template as compared on update: while a suspended Job has never started, its
    labels, annotations and scheduling directives may change (``validatePodTemplateUpdate``)."""
    if not scheduling_mutable or not isinstance(template, dict):
        return template
    out = json.loads(json.dumps(template))
    meta = _map(out.get("metadata"))
    meta.pop("labels", None)
    meta.pop("annotations", None)
    for key in _SCHEDULING_DIRECTIVES:
        _map(out.get("spec")).pop(key, None)
    return out


def _job_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    new_spec, old_spec = _map(new.get("spec")), _map(old.get("spec"))
    causes = [
        invalid(f"spec.{key}", new_spec.get(key), IMMUTABLE)
        for key in _JOB_IMMUTABLE
        if new_spec.get(key) != old_spec.get(key)
    ]
    completions = new_spec.get("completions")
    elastic = new_spec.get("completionMode") == "Indexed" and completions == new_spec.get(
        "parallelism"
    )
    if completions != old_spec.get("completions") and not elastic:
        causes.append(invalid("spec.completions", completions, IMMUTABLE))
    never_started = new_spec.get("suspend") is True and not _map(old.get("status")).get("startTime")
    new_template = _job_template_comparable(
        new_spec.get("template"), scheduling_mutable=never_started
    )
    old_template = _job_template_comparable(
        old_spec.get("template"), scheduling_mutable=never_started
    )
    if new_template != old_template:
        causes.append(invalid("spec.template", new_spec.get("template"), IMMUTABLE))
    return causes


def _schedule(field: str, schedule: Any) -> list[Cause]:
    if not schedule:
        return [required(field)]
    if not isinstance(schedule, str):
        return []  # pydantic reported it
    causes: list[Cause] = []
    try:
        parse_schedule(schedule)
    except ValueError as e:
        causes.append(invalid(field, schedule, str(e)))
    if "TZ" in schedule:
        detail = "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
        causes.append(invalid(field, schedule, detail))
    return causes


def _time_zone(field: str, zone: Any) -> list[Cause]:
    if not isinstance(zone, str):
        return []
    if not zone:
        return [invalid(field, zone, "timeZone must be nil or non-empty string")]
    for part in zone.split("/"):
        if part in (".", "..") or part.startswith("-") or not _TIME_ZONE_PART.match(part):
            return [invalid(field, zone, f"unknown time zone {zone}")]
    if zone.lower() == "local":
        return [
            invalid(
                field,
                zone,
                "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
            )
        ]
    try:
        zoneinfo.ZoneInfo(zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return [invalid(field, zone, f"unknown time zone {zone}")]
    return []


def _cron_job(obj: dict[str, Any]) -> list[Cause]:
    spec = _map(obj.get("spec"))
    causes: list[Cause] = []
    name = _map(obj.get("metadata")).get("name")
    if isinstance(name, str) and len(name) > CRONJOB_NAME_MAX:
        causes.append(
            invalid("metadata.name", name, f"must be no more than {CRONJOB_NAME_MAX} characters")
        )
    causes += _schedule("spec.schedule", spec.get("schedule"))
    causes += _time_zone("spec.timeZone", spec.get("timeZone"))
    policy = spec.get("concurrencyPolicy")
    if not policy:
        causes.append(required("spec.concurrencyPolicy"))
    elif isinstance(policy, str) and policy not in _CONCURRENCY_POLICIES:
        causes.append(not_supported("spec.concurrencyPolicy", policy, _CONCURRENCY_POLICIES))
    for key in ("startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        causes += _non_negative(f"spec.{key}", spec.get(key))
    job_spec = _map(_map(spec.get("jobTemplate")).get("spec"))
    base = "spec.jobTemplate.spec"
    causes += _job_spec(base, job_spec, in_template=True)
    if job_spec.get("selector") is not None:
        causes.append(
            invalid(f"{base}.selector", job_spec["selector"], "`selector` will be auto-generated")
        )
    if job_spec.get("manualSelector") is True:
        causes.append(not_supported(f"{base}.manualSelector", True, ["nil", "false"]))
    return causes


# -- policy: PodDisruptionBudget --------------------------------------------------------------


def _pod_disruption_budget(obj: dict[str, Any]) -> list[Cause]:
    spec = _map(obj.get("spec"))
    causes: list[Cause] = []
    min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
    if min_available is not None and max_unavailable is not None:
        causes.append(invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set"))
    for key, value in (("minAvailable", min_available), ("maxUnavailable", max_unavailable)):
        if value is not None:
            causes += _percent_at_most_100(f"spec.{key}", value)
    if isinstance(spec.get("selector"), dict):
        causes += _label_selector("spec.selector", spec["selector"])
    policy = spec.get("unhealthyPodEvictionPolicy")
    if isinstance(policy, str) and policy not in UNHEALTHY_POD_EVICTION_POLICIES:
        causes.append(
            not_supported(
                "spec.unhealthyPodEvictionPolicy", policy, UNHEALTHY_POD_EVICTION_POLICIES
            )
        )
    return causes + _pod_disruption_budget_status(_map(obj.get("status")))


def _pod_disruption_budget_status(status: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    for key in ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"):
        causes += _non_negative(f"status.{key}", status.get(key))
    return causes


# -- endpoints and endpoint slices -----------------------------------------------------------
# pkg/apis/core/validation ValidateEndpoints and pkg/apis/discovery/validation, with one
# deliberate difference: kubelite's pod addresses are loopback addresses (DESIGN.md §6), so
# the "may not be in the loopback range" rule is not applied.

_PROTOCOLS = ("SCTP", "TCP", "UDP")
_MAX_SLICE_ADDRESSES = 100
_MAX_SLICE_PORTS = 20000
_LINK_LOCAL_MULTICAST = (ipaddress.ip_network("224.0.0.0/24"), ipaddress.ip_network("ff02::/16"))


def _too_many(field: str, count: int, limit: int) -> Cause:
    return {
        "reason": "FieldValueTooMany",
        "message": f"Too many: {count}: must have at most {limit} items",
        "field": field,
    }


def _special_ip(field: str, ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> list[Cause]:
    """``ValidateNonSpecialIP`` less its loopback rule (see above)."""
    text = str(ip)
    if ip.is_unspecified:
        return [invalid(field, text, f"may not be unspecified ({text})")]
    if ip.is_link_local:
        return [invalid(field, text, "may not be in the link-local range (169.254.0.0/16, fe80::/10)")]  # fmt: skip
    if any(ip in net for net in _LINK_LOCAL_MULTICAST):
        return [invalid(field, text, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)")]  # fmt: skip
    return []


def _endpoint_ip(field: str, value: Any) -> list[Cause]:
    try:
        ip = ipaddress.ip_address(value if isinstance(value, str) else "")
    except ValueError:
        return [invalid(field, value, "must be a valid IP address")]
    return _special_ip(field, ip)


def _endpoint_address(field: str, addr: dict[str, Any]) -> list[Cause]:
    causes = _endpoint_ip(f"{field}.ip", addr.get("ip"))
    if isinstance(addr.get("hostname"), str) and addr["hostname"]:
        causes += _dns_label(f"{field}.hostname", addr["hostname"])
    if isinstance(addr.get("nodeName"), str) and addr["nodeName"]:
        causes += _dns_subdomain(f"{field}.nodeName", addr["nodeName"])
    return causes


def _protocol(field: str, protocol: Any) -> list[Cause]:
    if not protocol:
        return [required(field)]
    if protocol not in _PROTOCOLS:
        return [not_supported(field, protocol, _PROTOCOLS)]
    return []


def _endpoints_port(field: str, port: dict[str, Any], *, name_required: bool) -> list[Cause]:
    causes: list[Cause] = []
    name = port.get("name")
    if name_required and not name:
        causes.append(required(f"{field}.name"))
    elif isinstance(name, str) and name:
        causes += _dns_label(f"{field}.name", name)
    if _is_int(port.get("port")) and not 1 <= port["port"] <= 65535:
        causes.append(invalid(f"{field}.port", port["port"], "must be between 1 and 65535, inclusive"))  # fmt: skip
    causes += _protocol(f"{field}.protocol", port.get("protocol"))
    if isinstance(port.get("appProtocol"), str):
        causes += _qualified_name(f"{field}.appProtocol", port["appProtocol"])
    return causes


def _endpoints(obj: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    for i, subset in _items(obj.get("subsets")):
        path = f"subsets[{i}]"
        if not _list(subset.get("addresses")) and not _list(subset.get("notReadyAddresses")):
            causes.append(required(path, "must specify `addresses` or `notReadyAddresses`"))
        for key in ("addresses", "notReadyAddresses"):
            for j, addr in _items(subset.get(key)):
                causes += _endpoint_address(f"{path}.{key}[{j}]", addr)
        ports = _items(subset.get("ports"))
        for j, port in ports:
            causes += _endpoints_port(f"{path}.ports[{j}]", port, name_required=len(ports) > 1)
    return causes


def _slice_address(field: str, address: Any, address_type: Any) -> list[Cause]:
    if address_type == "FQDN":
        text = address if isinstance(address, str) else ""
        labels = text.split(".")
        if len(labels) < 2 or any(is_dns1123_label(label) for label in labels):
            return [invalid(field, address, "should be a domain with at least two segments separated by dots")]  # fmt: skip
        return []
    version = {"IPv4": 4, "IPv6": 6}.get(address_type if isinstance(address_type, str) else "")
    if version is None:
        return []  # unknown types are not checked (Kubernetes' rule)
    try:
        ip = ipaddress.ip_address(address if isinstance(address, str) else "")
    except ValueError:
        ip = None
    if ip is None or ip.version != version:
        return [invalid(field, address, f"must be a valid IPv{version} address")]
    return _special_ip(field, ip)


def _slice_endpoint(field: str, endpoint: dict[str, Any], address_type: Any) -> list[Cause]:
    causes: list[Cause] = []
    addresses = _list(endpoint.get("addresses"))
    if not addresses:
        causes.append(required(f"{field}.addresses", "must contain at least 1 address"))
    elif len(addresses) > _MAX_SLICE_ADDRESSES:
        causes.append(_too_many(f"{field}.addresses", len(addresses), _MAX_SLICE_ADDRESSES))
    for k, address in enumerate(addresses):
        causes += _slice_address(f"{field}.addresses[{k}]", address, address_type)
    if isinstance(endpoint.get("nodeName"), str):
        causes += _dns_subdomain(f"{field}.nodeName", endpoint["nodeName"])
    if isinstance(endpoint.get("hostname"), str):
        causes += _dns_label(f"{field}.hostname", endpoint["hostname"])
    if isinstance(endpoint.get("deprecatedTopology"), dict):
        causes += _labels(f"{field}.deprecatedTopology", endpoint["deprecatedTopology"])
    return causes


def _slice_ports(ports: list[tuple[int, dict[str, Any]]]) -> list[Cause]:
    causes: list[Cause] = []
    if len(ports) > _MAX_SLICE_PORTS:
        causes.append(_too_many("ports", len(ports), _MAX_SLICE_PORTS))
    names: set[Any] = set()
    for i, port in ports:
        path = f"ports[{i}]"
        name = port.get("name")
        if isinstance(name, str) and name:
            causes += _dns_label(f"{path}.name", name)
        if name in names:
            causes.append(duplicate(f"{path}.name", name))
        names.add(name)
        causes += _protocol(f"{path}.protocol", port.get("protocol"))
        if isinstance(port.get("appProtocol"), str):
            causes += _qualified_name(f"{path}.appProtocol", port["appProtocol"])
    return causes


def _endpoint_slice(obj: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    address_type = obj.get("addressType")
    if not address_type:
        causes.append(required("addressType"))
    elif address_type not in ADDRESS_TYPES:
        causes.append(not_supported("addressType", address_type, sorted(ADDRESS_TYPES)))
    endpoints = _items(obj.get("endpoints"))
    if len(endpoints) > MAX_ENDPOINTS_PER_SLICE:
        causes.append(_too_many("endpoints", len(endpoints), MAX_ENDPOINTS_PER_SLICE))
    for i, endpoint in endpoints:
        causes += _slice_endpoint(f"endpoints[{i}]", endpoint, address_type)
    return causes + _slice_ports(_items(obj.get("ports")))


# -- nodes, namespaces, events, leases, bindings ---------------------------------------------


def _node(obj: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    seen: set[tuple[Any, Any]] = set()
    for i, taint in _items(_map(obj.get("spec")).get("taints")):
        path = f"spec.taints[{i}]"
        key, effect, value = taint.get("key"), taint.get("effect"), taint.get("value")
        if not key:
            causes.append(required(f"{path}.key"))
        elif isinstance(key, str):
            causes += _qualified_name(f"{path}.key", key)
        if isinstance(value, str) and value:
            causes += [invalid(f"{path}.value", value, m) for m in is_valid_label_value(value)]
        if not effect:
            causes.append(required(f"{path}.effect"))
        elif effect not in _TAINT_EFFECTS:
            causes.append(not_supported(f"{path}.effect", effect, _TAINT_EFFECTS))
        if (key, effect) in seen:
            causes.append(duplicate(path, taint))
        seen.add((key, effect))
    return causes + _node_status(_map(obj.get("status")))


def _node_status(status: dict[str, Any]) -> list[Cause]:
    """Addresses the apiserver may dial and the kubelet port it dials them on.

    Stricter than Kubernetes, which only refuses duplicate addresses: kubelite's proxy speaks
    plain HTTP to these, so each must be a bare IP or DNS name (``api.addresses``). Port 0 is
    what a Go client writes for "no kubelet endpoint" (``Port`` has no omitempty) and stays valid.
    """
    causes: list[Cause] = []
    seen: set[tuple[Any, Any]] = set()
    for i, entry in _items(status.get("addresses")):
        path = f"status.addresses[{i}]"
        kind, address = entry.get("type"), entry.get("address")
        if not kind:
            causes.append(required(f"{path}.type"))
        if not address:
            causes.append(required(f"{path}.address"))
        elif isinstance(kind, str):
            causes += [
                invalid(f"{path}.address", address, m) for m in address_errors(kind, address)
            ]
        key = (kind, address)
        if isinstance(kind, str) and isinstance(address, str) and key in seen:
            causes.append(duplicate(path, entry))
        seen.add(key)
    kubelet = _map(_map(status.get("daemonEndpoints")).get("kubeletEndpoint"))
    port = kubelet.get("Port")
    if _is_int(port) and not 0 <= port <= 65535:
        causes.append(
            invalid(
                "status.daemonEndpoints.kubeletEndpoint.Port",
                port,
                "must be between 1 and 65535, inclusive (or 0: no kubelet endpoint)",
            )
        )
    return causes


def _namespace(obj: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    for i, fin in enumerate(_list(_map(obj.get("spec")).get("finalizers"))):
        if isinstance(fin, str):
            causes += _qualified_name(f"spec.finalizers[{i}]", fin)
    return causes


def _time(field: str, value: Any) -> list[Cause]:
    if isinstance(value, str) and value:
        try:
            parse_time(value)
        except ValueError:
            return [invalid(field, value, "must be an RFC 3339 date-time")]
    return []


def _event(obj: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    involved = _map(obj.get("involvedObject"))
    ns = _map(obj.get("metadata")).get("namespace")
    ins = involved.get("namespace")
    if ins and ns and ins != ns:
        causes.append(invalid("involvedObject.namespace", ins, "does not match event.namespace"))
    etype = obj.get("type")
    if etype not in (None, "", "Normal", "Warning"):
        causes.append(not_supported("type", etype, ["Normal", "Warning"]))
    if obj.get("eventTime"):
        for key in ("reportingComponent", "reportingInstance"):
            if not obj.get(key):
                causes.append(
                    required(key if key != "reportingComponent" else "reportingController")
                )
    causes += _non_negative("count", obj.get("count"))
    for key in ("firstTimestamp", "lastTimestamp", "eventTime"):
        causes += _time(key, obj.get(key))
    return causes


def _lease(obj: dict[str, Any]) -> list[Cause]:
    spec = _map(obj.get("spec"))
    causes: list[Cause] = []
    duration = spec.get("leaseDurationSeconds")
    if _is_int(duration) and duration <= 0:
        causes.append(invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    causes += _non_negative("spec.leaseTransitions", spec.get("leaseTransitions"))
    for key in ("acquireTime", "renewTime"):
        causes += _time(f"spec.{key}", spec.get(key))
    return causes


def _binding(obj: dict[str, Any]) -> list[Cause]:
    target = _map(obj.get("target"))
    causes: list[Cause] = []
    if target.get("kind") not in (None, "", "Node"):
        causes.append(invalid("target.kind", target.get("kind"), "must be empty or 'Node'"))
    if not target.get("name"):
        causes.append(required("target.name"))
    return causes


# -- configuration: ConfigMap, Secret ---------------------------------------------------------

MAX_CONFIG_SIZE = 1024 * 1024
"""``core.MaxSecretSize``: a ConfigMap's or Secret's values, together, in bytes."""
IMMUTABLE_WHEN_SET = "field is immutable when `immutable` is set"
REDACTED = "<secret contents redacted>"
_BASE64_ALPHABET = re.compile(r"[A-Za-z0-9+/]*={0,2}")


def _too_long(field: str, limit: int) -> Cause:
    return {
        "reason": "FieldValueTooLong",
        "message": f"Too long: must have at most {limit} bytes",
        "field": field,
    }


def _base64(value: str) -> bytes | None:
    """The bytes of Go's ``base64.StdEncoding`` (padded) ``value``, or None if it is not that."""
    if len(value) % 4 or not _BASE64_ALPHABET.fullmatch(value):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error:
        return None


def _base64_error(value: str) -> str:
    """Go's ``illegal base64 data at input byte N`` for a value ``_base64`` refused."""
    for i, ch in enumerate(value):
        if not (ch.isascii() and (ch.isalnum() or ch in "+/=")):
            return f"illegal base64 data at input byte {i}"
    return f"illegal base64 data at input byte {len(value) - len(value) % 4}"


def _byte_map(field: str, values: Any, *, redact: bool) -> tuple[list[Cause], dict[str, bytes]]:
    """Keys and base64 values of a ``[]byte`` map (``data``, ``binaryData``): causes, decoded.

    A Secret's values are never echoed in a cause (``redact``)."""
    causes: list[Cause] = []
    decoded: dict[str, bytes] = {}
    for key, value in _map(values).items():
        causes += [invalid(f"{field}[{key}]", key, msg) for msg in is_config_map_key(key)]
        if isinstance(value, str):
            raw = _base64(value)
            if raw is None:
                shown = REDACTED if redact else value
                causes.append(invalid(f"{field}[{key}]", shown, _base64_error(value)))
            else:
                decoded[key] = raw
    return causes, decoded


def _config_map(obj: dict[str, Any]) -> list[Cause]:
    data, binary = _map(obj.get("data")), _map(obj.get("binaryData"))
    causes: list[Cause] = []
    total = 0
    for key, value in data.items():
        causes += [invalid(f"data[{key}]", key, msg) for msg in is_config_map_key(key)]
        if key in binary:
            causes.append(invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
        if isinstance(value, str):
            total += len(value.encode())
    binary_causes, decoded = _byte_map("binaryData", binary, redact=False)
    causes += binary_causes
    total += sum(len(v) for v in decoded.values())
    if total > MAX_CONFIG_SIZE:
        causes.append(_too_long("", MAX_CONFIG_SIZE))
    return causes


def _json_object_error(raw: bytes) -> str | None:
    """Why ``raw`` does not decode into a Go ``map[string]interface{}``, or None if it does."""
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return f"invalid JSON: {exc}"
    if isinstance(value, dict):
        return None
    go_type = {list: "array", str: "string", bool: "bool"}.get(type(value), "number")
    if value is None:
        return None  # Go leaves the map nil for a JSON null
    return f"json: cannot unmarshal {go_type} into Go value of type map[string]interface {{}}"


_SERVICE_ACCOUNT_NAME_KEY = "kubernetes.io/service-account.name"


def _secret_type_keys(obj: dict[str, Any], decoded: dict[str, bytes]) -> list[Cause]:
    """The keys each Secret type requires (``ValidateSecret``'s switch on ``type``)."""
    data = _map(obj.get("data"))
    stype = obj.get("type")
    if stype == "kubernetes.io/service-account-token":
        annotations = _map(_map(obj.get("metadata")).get("annotations"))
        if not annotations.get(_SERVICE_ACCOUNT_NAME_KEY):
            return [required(f"metadata.annotations[{_SERVICE_ACCOUNT_NAME_KEY}]")]
    elif stype in ("kubernetes.io/dockercfg", "kubernetes.io/dockerconfigjson"):
        key = ".dockercfg" if stype == "kubernetes.io/dockercfg" else ".dockerconfigjson"
        if key not in data:
            return [required(f"data[{key}]")]
        raw = decoded.get(key)
        problem = None if raw is None else _json_object_error(raw)
        if problem is not None:
            return [invalid(f"data[{key}]", REDACTED, problem)]
    elif stype == "kubernetes.io/basic-auth":
        if "username" not in data and "password" not in data:
            return [required("data[username]"), required("data[password]")]
    elif stype == "kubernetes.io/ssh-auth":
        if not decoded.get("ssh-privatekey"):
            return [required("data[ssh-privatekey]")]
    elif stype == "kubernetes.io/tls":
        return [required(f"data[{key}]") for key in ("tls.crt", "tls.key") if key not in data]
    return []


def _secret(obj: dict[str, Any]) -> list[Cause]:
    causes, decoded = _byte_map("data", obj.get("data"), redact=True)
    if sum(len(v) for v in decoded.values()) > MAX_CONFIG_SIZE:
        causes.append(_too_long("data", MAX_CONFIG_SIZE))
    return causes + _secret_type_keys(obj, decoded)


def _immutable_contents(
    new: dict[str, Any], old: dict[str, Any], *, fields: tuple[str, ...]
) -> list[Cause]:
    """Once ``immutable: true``, it and ``fields`` stay as they are (ConfigMap, Secret)."""
    if old.get("immutable") is not True:
        return []
    causes = []
    if new.get("immutable") is not True:
        causes.append(forbidden("immutable", IMMUTABLE_WHEN_SET))
    for key in fields:
        if (new.get(key) or {}) != (old.get(key) or {}):
            causes.append(forbidden(key, IMMUTABLE_WHEN_SET))
    return causes


# -- storage: StorageClass, PersistentVolume, PersistentVolumeClaim ---------------------------

_RECLAIM_POLICIES = ("Delete", "Recycle", "Retain")
_CLASS_RECLAIM_POLICIES = ("Delete", "Retain")
_BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
_VOLUME_MODES = ("Block", "Filesystem")
_ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")
_PV_SOURCES = (
    "hostPath",
    "local",
    "csi",
    "nfs",
    "iscsi",
    "fc",
    "rbd",
    "cephfs",
    "cinder",
    "glusterfs",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "azureFile",
    "azureDisk",
    "vsphereVolume",
    "quobyte",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
)
PVC_SPEC_IMMUTABLE = (
    "spec is immutable after creation except resources.requests and "
    "volumeAttributesClassName for bound claims"
)


def _storage_class(obj: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    provisioner = obj.get("provisioner")
    if not provisioner:
        causes.append(required("provisioner"))
    elif isinstance(provisioner, str):
        causes += [
            invalid("provisioner", provisioner, m) for m in is_qualified_name(provisioner.lower())
        ]
    policy = obj.get("reclaimPolicy")
    if isinstance(policy, str) and policy not in _CLASS_RECLAIM_POLICIES:
        causes.append(not_supported("reclaimPolicy", policy, _CLASS_RECLAIM_POLICIES))
    mode = obj.get("volumeBindingMode")
    if not mode:
        causes.append(required("volumeBindingMode"))
    elif isinstance(mode, str) and mode not in _BINDING_MODES:
        causes.append(not_supported("volumeBindingMode", mode, _BINDING_MODES))
    return causes


def _storage_class_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    """Compared as defaulted (an object stored without ``reclaimPolicy`` has ``Delete``)."""
    defaults = {"reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"}

    def value(obj: dict[str, Any], key: str) -> Any:
        return obj.get(key) or defaults.get(key)

    causes = [
        forbidden(key, f"updates to {key} are forbidden.")
        for key in ("parameters", "provisioner", "reclaimPolicy")
        if value(new, key) != value(old, key)
    ]
    if value(new, "volumeBindingMode") != value(old, "volumeBindingMode"):
        causes.append(invalid("volumeBindingMode", new.get("volumeBindingMode"), IMMUTABLE))
    return causes


def _access_modes(field: str, modes: Any, *, detail: str) -> list[Cause]:
    if not _list(modes):
        return [required(field, detail)]
    return [
        not_supported(field, mode, _ACCESS_MODES)
        for mode in _list(modes)
        if isinstance(mode, str) and mode not in _ACCESS_MODES
    ]


def _positive_quantity(field: str, q: Any) -> list[Cause]:
    try:
        value = parse_quantity(q)
    except (ValueError, TypeError):
        return []  # pydantic reported it
    return [] if value > 0 else [invalid(field, q, "must be greater than zero")]


def _class_name(field: str, name: Any) -> list[Cause]:
    return _dns_subdomain(field, name) if isinstance(name, str) and name else []


def _volume_mode(field: str, mode: Any) -> list[Cause]:
    if isinstance(mode, str) and mode not in _VOLUME_MODES:
        return [not_supported(field, mode, _VOLUME_MODES)]
    return []


def _volume_mode_of(spec: dict[str, Any]) -> Any:
    """``spec.volumeMode`` as defaulted (``Filesystem``)."""
    return spec.get("volumeMode") or "Filesystem"


def _pv_source(spec: dict[str, Any]) -> list[Cause]:
    """Exactly one volume source; ``hostPath``/``local`` paths; ``local`` needs node affinity."""
    causes: list[Cause] = []
    present = [key for key in _PV_SOURCES if spec.get(key) is not None]
    for extra in present[1:]:
        causes.append(forbidden(f"spec.{extra}", "may not specify more than 1 volume type"))
    if not present:
        causes.append(required("spec", "must specify a volume type"))
    for key in ("hostPath", "local"):
        source = spec.get(key)
        if isinstance(source, dict):
            path = source.get("path")
            if not path:
                causes.append(required(f"spec.{key}.path"))
            elif isinstance(path, str) and ".." in path.split("/"):
                causes.append(invalid(f"spec.{key}.path", path, "must not contain '..'"))
    if present[:1] == ["local"] and not spec.get("nodeAffinity"):
        causes.append(required("spec.nodeAffinity", "Local volume requires node affinity"))
    required_selector = _map(_map(spec.get("nodeAffinity")).get("required"))
    for i, term in _items(required_selector.get("nodeSelectorTerms")):
        causes += _node_selector_term(f"spec.nodeAffinity.required.nodeSelectorTerms[{i}]", term)
    return causes


def _persistent_volume(obj: dict[str, Any]) -> list[Cause]:
    spec = _map(obj.get("spec"))
    causes = _access_modes("spec.accessModes", spec.get("accessModes"), detail="")
    capacity = _map(spec.get("capacity"))
    if not capacity:
        causes.append(required("spec.capacity"))
    elif set(capacity) != {"storage"}:
        causes.append(not_supported("spec.capacity", capacity, ["storage"]))
    for rname, q in capacity.items():
        causes += _positive_quantity(f"spec.capacity[{rname}]", q)
    policy = spec.get("persistentVolumeReclaimPolicy")
    if isinstance(policy, str) and policy and policy not in _RECLAIM_POLICIES:
        causes.append(
            not_supported("spec.persistentVolumeReclaimPolicy", policy, _RECLAIM_POLICIES)
        )
    causes += _pv_source(spec)
    causes += _class_name("spec.storageClassName", spec.get("storageClassName"))
    causes += _volume_mode("spec.volumeMode", spec.get("volumeMode"))
    return causes


def _persistent_volume_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    new_spec, old_spec = _map(new.get("spec")), _map(old.get("spec"))
    causes: list[Cause] = []
    if any(new_spec.get(k) != old_spec.get(k) for k in _PV_SOURCES):
        causes.append(
            forbidden(
                "spec.persistentvolumesource",
                "spec.persistentvolumesource is immutable after creation",
            )
        )
    if _volume_mode_of(new_spec) != _volume_mode_of(old_spec):
        causes.append(invalid("volumeMode", new_spec.get("volumeMode"), IMMUTABLE))
    old_affinity = old_spec.get("nodeAffinity")
    if old_affinity and new_spec.get("nodeAffinity") != old_affinity:
        causes.append(invalid("nodeAffinity", new_spec.get("nodeAffinity"), IMMUTABLE))
    return causes


def _persistent_volume_claim(obj: dict[str, Any]) -> list[Cause]:
    spec = _map(obj.get("spec"))
    causes = _access_modes(
        "spec.accessModes", spec.get("accessModes"), detail="at least 1 access mode is required"
    )
    if isinstance(spec.get("selector"), dict):
        causes += _label_selector("spec.selector", spec["selector"])
    requests = _map(_map(spec.get("resources")).get("requests"))
    if "storage" not in requests:
        causes.append(required("spec.resources[storage]"))
    else:
        causes += _positive_quantity("spec.resources[storage]", requests["storage"])
    causes += _class_name("spec.storageClassName", spec.get("storageClassName"))
    causes += _volume_mode("spec.volumeMode", spec.get("volumeMode"))
    return causes


def _storage_request(spec: dict[str, Any]) -> Any:
    try:
        return parse_quantity(_map(_map(spec.get("resources")).get("requests")).get("storage"))
    except (ValueError, TypeError):
        return None


def _persistent_volume_claim_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    """The spec is fixed, except: ``volumeName`` once (binding), ``storageClassName`` from unset
    while unbound (retroactive default class), the storage request of a bound claim (expansion,
    never below the previous value)."""
    new_spec, old_spec = _map(new.get("spec")), _map(old.get("spec"))
    new_cmp, old_cmp = json.loads(json.dumps(new_spec)), json.loads(json.dumps(old_spec))
    for spec in (new_cmp, old_cmp):
        spec["volumeMode"] = _volume_mode_of(spec)  # checked on its own below
    if not old_spec.get("volumeName"):
        old_cmp.pop("volumeName", None)
        new_cmp.pop("volumeName", None)
        if old_spec.get("storageClassName") is None:
            new_cmp.pop("storageClassName", None)
    bound = _map(new.get("status")).get("phase") == "Bound"
    if bound:
        for spec in (new_cmp, old_cmp):
            _map(_map(spec.get("resources")).get("requests")).pop("storage", None)
    causes: list[Cause] = []
    if new_cmp != old_cmp:
        causes.append(forbidden("spec", PVC_SPEC_IMMUTABLE))
    new_size, old_size = _storage_request(new_spec), _storage_request(old_spec)
    if new_size is not None and old_size is not None and new_size < old_size:
        causes.append(
            forbidden(
                "spec.resources.requests.storage", "field can not be less than previous value"
            )
        )
    if _volume_mode_of(new_spec) != _volume_mode_of(old_spec):
        causes.append(invalid("volumeMode", new_spec.get("volumeMode"), IMMUTABLE))
    return causes


# -- services --------------------------------------------------------------------------------

_SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
_SESSION_AFFINITIES = ("ClientIP", "None")
_TRAFFIC_POLICIES = ("Cluster", "Local")
_IP_FAMILY_POLICIES = ("PreferDualStack", "RequireDualStack", "SingleStack")
_MAX_CLIENT_IP_TIMEOUT = 86400
"""``MaxClientIPServiceAffinitySeconds``: a ClientIP affinity lasts at most a day."""


def _service_ports(spec: dict[str, Any], *, kind: str) -> list[Cause]:
    causes: list[Cause] = []
    ports = _items(spec.get("ports"))
    names: set[str] = set()
    seen: set[tuple[Any, Any]] = set()
    node_ports: set[tuple[Any, Any]] = set()
    for i, port in ports:
        p = f"spec.ports[{i}]"
        name = port.get("name")
        if not name:
            if len(ports) > 1:
                causes.append(required(f"{p}.name"))
        elif isinstance(name, str):
            causes += _dns_label(f"{p}.name", name)
            if name in names:
                causes.append(duplicate(f"{p}.name", name))
            names.add(name)
        number = port.get("port")
        causes += _port_in_range(f"{p}.port", number)
        protocol = port.get("protocol")
        if isinstance(protocol, str) and protocol not in _PROTOCOLS:
            causes.append(not_supported(f"{p}.protocol", protocol, _PROTOCOLS))
        target = port.get("targetPort")
        if _is_int(target):
            causes += _port_in_range(f"{p}.targetPort", target)
        elif isinstance(target, str):
            causes += _port_name(f"{p}.targetPort", target)
        if (number, protocol) in seen:
            causes.append(duplicate(p, {"port": number, "protocol": protocol}))
        seen.add((number, protocol))
        node_port = port.get("nodePort")
        if _is_int(node_port) and node_port != 0:
            if kind in ("ClusterIP", "ExternalName"):
                causes.append(
                    forbidden(f"{p}.nodePort", f"may not be used when `type` is '{kind}'")
                )
            elif (node_port, protocol) in node_ports:
                causes.append(duplicate(f"{p}.nodePort", node_port))
            else:
                causes += _port_in_range(f"{p}.nodePort", node_port)
            node_ports.add((node_port, protocol))
    return causes


def _cluster_ips(spec: dict[str, Any], *, kind: str) -> list[Cause]:
    cluster_ip, cluster_ips = spec.get("clusterIP"), _list(spec.get("clusterIPs"))
    if kind == "ExternalName":
        if cluster_ip or cluster_ips:
            return [forbidden("spec.clusterIPs", "may not be set for ExternalName services")]
        return []
    causes: list[Cause] = []
    if cluster_ips and cluster_ip not in (None, "") and cluster_ips[0] != cluster_ip:
        causes.append(invalid("spec.clusterIPs", cluster_ips, "first value must match `clusterIP`"))
    if len(cluster_ips) > 1:
        causes.append(
            invalid("spec.clusterIPs", cluster_ips, "may specify no more than one IP per family")
        )
    for i, ip in enumerate(cluster_ips[:1]):
        if ip == "None":
            if kind in ("NodePort", "LoadBalancer"):
                causes.append(
                    invalid(
                        f"spec.clusterIPs[{i}]", ip, f"may not be set to 'None' for {kind} services"
                    )
                )
        elif isinstance(ip, str) and ip:
            try:
                ipaddress.ip_address(ip)
            except ValueError:
                causes.append(
                    invalid(
                        f"spec.clusterIPs[{i}]",
                        ip,
                        "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                    )
                )
    return causes


def _service(obj: dict[str, Any]) -> list[Cause]:
    """``ValidateService``: ports, addresses, types and policies as Kubernetes words them."""
    spec = _map(obj.get("spec"))
    kind = spec.get("type")
    causes: list[Cause] = []
    if isinstance(kind, str) and kind not in _SERVICE_TYPES:
        causes.append(not_supported("spec.type", kind, _SERVICE_TYPES))
    headless = spec.get("clusterIP") == "None"
    if not _list(spec.get("ports")) and not headless and kind != "ExternalName":
        causes.append(required("spec.ports"))
    causes += _service_ports(spec, kind=str(kind))
    causes += _cluster_ips(spec, kind=str(kind))
    if kind == "ExternalName":
        external = spec.get("externalName")
        cname = external.removesuffix(".") if isinstance(external, str) else ""
        if cname:
            causes += _dns_subdomain("spec.externalName", cname)
        else:
            causes.append(required("spec.externalName"))
    causes += _labels("spec.selector", spec.get("selector"))
    affinity = spec.get("sessionAffinity")
    if isinstance(affinity, str) and affinity not in _SESSION_AFFINITIES:
        causes.append(not_supported("spec.sessionAffinity", affinity, _SESSION_AFFINITIES))
    timeout = _map(_map(spec.get("sessionAffinityConfig")).get("clientIP")).get("timeoutSeconds")
    if affinity == "ClientIP" and _is_int(timeout) and not 0 < timeout <= _MAX_CLIENT_IP_TIMEOUT:
        causes.append(
            invalid(
                "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                timeout,
                f"must be greater than 0 and less than {_MAX_CLIENT_IP_TIMEOUT}",
            )
        )
    for key in ("externalTrafficPolicy", "internalTrafficPolicy"):
        policy = spec.get(key)
        if isinstance(policy, str) and policy and policy not in _TRAFFIC_POLICIES:
            causes.append(not_supported(f"spec.{key}", policy, _TRAFFIC_POLICIES))
    family_policy = spec.get("ipFamilyPolicy")
    if isinstance(family_policy, str) and family_policy not in _IP_FAMILY_POLICIES:
        causes.append(not_supported("spec.ipFamilyPolicy", family_policy, _IP_FAMILY_POLICIES))
    for i, family in enumerate(_list(spec.get("ipFamilies"))):
        if family != "IPv4":
            causes.append(
                invalid(f"spec.ipFamilies[{i}]", family, "not configured on this cluster")
            )
    for i, ip in enumerate(_list(spec.get("externalIPs"))):
        try:
            ipaddress.ip_address(ip)
        except (TypeError, ValueError):
            causes.append(
                invalid(
                    f"spec.externalIPs[{i}]",
                    ip,
                    "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                )
            )
    if kind != "LoadBalancer":
        for key in ("allocateLoadBalancerNodePorts", "loadBalancerClass"):
            if spec.get(key) is not None:
                causes.append(
                    forbidden(f"spec.{key}", "may only be used when `type` is 'LoadBalancer'")
                )
    return causes


def _service_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    """A ClusterIP is fixed once set, except when the Service turns into or out of ExternalName."""
    new_spec, old_spec = _map(new.get("spec")), _map(old.get("spec"))
    if "ExternalName" in (new_spec.get("type"), old_spec.get("type")):
        return []
    old_ip, new_ip = old_spec.get("clusterIP"), new_spec.get("clusterIP")
    if old_ip not in (None, "") and new_ip != old_ip:
        return [invalid("spec.clusterIPs[0]", new_ip or "", "may not change once set")]
    return []


# -- rbac: roles and bindings (pkg/apis/rbac/validation) ------------------------------------

RBAC_GROUP = "rbac.authorization.k8s.io"
_SUBJECT_KINDS = ("ServiceAccount", "User", "Group")


def _go_value(value: Any) -> str:
    """``%#v`` of a Go string slice or ``rbac.RoleRef``, as a ``field.Invalid`` prints it."""
    if isinstance(value, list):
        return "[]string{" + ", ".join(json.dumps(v) for v in value) + "}"
    ref = _map(value)
    fields = (("APIGroup", "apiGroup"), ("Kind", "kind"), ("Name", "name"))
    return (
        "rbac.RoleRef{"
        + ", ".join(f"{go}:{json.dumps(ref.get(key) or '')}" for go, key in fields)
        + "}"
    )


def _invalid_go(field: str, value: Any, detail: str) -> Cause:
    return {
        "reason": "FieldValueInvalid",
        "message": f"Invalid value: {_go_value(value)}: {detail}",
        "field": field,
    }


def _policy_rule(field: str, rule: dict[str, Any], *, namespaced: bool) -> list[Cause]:
    causes: list[Cause] = []
    if not _list(rule.get("verbs")):
        causes.append(required(f"{field}.verbs", "verbs must contain at least one value"))
    urls = _list(rule.get("nonResourceURLs"))
    if urls:
        if namespaced:
            causes.append(_invalid_go(f"{field}.nonResourceURLs", urls,
                                      "namespaced rules cannot apply to non-resource URLs"))  # fmt: skip
        if any(_list(rule.get(k)) for k in ("apiGroups", "resources", "resourceNames")):
            causes.append(_invalid_go(f"{field}.nonResourceURLs", urls,
                                      "rules cannot apply to both regular resources and "
                                      "non-resource URLs"))  # fmt: skip
        return causes
    if not _list(rule.get("apiGroups")):
        causes.append(required(f"{field}.apiGroups",
                               "resource rules must supply at least one api group"))  # fmt: skip
    resources = _list(rule.get("resources"))
    if not resources:
        causes.append(required(f"{field}.resources",
                               "resource rules must supply at least one resource"))  # fmt: skip
    if _list(rule.get("resourceNames")) and len(resources) > 1:
        causes.append(required(f"{field}.resourceNames",
                               "resource names cannot apply to multiple resources"))  # fmt: skip
    return causes


def _rules(obj: dict[str, Any], *, namespaced: bool) -> list[Cause]:
    causes: list[Cause] = []
    for i, rule in _items(obj.get("rules")):
        causes += _policy_rule(f"rules[{i}]", rule, namespaced=namespaced)
    return causes


def _role(obj: dict[str, Any]) -> list[Cause]:
    return _rules(obj, namespaced=True)


def _cluster_role(obj: dict[str, Any]) -> list[Cause]:
    return _rules(obj, namespaced=False)


def _subject(field: str, subject: dict[str, Any], *, namespaced: bool) -> list[Cause]:
    causes: list[Cause] = []
    name, kind, group = subject.get("name") or "", subject.get("kind"), subject.get("apiGroup")
    if not name:
        causes.append(required(f"{field}.name"))
    if kind == "ServiceAccount":
        if name:
            causes += _dns_subdomain(f"{field}.name", name)
        if group:
            causes.append(not_supported(f"{field}.apiGroup", group, [""]))
        if not namespaced and not subject.get("namespace"):
            causes.append(required(f"{field}.namespace"))
    elif kind in ("User", "Group"):
        if not name:
            causes.append(invalid(f"{field}.name", name, f"{kind.lower()} name cannot be empty"))
        if group != RBAC_GROUP:
            causes.append(not_supported(f"{field}.apiGroup", group or "", [RBAC_GROUP]))
    else:
        causes.append(not_supported(f"{field}.kind", kind or "", _SUBJECT_KINDS))
    return causes


def _role_binding_like(obj: dict[str, Any], *, namespaced: bool) -> list[Cause]:
    ref = _map(obj.get("roleRef"))
    causes: list[Cause] = []
    if ref.get("apiGroup") != RBAC_GROUP:
        causes.append(not_supported("roleRef.apiGroup", ref.get("apiGroup") or "", [RBAC_GROUP]))
    kinds = ("Role", "ClusterRole") if namespaced else ("ClusterRole",)
    if ref.get("kind") not in kinds:
        causes.append(not_supported("roleRef.kind", ref.get("kind") or "", kinds))
    name = ref.get("name")
    if not name:
        causes.append(required("roleRef.name"))
    elif isinstance(name, str):
        causes += _path_segment_name("roleRef.name", name)
    for i, subject in _items(obj.get("subjects")):
        causes += _subject(f"subjects[{i}]", subject, namespaced=namespaced)
    return causes


def _role_binding(obj: dict[str, Any]) -> list[Cause]:
    return _role_binding_like(obj, namespaced=True)


def _cluster_role_binding(obj: dict[str, Any]) -> list[Cause]:
    return _role_binding_like(obj, namespaced=False)


def _role_ref_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    """``ValidateRoleBindingUpdate``: the roleRef of a binding never changes (delete and
    recreate it instead, so that whoever may bind the new role is checked again)."""
    if _map(new.get("roleRef")) == _map(old.get("roleRef")):
        return []
    return [_invalid_go("roleRef", new.get("roleRef"), "cannot change roleRef")]


# -- admissionregistration: webhooks and policies (pkg/apis/admissionregistration/validation) --


def _webhook_url(field: str, url: str) -> list[Cause]:
    parsed = urllib.parse.urlsplit(url)
    causes = []
    if parsed.scheme != "https":
        causes.append(invalid(field, url, "'https' is the only allowed URL scheme"))
    if not parsed.hostname:
        causes.append(invalid(field, url, "host must be specified"))
    if parsed.username or parsed.password:
        causes.append(invalid(field, url, "user information is not permitted in the URL"))
    if parsed.fragment:
        causes.append(invalid(field, url, "fragments are not permitted in the URL"))
    if parsed.query:
        causes.append(invalid(field, url, "query parameters are not permitted in the URL"))
    return causes


def _webhook_service(field: str, service: dict[str, Any]) -> list[Cause]:
    causes = []
    if not service.get("name"):
        causes.append(required(f"{field}.name", "service name is required"))
    if not service.get("namespace"):
        causes.append(required(f"{field}.namespace", "service namespace is required"))
    port = service.get("port")
    if _is_int(port) and not 1 <= port <= 65535:
        causes.append(
            invalid(f"{field}.port", port, "port is not valid: must be between 1 and 65535")
        )
    path = service.get("path")
    if isinstance(path, str) and path and not path.startswith("/"):
        causes.append(invalid(f"{field}.path", path, "must start with a '/'"))
    return causes


def _admission_rule(field: str, rule: dict[str, Any], *, operations: bool) -> list[Cause]:
    causes = []
    required_lists = ("apiGroups", "apiVersions", "resources")
    for key in ("operations", *required_lists) if operations else required_lists:
        if not _list(rule.get(key)):
            causes.append(required(f"{field}.{key}"))
    for i, op in enumerate(_list(rule.get("operations"))):
        if op not in ADMISSION_OPERATIONS:
            causes.append(not_supported(f"{field}.operations[{i}]", op, ADMISSION_OPERATIONS))
    scope = rule.get("scope")
    if scope is not None and scope not in ADMISSION_SCOPES:
        causes.append(not_supported(f"{field}.scope", scope, ADMISSION_SCOPES))
    return causes


def _enum(field: str, value: Any, allowed: tuple[str, ...]) -> list[Cause]:
    return [] if value is None or value in allowed else [not_supported(field, value, allowed)]


def _webhook(field: str, hook: dict[str, Any], *, mutating: bool) -> list[Cause]:
    causes = []
    name = hook.get("name")
    if not name:
        causes.append(required(f"{field}.name"))
    elif is_dns1123_subdomain(str(name)) or str(name).count(".") < 2:
        causes.append(
            invalid(
                f"{field}.name",
                name,
                "should be a domain with at least three segments separated by dots",
            )
        )
    config = _map(hook.get("clientConfig"))
    if ("url" in config) == ("service" in config):
        causes.append(
            required(f"{field}.clientConfig", "exactly one of url or service is required")
        )
    elif isinstance(config.get("url"), str):
        causes += _webhook_url(f"{field}.clientConfig.url", config["url"])
    else:
        causes += _webhook_service(f"{field}.clientConfig.service", _map(config.get("service")))
    for i, rule in _items(hook.get("rules")):
        causes += _admission_rule(f"{field}.rules[{i}]", rule, operations=True)
    side_effects = hook.get("sideEffects")
    if side_effects is None:
        detail = "must specify one of " + ", ".join(ADMISSION_SIDE_EFFECTS)
        causes.append(required(f"{field}.sideEffects", detail))
    else:
        causes += _enum(f"{field}.sideEffects", side_effects, ADMISSION_SIDE_EFFECTS)
    versions = _list(hook.get("admissionReviewVersions"))
    if "v1" not in versions and "v1beta1" not in versions:
        detail = "must specify one of v1, v1beta1"
        causes.append(required(f"{field}.admissionReviewVersions", detail))
    causes += _enum(f"{field}.failurePolicy", hook.get("failurePolicy"), FAILURE_POLICIES)
    causes += _enum(f"{field}.matchPolicy", hook.get("matchPolicy"), MATCH_POLICIES)
    if mutating:
        policy = hook.get("reinvocationPolicy")
        causes += _enum(f"{field}.reinvocationPolicy", policy, REINVOCATION_POLICIES)
    timeout = hook.get("timeoutSeconds")
    if _is_int(timeout) and not 1 <= timeout <= 30:
        detail = "the timeout value must be between 1 and 30 seconds"
        causes.append(invalid(f"{field}.timeoutSeconds", timeout, detail))
    for key in ("namespaceSelector", "objectSelector"):
        if isinstance(hook.get(key), dict):
            causes += _label_selector(f"{field}.{key}", hook[key])
    return causes


def _webhook_configuration(obj: dict[str, Any]) -> list[Cause]:
    mutating = obj.get("kind") == "MutatingWebhookConfiguration"
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, hook in _items(obj.get("webhooks")):
        causes += _webhook(f"webhooks[{i}]", hook, mutating=mutating)
        name = hook.get("name")
        if isinstance(name, str) and name:
            if name in seen:
                causes.append(duplicate(f"webhooks[{i}].name", name))
            seen.add(name)
    return causes


def _match_resources(field: str, match: dict[str, Any], *, need_rules: bool) -> list[Cause]:
    causes = []
    if need_rules and not _list(match.get("resourceRules")):
        causes.append(required(f"{field}.resourceRules"))
    for key in ("resourceRules", "excludeResourceRules"):
        for i, rule in _items(match.get(key)):
            causes += _admission_rule(f"{field}.{key}[{i}]", rule, operations=True)
    causes += _enum(f"{field}.matchPolicy", match.get("matchPolicy"), MATCH_POLICIES)
    for key in ("namespaceSelector", "objectSelector"):
        if isinstance(match.get(key), dict):
            causes += _label_selector(f"{field}.{key}", match[key])
    return causes


def _validating_admission_policy(obj: dict[str, Any]) -> list[Cause]:
    spec = _map(obj.get("spec"))
    causes = []
    if not _list(spec.get("validations")) and not _list(spec.get("auditAnnotations")):
        detail = "validations or auditAnnotations must contain at least one item"
        causes.append(required("spec.validations", detail))
    for i, rule in _items(spec.get("validations")):
        if not str(rule.get("expression") or "").strip():
            causes.append(required(f"spec.validations[{i}].expression"))
    if "matchConstraints" not in spec:
        causes.append(required("spec.matchConstraints"))
    else:
        causes += _match_resources(
            "spec.matchConstraints", _map(spec["matchConstraints"]), need_rules=True
        )
    causes += _enum("spec.failurePolicy", spec.get("failurePolicy"), FAILURE_POLICIES)
    param_kind = spec.get("paramKind")
    if isinstance(param_kind, dict):
        for key in ("apiVersion", "kind"):
            if not param_kind.get(key):
                causes.append(required(f"spec.paramKind.{key}"))
    return causes


def _validating_admission_policy_binding(obj: dict[str, Any]) -> list[Cause]:
    spec = _map(obj.get("spec"))
    causes = []
    if not spec.get("policyName"):
        causes.append(required("spec.policyName"))
    actions = _list(spec.get("validationActions"))
    if not actions:
        causes.append(required("spec.validationActions"))
    seen: set[str] = set()
    for i, action in enumerate(actions):
        if action not in VALIDATION_ACTIONS:
            causes.append(not_supported(f"spec.validationActions[{i}]", action, VALIDATION_ACTIONS))
        elif action in seen:
            causes.append(duplicate(f"spec.validationActions[{i}]", action))
        seen.add(str(action))
    if "Deny" in seen and "Warn" in seen:
        detail = "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"
        causes.append(invalid("spec.validationActions", actions, detail))
    if isinstance(spec.get("matchResources"), dict):
        causes += _match_resources("spec.matchResources", spec["matchResources"], need_rules=False)
    return causes


# -- flowcontrol.apiserver.k8s.io (ValidateFlowSchema, ValidatePriorityLevelConfiguration) ----


def _flow_subject(field: str, subject: dict[str, Any]) -> list[Cause]:
    kind = subject.get("kind")
    if kind not in SUBJECT_KINDS:
        return [not_supported(f"{field}.kind", kind, SUBJECT_KINDS)]
    member = {"Group": "group", "ServiceAccount": "serviceAccount", "User": "user"}[kind]
    named = _map(subject.get(member))
    causes = [] if subject.get(member) is not None else [required(f"{field}.{member}")]
    if causes:
        return causes
    if not named.get("name"):
        causes.append(required(f"{field}.{member}.name"))
    if kind == "ServiceAccount" and not named.get("namespace"):
        causes.append(required(f"{field}.{member}.namespace"))
    return causes


def _flow_rules(field: str, rules: dict[str, Any]) -> list[Cause]:
    causes = []
    if not _list(rules.get("subjects")):
        causes.append(required(f"{field}.subjects", "subjects must contain at least one value"))
    for j, subject in _items(rules.get("subjects")):
        causes += _flow_subject(f"{field}.subjects[{j}]", subject)
    resource, non_resource = _list(rules.get("resourceRules")), _list(rules.get("nonResourceRules"))
    if not resource and not non_resource:
        causes.append(
            required(
                field, "at least one of resourceRules and nonResourceRules has to be non-empty"
            )
        )
    for j, rule in _items(resource):
        where = f"{field}.resourceRules[{j}]"
        for name in ("verbs", "apiGroups", "resources"):
            if not _list(rule.get(name)):
                causes.append(
                    required(f"{where}.{name}", f"{name} must contain at least one value")
                )
        if not rule.get("clusterScope") and not _list(rule.get("namespaces")):
            causes.append(
                required(
                    f"{where}.namespaces",
                    "resource rules that are not cluster scoped must supply at least one namespace",
                )
            )
    for j, rule in _items(non_resource):
        where = f"{field}.nonResourceRules[{j}]"
        for name in ("verbs", "nonResourceURLs"):
            if not _list(rule.get(name)):
                causes.append(
                    required(f"{where}.{name}", f"{name} must contain at least one value")
                )
    return causes


def _flow_schema(obj: dict[str, Any]) -> list[Cause]:
    spec = _map(obj.get("spec"))
    causes = []
    precedence = spec.get("matchingPrecedence")
    if _is_int(precedence) and not 1 <= precedence <= 10_000:
        causes.append(
            invalid("spec.matchingPrecedence", precedence, "must be between 1 and 10000, inclusive")
        )
    if not _map(spec.get("priorityLevelConfiguration")).get("name"):
        causes.append(
            required("spec.priorityLevelConfiguration.name", "must reference a priority level")
        )
    method = spec.get("distinguisherMethod")
    if isinstance(method, dict) and method.get("type") not in DISTINGUISHER_METHODS:
        causes.append(
            not_supported(
                "spec.distinguisherMethod.type", method.get("type"), DISTINGUISHER_METHODS
            )
        )
    for i, rules in _items(spec.get("rules")):
        causes += _flow_rules(f"spec.rules[{i}]", rules)
    return causes


def _queuing(field: str, queuing: dict[str, Any]) -> list[Cause]:
    causes = []
    for name in ("queues", "handSize", "queueLengthLimit"):
        value = queuing.get(name)
        if _is_int(value) and value <= 0:
            causes.append(invalid(f"{field}.{name}", value, "must be positive"))
    queues, hand = queuing.get("queues"), queuing.get("handSize")
    if _is_int(queues) and _is_int(hand) and 0 < queues < hand:
        causes.append(
            invalid(f"{field}.handSize", hand, f"should not be greater than queues ({queues})")
        )
    return causes


def _percent(field: str, value: Any) -> list[Cause]:
    if _is_int(value) and not 0 <= value <= 100:
        return [invalid(field, value, "must be between 0 and 100, inclusive")]
    return []


def _priority_level_configuration(obj: dict[str, Any]) -> list[Cause]:
    spec = _map(obj.get("spec"))
    kind = spec.get("type")
    if kind not in PRIORITY_LEVEL_TYPES:
        return [not_supported("spec.type", kind, PRIORITY_LEVEL_TYPES)]
    name = _map(obj.get("metadata")).get("name")
    if name == "exempt" and kind != "Exempt":
        return [invalid("spec.type", kind, "the 'exempt' priority level must have type Exempt")]
    if kind == "Exempt":
        if spec.get("limited") is not None:
            return [forbidden("spec.limited", "must be nil if the type is not Limited")]
        exempt = _map(spec.get("exempt"))
        return _non_negative(
            "spec.exempt.nominalConcurrencyShares", exempt.get("nominalConcurrencyShares")
        ) + _percent("spec.exempt.lendablePercent", exempt.get("lendablePercent"))
    if spec.get("exempt") is not None:
        return [forbidden("spec.exempt", "must be nil if the type is Limited")]
    if spec.get("limited") is None:
        return [required("spec.limited", "must not be empty when type is Limited")]
    limited = _map(spec.get("limited"))
    causes = _non_negative(
        "spec.limited.nominalConcurrencyShares", limited.get("nominalConcurrencyShares")
    )
    causes += _percent("spec.limited.lendablePercent", limited.get("lendablePercent"))
    causes += _percent("spec.limited.borrowingLimitPercent", limited.get("borrowingLimitPercent"))
    response = _map(limited.get("limitResponse"))
    rtype = response.get("type")
    if rtype not in LIMIT_RESPONSE_TYPES:
        causes.append(not_supported("spec.limited.limitResponse.type", rtype, LIMIT_RESPONSE_TYPES))
    elif rtype == "Queue" and response.get("queuing") is None:
        causes.append(
            required("spec.limited.limitResponse.queuing", "must not be empty if the type is Queue")
        )
    elif rtype == "Reject" and response.get("queuing") is not None:
        causes.append(
            forbidden(
                "spec.limited.limitResponse.queuing",
                "must be nil if limited.limitResponse.type is not Limited",
            )
        )
    if rtype == "Queue" and isinstance(response.get("queuing"), dict):
        causes += _queuing("spec.limited.limitResponse.queuing", response["queuing"])
    return causes


# -- autoscaling: HorizontalPodAutoscaler ----------------------------------------------------
# pkg/apis/autoscaling/validation: replicas bounds, the target, each metric's source and
# target, and the behaviour's rules.

_METRIC_TYPES = ("ContainerResource", "External", "Object", "Pods", "Resource")
_TARGET_TYPES = ("AverageValue", "Utilization", "Value")
_SELECT_POLICIES = ("Disabled", "Max", "Min")
_POLICY_TYPES = ("Percent", "Pods")
_MAX_PERIOD_SECONDS = 1800
_MAX_STABILIZATION_WINDOW = 3600


def _metric_target(field: str, target: Any) -> list[Cause]:
    target = _map(target)
    kind = target.get("type")
    if kind not in _TARGET_TYPES:
        return [not_supported(f"{field}.type", kind, _TARGET_TYPES)]
    utilization = target.get("averageUtilization")
    if kind == "Utilization" and not (isinstance(utilization, int) and utilization > 0):
        return [invalid(f"{field}.averageUtilization", utilization, "must be greater than 0")]
    return []


def _hpa_metric(field: str, metric: dict[str, Any]) -> list[Cause]:
    kind = metric.get("type")
    if kind not in _METRIC_TYPES:
        return [not_supported(f"{field}.type", kind, _METRIC_TYPES)]
    source_key = kind[0].lower() + kind[1:]
    source = metric.get(source_key)
    if not isinstance(source, dict):
        return [
            required(
                f"{field}.{source_key}", "must populate information for the given metric source"
            )
        ]
    if kind in ("Resource", "ContainerResource"):
        causes = [] if source.get("name") else [required(f"{field}.{source_key}.name")]
        return causes + _metric_target(f"{field}.{source_key}.target", source.get("target"))
    return []


def _scaling_rules(field: str, rules: Any) -> list[Cause]:
    rules = _map(rules)
    causes: list[Cause] = []
    window = rules.get("stabilizationWindowSeconds")
    if isinstance(window, int) and not 0 <= window <= _MAX_STABILIZATION_WINDOW:
        causes.append(
            invalid(
                f"{field}.stabilizationWindowSeconds",
                window,
                f"must be less than or equal to {_MAX_STABILIZATION_WINDOW}"
                if window > 0
                else "must be greater than or equal to zero",
            )
        )
    select = rules.get("selectPolicy")
    if select is not None and select not in _SELECT_POLICIES:
        causes.append(not_supported(f"{field}.selectPolicy", select, _SELECT_POLICIES))
    for i, policy in _items(rules.get("policies")):
        at = f"{field}.policies[{i}]"
        if policy.get("type") not in _POLICY_TYPES:
            causes.append(not_supported(f"{at}.type", policy.get("type"), _POLICY_TYPES))
        if not (isinstance(policy.get("value"), int) and policy["value"] > 0):
            causes.append(invalid(f"{at}.value", policy.get("value"), "must be greater than zero"))
        period = policy.get("periodSeconds")
        if not (isinstance(period, int) and 0 < period <= _MAX_PERIOD_SECONDS):
            causes.append(
                invalid(
                    f"{at}.periodSeconds",
                    period,
                    f"must be greater than zero and less than or equal to {_MAX_PERIOD_SECONDS}",
                )
            )
    return causes


def _horizontal_pod_autoscaler(obj: dict[str, Any]) -> list[Cause]:
    spec = _map(obj.get("spec"))
    causes: list[Cause] = []
    ref = _map(spec.get("scaleTargetRef"))
    for key in ("kind", "name"):
        if not ref.get(key):
            causes.append(required(f"spec.scaleTargetRef.{key}"))
    minimum, maximum = spec.get("minReplicas", 1), spec.get("maxReplicas")
    if isinstance(minimum, int) and minimum < 1:
        causes.append(invalid("spec.minReplicas", minimum, "must be greater than or equal to 1"))
    if isinstance(maximum, int):
        if maximum < 1:
            causes.append(invalid("spec.maxReplicas", maximum, "must be greater than 0"))
        elif isinstance(minimum, int) and maximum < minimum:
            causes.append(
                invalid(
                    "spec.maxReplicas", maximum, "must be greater than or equal to `minReplicas`"
                )
            )
    for i, metric in _items(spec.get("metrics")):
        causes += _hpa_metric(f"spec.metrics[{i}]", metric)
    behavior = _map(spec.get("behavior"))
    for key in ("scaleUp", "scaleDown"):
        if key in behavior:
            causes += _scaling_rules(f"spec.behavior.{key}", behavior[key])
    return causes


_SEMANTIC: dict[str, Callable[[dict[str, Any]], list[Cause]]] = {
    "Pod": _pod,
    "ReplicationController": _replication_controller,
    "ReplicaSet": _replica_set,
    "Deployment": _deployment,
    "Node": _node,
    "Namespace": _namespace,
    "Event": _event,
    "Lease": _lease,
    "Binding": _binding,
    "ConfigMap": _config_map,
    "Secret": _secret,
    "StorageClass": _storage_class,
    "PersistentVolume": _persistent_volume,
    "PersistentVolumeClaim": _persistent_volume_claim,
    "DaemonSet": _daemon_set,
    "StatefulSet": _stateful_set,
    "ControllerRevision": _controller_revision,
    "Job": _job,
    "CronJob": _cron_job,
    "PodDisruptionBudget": _pod_disruption_budget,
    "HorizontalPodAutoscaler": _horizontal_pod_autoscaler,
    "Service": _service,
    "Endpoints": _endpoints,
    "EndpointSlice": _endpoint_slice,
    "Role": _role,
    "ClusterRole": _cluster_role,
    "RoleBinding": _role_binding,
    "ClusterRoleBinding": _cluster_role_binding,
    "MutatingWebhookConfiguration": _webhook_configuration,
    "ValidatingWebhookConfiguration": _webhook_configuration,
    "ValidatingAdmissionPolicy": _validating_admission_policy,
    "ValidatingAdmissionPolicyBinding": _validating_admission_policy_binding,
    "FlowSchema": _flow_schema,
    "PriorityLevelConfiguration": _priority_level_configuration,
}


# -- entry points ----------------------------------------------------------------------------


def _under(field: str, prefixes: Iterable[str]) -> bool:
    return any(
        field == p or field.startswith(p + ".") or field.startswith(p + "[") for p in prefixes
    )


def validate_object_meta(rt: ResourceType, meta: dict[str, Any]) -> list[Cause]:
    """The ObjectMeta rules alone (name, namespace, labels, finalizers ...), for kinds served
    from a schema rather than checked here."""
    return _metadata(rt, meta)


def _joined(causes: list[Cause], semantic: list[Cause]) -> list[Cause]:
    """The shape ``causes`` then each semantic one not under a field they already name."""
    reported = [c["field"] for c in causes]
    for cause in semantic:
        if not _under(cause["field"], reported) and cause not in causes:
            causes.append(cause)
    return causes


def validate(rt: ResourceType, obj: dict[str, Any]) -> list[Cause]:
    """Causes why ``obj`` (a ``rt`` body, defaults applied) is invalid; empty when it is valid."""
    if not isinstance(obj, dict):
        return [invalid("", obj, "must be a JSON object")]
    causes = _pydantic_causes(rt.model, obj)
    semantic = _metadata(rt, _map(obj.get("metadata")))
    check = _SEMANTIC.get(rt.kind)
    if check is not None:
        semantic += check(obj)
    return _joined(causes, semantic)


def _tolerations_only_added(old: Any, new: Any) -> bool:
    new_list = _list(new)
    return all(t in new_list for t in _list(old))


def _pod_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    new_spec, old_spec = _map(new.get("spec")), _map(old.get("spec"))
    if new_spec == old_spec:  # a status or metadata write: nothing to overlay
        return []
    # overlay what may change onto a copy of the old spec; anything else left different is refused
    merged = json.loads(json.dumps(old_spec))
    for list_name in ("containers", "initContainers"):
        old_list, new_list = _list(merged.get(list_name)), _list(new_spec.get(list_name))
        if len(old_list) == len(new_list):
            for o, n in zip(old_list, new_list, strict=True):
                if isinstance(o, dict) and isinstance(n, dict) and "image" in n:
                    o["image"] = n["image"]
    for key in ("activeDeadlineSeconds",):
        if key in new_spec:
            merged[key] = new_spec[key]
        else:
            merged.pop(key, None)
    if _tolerations_only_added(old_spec.get("tolerations"), new_spec.get("tolerations")):
        if "tolerations" in new_spec:
            merged["tolerations"] = new_spec["tolerations"]
    tgp_old, tgp_new = (
        old_spec.get("terminationGracePeriodSeconds"),
        new_spec.get("terminationGracePeriodSeconds"),
    )
    if _is_int(tgp_old) and tgp_old < 0 and tgp_new == 1:
        merged["terminationGracePeriodSeconds"] = 1
    if merged != new_spec:
        return [forbidden("spec", POD_UPDATE_FORBIDDEN)]
    return []


def _metadata_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    new_meta, old_meta = _map(new.get("metadata")), _map(old.get("metadata"))
    for key in ("name", "namespace", "uid", "creationTimestamp"):
        n, o = new_meta.get(key), old_meta.get(key)
        if n not in (None, "") and o not in (None, "") and n != o:
            causes.append(invalid(f"metadata.{key}", n, IMMUTABLE))
    return causes


def validate_update(rt: ResourceType, new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    """``validate(rt, new)`` plus what may not change between ``old`` and ``new``.

    Immutable: ``metadata.name``, ``namespace``, ``uid`` and ``creationTimestamp`` (a field
    missing from ``new`` counts as unchanged: the apiserver carries it over); a pod's spec except
    images, ``activeDeadlineSeconds`` and added tolerations; RS/Deployment ``spec.selector``.
    """
    causes = validate(rt, new) + _metadata_update(new, old)
    if rt.kind == "Pod":
        causes += _pod_update(new, old)
    elif rt.kind == "ConfigMap":
        causes += _immutable_contents(new, old, fields=("data", "binaryData"))
    elif rt.kind == "Secret":
        if new.get("type") != old.get("type"):
            causes.append(invalid("type", new.get("type"), IMMUTABLE))
        causes += _immutable_contents(new, old, fields=("data",))
    elif rt.kind == "StorageClass":
        causes += _storage_class_update(new, old)
    elif rt.kind == "PersistentVolume":
        causes += _persistent_volume_update(new, old)
    elif rt.kind == "PersistentVolumeClaim":
        causes += _persistent_volume_claim_update(new, old)
    elif rt.kind in ("ReplicaSet", "Deployment", "DaemonSet"):
        n_sel, o_sel = _map(new.get("spec")).get("selector"), _map(old.get("spec")).get("selector")
        if n_sel != o_sel:
            causes.append(invalid("spec.selector", n_sel, IMMUTABLE))
    elif rt.kind == "StatefulSet":
        causes += _stateful_set_update(new, old)
    elif rt.kind == "ControllerRevision":
        if new.get("data") != old.get("data"):
            causes.append(invalid("data", new.get("data"), IMMUTABLE))
    elif rt.kind == "Job":
        causes += _job_update(new, old)
    elif rt.kind == "Service":
        causes += _service_update(new, old)
    elif rt.kind in ("RoleBinding", "ClusterRoleBinding"):
        causes += _role_ref_update(new, old)
    elif rt.kind == "EndpointSlice" and new.get("addressType") != old.get("addressType"):
        causes.append(invalid("addressType", new.get("addressType"), IMMUTABLE))
    return causes


# -- status writes ---------------------------------------------------------------------------
# A write through ``.../status`` changes metadata and status only: the apiserver takes the rest
# from the stored object, which was validated when it was written. Kubernetes' status strategies
# validate accordingly (``ValidatePodStatusUpdate``: ``ValidateObjectMetaUpdate`` plus the
# status; ``ValidateDeploymentStatusUpdate`` ...), never the unchanged spec again.

_STATUS_SEMANTIC: dict[str, Callable[[dict[str, Any]], list[Cause]]] = {
    "Node": _node_status,
    "PodDisruptionBudget": _pod_disruption_budget_status,
}
"""The semantic rules of ``_SEMANTIC`` that read a kind's status; every other rule reads only
metadata (``_metadata``) or the spec."""

_STATUS_WRITE_FIELDS = frozenset({"metadata", "status"})


@functools.cache
def _status_model(model: type[BaseModel]) -> type[BaseModel]:
    """``model`` with every field but ``metadata`` and ``status`` taken as given (``Any``).

    Built once per kind. Field names, aliases and order are ``model``'s, so its errors have the
    same ``loc`` (and so the same causes) as ``model``'s for those two fields."""
    loose: dict[str, Any] = {
        name: (Any, None) for name in model.model_fields if name not in _STATUS_WRITE_FIELDS
    }
    return create_model(f"{model.__name__}StatusWrite", __base__=model, **loose)


def only_status_differs(new: dict[str, Any], old: dict[str, Any]) -> bool:
    """Whether ``new`` has ``old``'s every top-level field but metadata and status (cheap for
    what the status strategy shares with the stored object: its items compare by identity)."""
    return all(
        new.get(key) == old.get(key) for key in (new.keys() | old.keys()) - _STATUS_WRITE_FIELDS
    )


def validate_status_update(
    rt: ResourceType, new: dict[str, Any], old: dict[str, Any]
) -> list[Cause]:
    """``validate_update``'s causes for a status write, without checking the unchanged rest.

    The metadata (with its update rules) and the status are checked as ``validate_update``
    checks them, and give the same causes in the same order; the spec and any other field equal
    to ``old``'s is taken as given. When one of those differs (a mutating webhook changed it),
    this is ``validate_update`` itself. A stored spec that later rules would refuse is not
    refused here, as in Kubernetes.
    """
    if not only_status_differs(new, old):
        return validate_update(rt, new, old)
    causes = _pydantic_causes(_status_model(rt.model), new)
    semantic = _metadata(rt, _map(new.get("metadata")))
    check = _STATUS_SEMANTIC.get(rt.kind)
    if check is not None:
        semantic += check(_map(new.get("status")))
    return _joined(causes, semantic) + _metadata_update(new, old)
