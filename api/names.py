"""Name syntax: DNS-1123 labels and subdomains, qualified names (label keys), label values.

Why: object names, label keys and values, container names, finalizers and annotation keys all
follow a handful of syntaxes, and both the selector parser (``api.selectors``) and object
validation (``api.validation``) must reject the same strings with the same words. Each check
returns a list of messages (empty = valid) worded exactly as Kubernetes words them
(``apimachinery/pkg/util/validation``), so a caller can wrap them in a field error.

Limits: ASCII only, as Kubernetes; no IDNA.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

__all__ = [
    "is_config_map_key",
    "is_dns1035_label",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_qualified_name",
    "is_valid_label_value",
    "validate_label_key",
    "validate_label_value",
]

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + r"(\." + _DNS1123_LABEL_FMT + ")*"
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _QUALIFIED_NAME_FMT + ")?"

_DNS1123_LABEL = re.compile(f"^{_DNS1123_LABEL_FMT}$")
_DNS1123_SUBDOMAIN = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}$")
_DNS1035_LABEL = re.compile(f"^{_DNS1035_LABEL_FMT}$")
_QUALIFIED_NAME = re.compile(f"^{_QUALIFIED_NAME_FMT}$")
_LABEL_VALUE = re.compile(f"^{_LABEL_VALUE_FMT}$")

_QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    """Kubernetes' ``RegexError`` wording, double space after the commas included."""
    s = msg + " (e.g. "
    for i, example in enumerate(examples):
        if i:
            s += " or "
        s += f"'{example}', "
    return s + f"regex used for validation is '{fmt}')"


def _max_len(n: int) -> str:
    return f"must be no more than {n} characters"


def is_dns1123_label(value: str) -> list[str]:
    errs = []
    if len(value) > DNS1123_LABEL_MAX:
        errs.append(_max_len(DNS1123_LABEL_MAX))
    if not _DNS1123_LABEL.match(value):
        errs.append(
            _regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                "or '-', and must start and end with an alphanumeric character",
                _DNS1123_LABEL_FMT,
                "my-name",
                "123-abc",
            )
        )
    return errs


def _is_dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(_max_len(DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN.match(value):
        errs.append(
            _regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character",
                _DNS1123_SUBDOMAIN_FMT,
                "example.com",
            )
        )
    return errs


_CONFIG_MAP_KEY_FMT = "[-._a-zA-Z0-9]+"
_CONFIG_MAP_KEY = re.compile(_CONFIG_MAP_KEY_FMT)


def is_config_map_key(value: str) -> list[str]:
    """A ConfigMap or Secret key (a file name in their volumes): ``IsConfigMapKey``."""
    errs = []
    if len(value.encode()) > DNS1123_SUBDOMAIN_MAX:  # Go's len counts bytes
        errs.append(_max_len(DNS1123_SUBDOMAIN_MAX))
    if not _CONFIG_MAP_KEY.fullmatch(value):
        errs.append(
            _regex_error(
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                _CONFIG_MAP_KEY_FMT,
                "key.name",
                "KEY_NAME",
                "key-name",
            )
        )
    if value == ".":
        errs.append("must not be '.'")
    elif value == "..":
        errs.append("must not be '..'")
    elif value.startswith(".."):
        errs.append("must not start with '..'")
    return errs


def is_dns1035_label(value: str) -> list[str]:
    errs = []
    if len(value) > DNS1123_LABEL_MAX:
        errs.append(_max_len(DNS1123_LABEL_MAX))
    if not _DNS1035_LABEL.match(value):
        errs.append(
            _regex_error(
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                "start with an alphabetic character, and end with an alphanumeric character",
                _DNS1035_LABEL_FMT,
                "my-name",
                "abc-123",
            )
        )
    return errs


def _is_qualified_name(value: str) -> list[str]:
    """``[prefix/]name``: a label or annotation key, a finalizer, a condition type."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in _is_dns1123_subdomain(prefix))
    else:
        return [
            "a qualified name "
            + _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX:
        errs.append("name part " + _max_len(QUALIFIED_NAME_MAX))
    if not _QUALIFIED_NAME.match(name):
        errs.append(
            "name part "
            + _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def _is_valid_label_value(value: str) -> list[str]:
    errs = []
    if len(value) > LABEL_VALUE_MAX:
        errs.append(_max_len(LABEL_VALUE_MAX))
    if not _LABEL_VALUE.match(value):
        errs.append(
            _regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character",
                _LABEL_VALUE_FMT,
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return errs


CACHED_LENGTH = DNS1123_SUBDOMAIN_MAX
"""Strings up to this long have their verdict remembered: the same label keys and values,
finalizers and toleration keys recur in every object of a kind, and checking them is a
regular expression or two each time. Longer ones (invalid anyway, and unbounded) are checked
afresh, so the caches hold at most ``_CACHE_SIZE`` short strings each."""
_CACHE_SIZE = 4096


def _remembered(check: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    @lru_cache(maxsize=_CACHE_SIZE)
    def cached(value: str) -> tuple[str, ...]:
        return tuple(check(value))

    def verdict(value: str) -> list[str]:
        return list(cached(value)) if len(value) <= CACHED_LENGTH else check(value)

    verdict.__doc__ = check.__doc__
    return verdict


is_dns1123_subdomain = _remembered(_is_dns1123_subdomain)
is_qualified_name = _remembered(_is_qualified_name)
is_valid_label_value = _remembered(_is_valid_label_value)


def validate_label_key(key: str) -> list[str]:
    """Messages for an invalid label key (a qualified name); empty when valid."""
    return is_qualified_name(key)


def validate_label_value(value: str) -> list[str]:
    """Messages for an invalid label value; empty when valid."""
    return is_valid_label_value(value)
