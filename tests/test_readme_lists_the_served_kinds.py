"""The README's "What is served" table is the registry, row for row, and the kinds it lists as
not served are not in the registry.

Registering a kind, a verb, a subresource or a short name without updating the README fails
here, and the failure prints the row the README should have.
"""

from __future__ import annotations

import re
from pathlib import Path

from api.registry import ALL_VERBS, REGISTRY, ResourceType

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "## What is served"
COLUMNS = [
    "kind",
    "group/version",
    "resource",
    "scope",
    "verbs",
    "subresources",
    "short names",
    "what acts on it",
]


def expected_cells(rt: ResourceType) -> list[str]:
    """The README's first seven cells for ``rt`` (every version it is served at); the eighth
    (who acts on it) is prose."""
    verbs = "all" if set(rt.verbs) == set(ALL_VERBS) else ", ".join(rt.verbs)
    versions = [
        other.api_version
        for other in REGISTRY.every_version()
        if (other.group, other.kind) == (rt.group, rt.kind)
    ]  # the stored version first, then any served from its storage (autoscaling/v1)
    return [
        rt.kind,
        ", ".join(versions),
        rt.plural,
        "Namespaced" if rt.namespaced else "Cluster",
        verbs,
        ", ".join(s.name for s in rt.subresources) or "—",
        ", ".join(rt.short_names) or "—",
    ]


def section(text: str) -> list[str]:
    start = text.index(SECTION + "\n")
    rest = text[start + len(SECTION) + 1 :]
    end = rest.find("\n## ")
    return (rest if end < 0 else rest[:end]).splitlines()


def table(lines: list[str]) -> tuple[list[str], list[list[str]]]:
    rows = [line for line in lines if line.startswith("|")]
    parsed = [[cell.strip() for cell in row.strip().strip("|").split("|")] for row in rows]
    header, separator, *body = parsed
    assert all(set(cell) <= {"-", ":"} for cell in separator)
    return header, body


def not_served(lines: list[str]) -> list[str]:
    start = next(i for i, line in enumerate(lines) if line.startswith("Not served"))
    paragraph = []
    for line in lines[start:]:
        if not line.strip():
            break
        paragraph.append(line)
    return re.findall(r"`([A-Za-z]+)`", " ".join(paragraph))


def test_the_table_is_the_registry_row_for_row() -> None:
    header, body = table(section(README.read_text()))
    assert header == COLUMNS
    readme = {row[0]: row for row in body}
    assert len(readme) == len(body), "a kind listed twice"
    registry = {rt.kind: rt for rt in REGISTRY}
    assert sorted(readme) == sorted(registry), "README kinds differ from api/registry.py"
    for kind, rt in registry.items():
        row = readme[kind]
        want = " | ".join(expected_cells(rt))
        assert row[:7] == expected_cells(rt), f"README row for {kind} should start: | {want} |"
        assert row[7], f"README row for {kind}: say what acts on it"


def test_the_kinds_listed_as_not_served_are_not_in_the_registry() -> None:
    kinds = not_served(section(README.read_text()))
    for common in ("Ingress", "NetworkPolicy"):
        assert common in kinds
    served = {rt.kind for rt in REGISTRY}
    assert sorted(set(kinds) & served) == [], "served now: move them into the table"
