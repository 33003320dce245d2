"""Field selectors: =, ==, != and AND; exact() feeds the watch cache's nodeName index."""

from __future__ import annotations

from typing import Any

import pytest

from api.errors import BadRequest
from api.registry import REGISTRY
from api.selectors import parse_field_selector

POD: dict[str, Any] = {
    "metadata": {"name": "web-1", "namespace": "default"},
    "spec": {"nodeName": "node1", "restartPolicy": "Always"},
    "status": {"phase": "Running", "podIPs": [{"ip": "127.1.0.7"}], "podIP": "127.1.0.7"},
}


def pod_field(path: str) -> str | None:
    return REGISTRY.resolve("pods").field_value(POD, path)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("spec.nodeName=node1", True),
        ("spec.nodeName==node1", True),
        ("spec.nodeName!=node1", False),
        ("spec.nodeName=", False),
        ("spec.nodeName=node1,status.phase=Running", True),
        ("spec.nodeName=node1,status.phase!=Running", False),
        ("metadata.name=web-1,metadata.namespace=default", True),
        ("status.podIP=127.1.0.7", True),
        ("spec.hostNetwork=false", True),
        ("status.nominatedNodeName=", True),
    ],
)
def test_matches_pod_fields(selector: str, matches: bool) -> None:
    assert parse_field_selector(selector).matches(pod_field) is matches


def test_matches_a_plain_mapping_too() -> None:
    assert parse_field_selector("a=1,b!=2").matches({"a": "1", "b": "3"})
    assert not parse_field_selector("a=1").matches({})


def test_unscheduled_pods_selector_matches_missing_node_name() -> None:
    unscheduled = {"metadata": {"name": "p"}, "spec": {}}
    rt = REGISTRY.resolve("pods")
    assert rt is not None
    sel = parse_field_selector("spec.nodeName=")
    assert sel.matches(lambda p: rt.field_value(unscheduled, p))


def test_exact_pins_a_field_for_the_watch_cache_index() -> None:
    sel = parse_field_selector("spec.nodeName=node1,status.phase!=Failed")
    assert sel.exact("spec.nodeName") == "node1"
    assert sel.exact("status.phase") is None
    assert sel.exact("metadata.name") is None
    assert sel.fields == {"spec.nodeName", "status.phase"}
    assert str(sel) == "spec.nodeName=node1,status.phase!=Failed"
    assert [(r.field, r.operator, r.value) for r in sel.requirements] == [
        ("spec.nodeName", "=", "node1"),
        ("status.phase", "!=", "Failed"),
    ]


def test_escaped_commas_and_equals_in_values() -> None:
    sel = parse_field_selector(r"metadata.name=a\,b\=c\\d")
    assert sel.exact("metadata.name") == "a,b=c\\d"
    assert str(sel) == r"metadata.name=a\,b\=c\\d"
    assert parse_field_selector(str(sel)) == sel


def test_empty_selector_matches_everything() -> None:
    assert parse_field_selector("").empty
    assert parse_field_selector(None).matches({})


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("foo", "invalid field selector: invalid selector: 'foo'; can't understand 'foo'"),
        ("spec.nodeName", "can't understand 'spec.nodeName'"),
        ("=x", "field name is empty"),
        ("a=b=c", "unescaped '=' in value 'b=c'"),
        ("a=b\\x", "invalid escape sequence"),
    ],
)
def test_bad_syntax_is_a_bad_request(selector: str, message: str) -> None:
    with pytest.raises(BadRequest) as err:
        parse_field_selector(selector)
    assert message in err.value.message


def test_unsupported_field_label_is_rejected_with_kubernetes_words() -> None:
    rt = REGISTRY.resolve("pods")
    assert rt is not None
    supported = {"metadata.name", "metadata.namespace", *rt.field_getters}
    parse_field_selector("spec.nodeName=a").check_supported(supported)
    with pytest.raises(BadRequest, match=r"^field label not supported: spec\.foo$"):
        parse_field_selector("spec.nodeName=a,spec.foo=b").check_supported(supported)


def test_event_selectors_describe_uses() -> None:
    event = {
        "metadata": {"name": "demo.1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "demo", "namespace": "default", "uid": "u1"},
        "reason": "Scheduled",
        "reportingComponent": "default-scheduler",
        "type": "Normal",
    }
    rt = REGISTRY.resolve("events")
    assert rt is not None
    sel = parse_field_selector(
        "involvedObject.name=demo,involvedObject.namespace=default,involvedObject.uid=u1"
    )
    assert sel.matches(lambda p: rt.field_value(event, p))
    # source falls back to reportingComponent when source.component is absent
    assert parse_field_selector("source=default-scheduler").matches(
        lambda p: rt.field_value(event, p)
    )
