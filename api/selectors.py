"""Label selectors, field selectors and node-affinity matching.

Why: ``?labelSelector=`` and ``?fieldSelector=`` filter every list and watch; controllers match
pods to their owners by label selector; the scheduler matches nodes by ``nodeSelector`` and
node affinity. All of them parse here, with Kubernetes' grammar and error wording, and match
plain dicts (the apiserver's objects) or mappings of labels.

What it owns:

* ``parse_label_selector("a=b,c!=d,e in (x,y),f notin (z),g,!h,n>1")`` -> ``LabelSelector``;
  ``label_selector_from_dict({"matchLabels": ..., "matchExpressions": ...})`` for the
  structured form (``None`` gives a selector that matches nothing; ``{}`` matches everything).
  ``str(selector)`` is the canonical string (requirements sorted by key, values sorted).
* ``parse_field_selector("spec.nodeName=node1,status.phase!=Failed")`` -> ``FieldSelector``,
  with ``exact(field)`` so the watch cache can index the kubelets' ``spec.nodeName=<node>``.
* ``node_selector_requirement_matches`` / ``node_selector_terms_match``: ``In``, ``NotIn``,
  ``Exists``, ``DoesNotExist``, ``Gt``, ``Lt``; terms ORed, expressions within a term ANDed;
  ``matchFields`` on ``metadata.name``.

Bad syntax raises ``api.errors.BadRequest`` with Kubernetes' words
(``unable to parse requirement: found '', expected: identifier``). Which fields a resource
supports is the registry's business: ``FieldSelector.check_supported`` raises
``field label not supported: foo``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from api.errors import BadRequest
from api.names import validate_label_key, validate_label_value

__all__ = [
    "FieldRequirement",
    "FieldSelector",
    "LabelSelector",
    "Requirement",
    "label_selector_from_dict",
    "label_selector_from_set",
    "node_selector_requirement_matches",
    "node_selector_terms_match",
    "parse_field_selector",
    "parse_label_selector",
]

# Operators, spelled as Kubernetes' selection.Operator constants.
EQUALS, DOUBLE_EQUALS, NOT_EQUALS = "=", "==", "!="
IN, NOT_IN, EXISTS, DOES_NOT_EXIST = "in", "notin", "exists", "!"
GREATER_THAN, LESS_THAN = "gt", "lt"

_BINARY_OPERATORS = ("'='", "'!='", "'=='", "'in'", "'notin'", "'>'", "'<'")


# -- label selectors -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ANDed term of a label selector: ``key`` ``operator`` ``values``."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in (IN, EQUALS, DOUBLE_EQUALS):
            return self.key in labels and labels[self.key] in self.values
        if op in (NOT_IN, NOT_EQUALS):
            return self.key not in labels or labels[self.key] not in self.values
        if op == EXISTS:
            return self.key in labels
        if op == DOES_NOT_EXIST:
            return self.key not in labels
        if op in (GREATER_THAN, LESS_THAN):
            have, want = _to_int(labels.get(self.key)), _to_int(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op == GREATER_THAN else have < want
        return False

    def __str__(self) -> str:
        op = self.operator
        if op == EXISTS:
            return self.key
        if op == DOES_NOT_EXIST:
            return "!" + self.key
        values = ",".join(sorted(self.values))
        if op in (IN, NOT_IN):
            return f"{self.key} {op} ({values})"
        symbol = {GREATER_THAN: ">", LESS_THAN: "<"}.get(op, op)
        return f"{self.key}{symbol}{values}"


def _to_int(s: str | None) -> int | None:
    if s is None:
        return None
    try:
        return int(s, 10)
    except ValueError:
        return None


def _new_requirement(key: str, op: str, values: Iterable[str]) -> Requirement:
    """Kubernetes' ``NewRequirement``: checks arity and syntax; ValueError with its words."""
    values = list(values)
    for x in (key, *values):
        if not isinstance(x, str):
            raise ValueError(f"<nil>: Invalid value: {x!r}: must be a string")
    vals = tuple(sorted(set(values)))
    if errs := validate_label_key(key):
        raise ValueError(f'<nil>: Invalid value: "{key}": {"; ".join(errs)}')
    if op in (IN, NOT_IN):
        if not vals:
            raise ValueError("for 'in', 'notin' operators, values set can't be empty")
    elif op in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS):
        if len(vals) != 1:
            raise ValueError("exact-match compatibility requires one single value")
    elif op in (EXISTS, DOES_NOT_EXIST):
        if vals:
            raise ValueError("values set must be empty for exists and does not exist")
    elif op in (GREATER_THAN, LESS_THAN):
        if len(vals) != 1:
            raise ValueError("for 'Gt', 'Lt' operators, exactly one value is required")
        if _to_int(vals[0]) is None:
            raise ValueError("for 'Gt', 'Lt' operators, the value must be an integer")
    else:
        raise ValueError(f"operator '{op}' is not recognized")
    if op not in (GREATER_THAN, LESS_THAN):
        for v in vals:
            if errs := validate_label_value(v):
                raise ValueError(f'<nil>: Invalid value: "{v}": {"; ".join(errs)}')
    return Requirement(key, op, vals)


class LabelSelector:
    """A parsed label selector: requirements ANDed. Immutable; cheap to share."""

    __slots__ = ("_nothing", "requirements")

    def __init__(self, requirements: Iterable[Requirement] = (), *, nothing: bool = False) -> None:
        self.requirements: tuple[Requirement, ...] = tuple(
            sorted(requirements, key=lambda r: r.key)
        )
        self._nothing = nothing

    @classmethod
    def everything(cls) -> LabelSelector:
        return cls()

    @classmethod
    def nothing(cls) -> LabelSelector:
        """Matches no object: what a null ``selector`` means on a ReplicaSet."""
        return cls(nothing=True)

    @property
    def empty(self) -> bool:
        """True when the selector does not restrict anything (matches every object)."""
        return not self.requirements and not self._nothing

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self._nothing:
            return False
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def exact(self, key: str) -> str | None:
        """The value ``key`` must have (``key=v``, ``key==v``, ``key in (v)``), else None."""
        for r in self.requirements:
            if r.key == key:
                if r.operator in (EQUALS, DOUBLE_EQUALS, IN) and len(r.values) == 1:
                    return r.values[0]
                return None
        return None

    def exact_requirements(self) -> dict[str, str]:
        """Every ``key=value`` pinned by the selector (for label indexes)."""
        return {
            r.key: r.values[0]
            for r in self.requirements
            if r.operator in (EQUALS, DOUBLE_EQUALS, IN) and len(r.values) == 1
        }

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    def __repr__(self) -> str:
        return "LabelSelector(<nothing>)" if self._nothing else f"LabelSelector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LabelSelector):
            return NotImplemented
        return self.requirements == other.requirements and self._nothing == other._nothing

    def __hash__(self) -> int:
        return hash((self.requirements, self._nothing))


# The lexer: identifiers run until whitespace or one of the special symbols; a run of special
# symbols is read greedily as the longest operator it starts with.
_SPECIAL = set("=!(),<>")
_WHITESPACE = set(" \t\r\n")
_SYMBOLS = frozenset({"(", ")", ",", "!", "==", "=", ">", "<", "!="})
_KEYWORDS = {"in", "notin"}
_ID, _END, _ERROR = "id", "end", "error"


def _lex(s: str) -> list[tuple[str, str]]:
    """Tokens as (kind, literal); kind is _ID, _END, _ERROR, a keyword or a symbol."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(s)
    while True:
        while i < n and s[i] in _WHITESPACE:
            i += 1
        if i >= n:
            out.append((_END, ""))
            return out
        if s[i] in _SPECIAL:
            j, best = i, None
            buf = ""
            while j < n and s[j] in _SPECIAL:
                buf += s[j]
                if buf in _SYMBOLS:
                    best = (buf, j + 1)
                elif best is not None:
                    break
                j += 1
            if best is None:
                out.append((_ERROR, f"error expected: keyword found '{buf}'"))
                i = j
            else:
                out.append((best[0], best[0]))
                i = best[1]
        else:
            j = i
            while j < n and s[j] not in _SPECIAL and s[j] not in _WHITESPACE:
                j += 1
            word = s[i:j]
            out.append((word if word in _KEYWORDS else _ID, word))
            i = j


class _LabelParser:
    def __init__(self, s: str) -> None:
        self.tokens = _lex(s)
        self.pos = 0

    def _peek(self, values: bool = True) -> tuple[str, str]:
        kind, lit = self.tokens[self.pos]
        if values and kind in _KEYWORDS:
            kind = _ID  # 'in'/'notin' are plain values where a value is expected
        return kind, lit

    def _next(self, values: bool = True) -> tuple[str, str]:
        tok = self._peek(values)
        self.pos += 1
        return tok

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            kind, lit = self._peek()
            if kind == _END:
                return reqs
            if kind not in (_ID, "!"):
                raise ValueError(f"found '{lit}', expected: !, identifier, or 'end of string'")
            try:
                reqs.append(self._requirement())
            except ValueError as e:
                raise ValueError(f"unable to parse requirement: {e}") from None
            kind, lit = self._next()
            if kind == _END:
                return reqs
            if kind != ",":
                raise ValueError(f"found '{lit}', expected: ',' or 'end of string'")
            kind2, lit2 = self._peek()
            if kind2 not in (_ID, "!"):
                raise ValueError(f"found '{lit2}', expected: identifier after ','")

    def _requirement(self) -> Requirement:
        negate = False
        kind, lit = self._next()
        if kind == "!":
            negate = True
            kind, lit = self._next()
        if kind != _ID:
            raise ValueError(f"found '{lit}', expected: identifier")
        key = lit
        if errs := validate_label_key(key):
            raise ValueError(f'<nil>: Invalid value: "{key}": {"; ".join(errs)}')
        if self._peek()[0] in (_END, ","):
            return _new_requirement(key, DOES_NOT_EXIST if negate else EXISTS, ())
        kind, lit = self._next(values=False)
        op = {"in": IN, "notin": NOT_IN, "=": EQUALS, "==": DOUBLE_EQUALS, "!=": NOT_EQUALS}.get(
            kind
        ) or {">": GREATER_THAN, "<": LESS_THAN}.get(kind)
        if op is None or negate:
            raise ValueError(f"found '{lit}', expected: {', '.join(_BINARY_OPERATORS)}")
        values = self._set_values() if op in (IN, NOT_IN) else self._exact_value()
        return _new_requirement(key, op, values)

    def _exact_value(self) -> list[str]:
        kind, lit = self._peek()
        if kind in (_END, ","):
            return [""]
        kind, lit = self._next()
        if kind == _ID:
            return [lit]
        raise ValueError(f"found '{lit}', expected: identifier")

    def _set_values(self) -> list[str]:
        kind, lit = self._next()
        if kind != "(":
            raise ValueError(f"found '{lit}' expected: '('")
        kind, lit = self._peek()
        if kind == ")":
            self._next()
            return [""]
        if kind not in (_ID, ","):
            raise ValueError(f"found '{lit}', expected: ',', ')' or identifier")
        values: list[str] = []
        while True:
            kind, lit = self._next()
            if kind == _ID:
                values.append(lit)
                kind2, lit2 = self._peek()
                if kind2 == ",":
                    self._next()
                    if self._peek()[0] in (",", ")"):
                        values.append("")  # "(a,)" and "(a,,b)" hold the empty value
                    if self._peek()[0] == ")":
                        self._next()
                        return values
                    continue
                if kind2 == ")":
                    self._next()
                    return values
                raise ValueError(f"found '{lit2}', expected: ',' or ')'")
            if kind == ",":  # "(,a)"
                values.append("")
                if self._peek()[0] == ")":
                    self._next()
                    return values
                continue
            raise ValueError(f"found '{lit}', expected: ',', or identifier")


def parse_label_selector(s: str | None) -> LabelSelector:
    """Parse the string form (``a=b,c in (x,y),!d``); ``BadRequest`` with Kubernetes' message."""
    if not s or not s.strip():
        return LabelSelector()
    try:
        return LabelSelector(_LabelParser(s).parse())
    except ValueError as e:
        raise BadRequest(str(e)) from None


def label_selector_from_set(labels: Mapping[str, str] | None) -> LabelSelector:
    """``k1=v1,k2=v2`` exactly (a ReplicationController's selector); empty matches everything."""
    return LabelSelector(Requirement(k, EQUALS, (v,)) for k, v in (labels or {}).items())


_EXPRESSION_OPERATORS = {
    "In": IN,
    "NotIn": NOT_IN,
    "Exists": EXISTS,
    "DoesNotExist": DOES_NOT_EXIST,
}


class SupportsModelDump(Protocol):
    """A pydantic model (``api.meta.LabelSelectorSpec``, a node selector term) that this module,
    which imports no models, reads through its alias-keyed dump."""

    def model_dump(self, *, by_alias: bool, exclude_none: bool) -> dict[str, Any]: ...


def label_selector_from_dict(d: Mapping[str, Any] | SupportsModelDump | None) -> LabelSelector:
    """The structured ``metav1.LabelSelector`` (a dict or ``api.meta.LabelSelectorSpec``).

    ``None`` matches nothing, ``{}`` everything (``LabelSelectorAsSelector``). An unknown
    operator or a bad key/value raises ``BadRequest``.
    """
    if d is None:
        return LabelSelector.nothing()
    if not isinstance(d, Mapping):
        d = d.model_dump(by_alias=True, exclude_none=True)
    reqs: list[Requirement] = []
    try:
        match_labels, expressions = d.get("matchLabels") or {}, d.get("matchExpressions") or []
        if not isinstance(match_labels, Mapping) or not isinstance(expressions, list):
            raise ValueError("matchLabels must be a map and matchExpressions a list")
        for k, v in match_labels.items():
            reqs.append(_new_requirement(k, EQUALS, (v,)))
        for expr in expressions:
            if not isinstance(expr, Mapping):
                raise ValueError(f"<nil>: Invalid value: {expr!r}: must be a requirement object")
            operator = expr.get("operator")
            op = _EXPRESSION_OPERATORS.get(str(operator))
            if op is None:
                raise ValueError(f'"{operator}" is not a valid label selector operator')
            values = expr.get("values") or []
            if not isinstance(values, list | tuple):
                raise ValueError(f"<nil>: Invalid value: {values!r}: values must be a list")
            reqs.append(_new_requirement(expr.get("key", ""), op, values))
    except ValueError as e:
        raise BadRequest(str(e)) from None
    return LabelSelector(reqs)


# -- field selectors -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    operator: str  # "=", "==" or "!="
    value: str

    def matches(self, actual: str) -> bool:
        return (actual == self.value) != (self.operator == NOT_EQUALS)

    def __str__(self) -> str:
        return f"{self.field}{self.operator}{_escape_field_value(self.value)}"


def _escape_field_value(v: str) -> str:
    return v.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


FieldGetter = Callable[[str], str | None]
"""Maps a field path to the object's value for it (None or "" when absent)."""


class FieldSelector:
    """A parsed field selector: requirements ANDed."""

    __slots__ = ("requirements",)

    def __init__(self, requirements: Iterable[FieldRequirement] = ()) -> None:
        self.requirements: tuple[FieldRequirement, ...] = tuple(requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(r.field for r in self.requirements)

    def matches(self, getter: FieldGetter | Mapping[str, str]) -> bool:
        get = getter.get if isinstance(getter, Mapping) else getter
        return all(r.matches(get(r.field) or "") for r in self.requirements)

    def exact(self, field: str) -> str | None:
        """The value the selector pins ``field`` to (``field=v`` / ``field==v``), else None."""
        for r in self.requirements:
            if r.field == field and r.operator != NOT_EQUALS:
                return r.value
        return None

    def check_supported(self, supported: Collection[str]) -> None:
        """``BadRequest('field label not supported: foo')`` for a field not in ``supported``."""
        for r in self.requirements:
            if r.field not in supported:
                raise BadRequest(f"field label not supported: {r.field}")

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    def __repr__(self) -> str:
        return f"FieldSelector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldSelector):
            return NotImplemented
        return self.requirements == other.requirements

    def __hash__(self) -> int:
        return hash(self.requirements)


def _split_unescaped(s: str, sep: str) -> list[str]:
    """Split on ``sep`` not preceded by a backslash escape (escapes are kept)."""
    parts, buf, i = [], "", 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            buf += s[i : i + 2]
            i += 2
            continue
        if c == sep:
            parts.append(buf)
            buf = ""
        else:
            buf += c
        i += 1
    parts.append(buf)
    return parts


def _unescape_field_value(v: str) -> str:
    out, i = "", 0
    while i < len(v):
        c = v[i]
        if c == "\\":
            if i + 1 >= len(v):
                raise ValueError("unterminated escape sequence")
            nxt = v[i + 1]
            if nxt not in "\\,=":
                raise ValueError(f"invalid escape sequence: \\{nxt}")
            out += nxt
            i += 2
            continue
        if c in ",=":
            raise ValueError(f"unescaped '{c}' in value '{v}'")
        out += c
        i += 1
    return out


def _find_unescaped(s: str, op: str) -> int:
    i = 0
    while i < len(s):
        if s[i] == "\\":
            i += 2
            continue
        if s.startswith(op, i):
            return i
        i += 1
    return -1


def parse_field_selector(s: str | None) -> FieldSelector:
    """Parse ``f1=v1,f2!=v2`` (``=``, ``==``, ``!=``; ``\\,`` ``\\=`` ``\\\\`` escape values)."""
    if not s or not s.strip():
        return FieldSelector()
    reqs: list[FieldRequirement] = []
    for term in _split_unescaped(s, ","):
        if not term:
            continue
        for op in (NOT_EQUALS, DOUBLE_EQUALS, EQUALS):
            at = _find_unescaped(term, op)
            if at >= 0:
                field, raw = term[:at], term[at + len(op) :]
                if not field:
                    raise BadRequest(f"invalid field selector: '{term}': field name is empty")
                try:
                    value = _unescape_field_value(raw)
                except ValueError as e:
                    raise BadRequest(f"invalid field selector: {e}") from None
                reqs.append(FieldRequirement(field, op, value))
                break
        else:
            raise BadRequest(
                f"invalid field selector: invalid selector: '{s}'; can't understand '{term}'"
            )
    return FieldSelector(reqs)


# -- node selectors (node affinity, matchFields) ---------------------------------------------


def _as_dict(x: Mapping[str, Any] | SupportsModelDump) -> Mapping[str, Any]:
    if isinstance(x, Mapping):
        return x
    return x.model_dump(by_alias=True, exclude_none=True)


def node_selector_requirement_matches(
    req: Mapping[str, Any] | SupportsModelDump, labels: Mapping[str, str] | None
) -> bool:
    """One ``NodeSelectorRequirement`` (dict or model) against a node's labels.

    ``In``/``NotIn``/``Exists``/``DoesNotExist`` as for labels; ``Gt``/``Lt`` compare the
    label's value and the single requirement value as integers (unparsable -> no match).
    An unknown operator matches nothing.
    """
    r = _as_dict(req)
    key, op, values = r.get("key", ""), r.get("operator"), list(r.get("values") or [])
    labels = labels or {}
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            return False
        have, want = _to_int(labels.get(key)), _to_int(values[0])
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _field_requirement_matches(req: Mapping[str, Any], node_name: str) -> bool:
    if req.get("key") != "metadata.name":
        return False
    values = list(req.get("values") or [])
    if req.get("operator") == "In":
        return len(values) == 1 and node_name == values[0]
    if req.get("operator") == "NotIn":
        return len(values) == 1 and node_name != values[0]
    return False


def node_selector_terms_match(
    terms: Iterable[Mapping[str, Any] | SupportsModelDump] | None,
    labels: Mapping[str, str] | None,
    *,
    node_name: str = "",
) -> bool:
    """``nodeSelectorTerms``: true if any term matches; a term matches when all its
    ``matchExpressions`` (against ``labels``) and ``matchFields`` (``metadata.name`` against
    ``node_name``) do. An empty term, or no terms at all, matches nothing.
    """
    for term in terms or []:
        t = _as_dict(term)
        exprs = list(t.get("matchExpressions") or [])
        fields = list(t.get("matchFields") or [])
        if not exprs and not fields:
            continue
        if all(node_selector_requirement_matches(e, labels) for e in exprs) and all(
            _field_requirement_matches(_as_dict(f), node_name) for f in fields
        ):
            return True
    return False
