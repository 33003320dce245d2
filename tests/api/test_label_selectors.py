"""Label selectors: every form parses, matches, prints canonically; bad syntax is a 400."""

from __future__ import annotations

import pytest

from api.errors import BadRequest
from api.meta import LabelSelectorSpec
from api.selectors import (
    label_selector_from_dict,
    label_selector_from_set,
    parse_label_selector,
)

LABELS = {"app": "web", "tier": "frontend", "env": "prod", "rank": "5"}


@pytest.mark.parametrize(
    ("selector", "canonical", "matches"),
    [
        ("app=web", "app=web", True),
        ("app==web", "app==web", True),
        ("app!=web", "app!=web", False),
        ("app!=db", "app!=db", True),
        ("missing!=x", "missing!=x", True),
        ("tier in (frontend,backend)", "tier in (backend,frontend)", True),
        ("tier in (backend)", "tier in (backend)", False),
        ("tier notin (backend)", "tier notin (backend)", True),
        ("missing notin (x)", "missing notin (x)", True),
        ("app", "app", True),
        ("missing", "missing", False),
        ("!missing", "!missing", True),
        ("!app", "!app", False),
        ("rank>3", "rank>3", True),
        ("rank<3", "rank<3", False),
        ("  env = prod ,  app  ", "app,env=prod", True),
        ("app=web,tier in (frontend),!canary,env", "app=web,!canary,env,tier in (frontend)", True),
        ("example.com/role=x", "example.com/role=x", False),
        ("x in (foo,,baz)", "x in (,baz,foo)", False),
        ("app=", "app=", False),
    ],
)
def test_each_form_parses_matches_and_prints(selector: str, canonical: str, matches: bool) -> None:
    parsed = parse_label_selector(selector)
    assert str(parsed) == canonical
    assert parsed.matches(LABELS) is matches
    assert parse_label_selector(str(parsed)) == parsed  # the canonical form re-parses to itself


def test_empty_selector_matches_everything() -> None:
    for s in ("", "   ", None):
        sel = parse_label_selector(s)
        assert sel.empty and sel.matches({}) and sel.matches(LABELS) and str(sel) == ""


def test_in_and_notin_are_values_where_a_value_is_expected() -> None:
    assert parse_label_selector("op in (in,notin)").matches({"op": "notin"})
    assert parse_label_selector("op=in").matches({"op": "in"})


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("app in", "unable to parse requirement: found '' expected: '('"),
        ("app in (web", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("app in (", "unable to parse requirement: found '', expected: ',', ')' or identifier"),
        ("app web", "unable to parse requirement: found 'web', expected: '=', '!=', '=='"),
        ("app=web extra", "found 'extra', expected: ',' or 'end of string'"),
        ("app=web,", "found '', expected: identifier after ','"),
        ("=web", "found '=', expected: !, identifier, or 'end of string'"),
        ("!app=web", "unable to parse requirement: found '=', expected: '=', '!='"),
        ("app=(x)", "unable to parse requirement: found '(', expected: identifier"),
        ("-bad=x", 'unable to parse requirement: <nil>: Invalid value: "-bad": name part must'),
        ("a/b/c=x", 'Invalid value: "a/b/c": a qualified name must consist of'),
        ("app=bad value", "found 'value', expected: ',' or 'end of string'"),
        ("app=-x-", 'Invalid value: "-x-": a valid label must be an empty string'),
        ("rank>x", "for 'Gt', 'Lt' operators, the value must be an integer"),
        ("app in ()x", "found 'x', expected: ',' or 'end of string'"),
        ("app=~x", 'Invalid value: "~x": a valid label must be'),
    ],
)
def test_bad_syntax_is_a_bad_request_with_kubernetes_words(selector: str, message: str) -> None:
    with pytest.raises(BadRequest) as err:
        parse_label_selector(selector)
    assert message in err.value.message
    assert err.value.code == 400


def test_exact_requirements_for_index_lookups() -> None:
    sel = parse_label_selector("app=web,tier in (frontend),env in (a,b),!x,zone!=z")
    assert sel.exact("app") == "web"
    assert sel.exact("tier") == "frontend"
    assert sel.exact("env") is None
    assert sel.exact("zone") is None
    assert sel.exact("nope") is None
    assert sel.exact_requirements() == {"app": "web", "tier": "frontend"}


def test_structured_selector_match_labels_and_expressions() -> None:
    sel = label_selector_from_dict(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["frontend", "edge"]},
                {"key": "env", "operator": "NotIn", "values": ["dev"]},
                {"key": "rank", "operator": "Exists"},
                {"key": "canary", "operator": "DoesNotExist"},
            ],
        }
    )
    assert str(sel) == "app=web,!canary,env notin (dev),rank,tier in (edge,frontend)"
    assert sel.matches(LABELS)
    assert not sel.matches({**LABELS, "canary": "1"})
    assert not sel.matches({**LABELS, "env": "dev"})


def test_structured_selector_accepts_the_model() -> None:
    spec = LabelSelectorSpec.model_validate({"matchLabels": {"app": "web"}})
    assert label_selector_from_dict(spec).matches(LABELS)


def test_null_selector_matches_nothing_and_empty_matches_everything() -> None:
    nothing = label_selector_from_dict(None)
    assert not nothing.matches(LABELS) and not nothing.matches({}) and not nothing.empty
    everything = label_selector_from_dict({})
    assert everything.matches(LABELS) and everything.empty


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        (
            {"key": "a", "operator": "Equals", "values": ["x"]},
            '"Equals" is not a valid label selector operator',
        ),
        ({"key": "a", "operator": "In", "values": []}, "values set can't be empty"),
        ({"key": "a", "operator": "Exists", "values": ["x"]}, "values set must be empty"),
        ({"key": "a b", "operator": "Exists"}, 'Invalid value: "a b"'),
    ],
)
def test_structured_selector_errors(expr: dict[str, object], message: str) -> None:
    with pytest.raises(BadRequest) as err:
        label_selector_from_dict({"matchExpressions": [expr]})
    assert message in err.value.message


def test_selector_from_set_is_exact_equality() -> None:
    sel = label_selector_from_set({"app": "web", "env": "prod"})
    assert str(sel) == "app=web,env=prod"
    assert sel.matches(LABELS) and not sel.matches({"app": "web"})
    assert label_selector_from_set({}).empty


@pytest.mark.parametrize(
    "selector",
    [
        {"matchLabels": {"a": True}},
        {"matchLabels": [1]},
        {"matchExpressions": "x"},
        {"matchExpressions": [3]},
        {"matchExpressions": [{"key": "a", "operator": "In", "values": "ab"}]},
    ],
)
def test_wrongly_typed_structured_selectors_are_bad_requests(selector: dict[str, object]) -> None:
    with pytest.raises(BadRequest):
        label_selector_from_dict(selector)
