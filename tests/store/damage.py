"""How the tests damage a SQLite file: as the report that found the defect did.

3,000 random bytes (the same every run) written over an existing database, at given offsets:
offset 0, or 100 bytes before page headers further in (``page_headers``), so each write
covers a header. Used by the store's own tests and by the apiserver's real-process test.
"""

from __future__ import annotations

import random
from pathlib import Path

PAGE = 4096
DAMAGE = random.Random(13).randbytes(3000)
"""The same 'random' bytes every run."""


def damage(path: Path, *, offsets: list[int]) -> None:
    with path.open("r+b") as f:
        for offset in offsets:
            f.seek(offset)
            f.write(DAMAGE)


def page_headers(path: Path, *, first: int, every: int) -> list[int]:
    """Offsets 100 bytes before every ``every``-th page from page ``first``: each write then
    covers a page header."""
    pages = path.stat().st_size // PAGE
    return [page * PAGE - 100 for page in range(first, pages - 1, every)]
