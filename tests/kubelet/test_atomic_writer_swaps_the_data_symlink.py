"""The atomic writer lays out a volume as Kubernetes does and replaces it all at once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from services.kubelet.atomic_writer import FileProjection, PayloadError, write_payload


def test_files_are_symlinks_into_the_current_version(tmp_path: Path) -> None:
    target = tmp_path / "vol"
    assert write_payload(
        target, {"a": FileProjection(b"1", 0o644), "d/b": FileProjection(b"2", 0o400)}
    )
    version = os.readlink(target / "..data")
    assert version.startswith("..20") and (target / version).is_dir()
    assert os.readlink(target / "a") == "..data/a" and os.readlink(target / "d") == "..data/d"
    assert (target / "d" / "b").read_bytes() == b"2"
    assert (target / version / "d" / "b").stat().st_mode & 0o777 == 0o400


def test_an_unchanged_payload_writes_nothing(tmp_path: Path) -> None:
    payload = {"a": FileProjection(b"1", 0o644)}
    write_payload(tmp_path, payload)
    before = os.readlink(tmp_path / "..data")
    assert not write_payload(tmp_path, payload)
    assert os.readlink(tmp_path / "..data") == before
    assert write_payload(tmp_path, {"a": FileProjection(b"1", 0o600)})  # a mode change counts


def test_an_update_swaps_data_and_drops_the_old_version_and_keys(tmp_path: Path) -> None:
    write_payload(tmp_path, {"a": FileProjection(b"1", 0o644), "b": FileProjection(b"x", 0o644)})
    old = os.readlink(tmp_path / "..data")
    write_payload(tmp_path, {"a": FileProjection(b"2", 0o644)})
    new = os.readlink(tmp_path / "..data")
    assert new != old and not (tmp_path / old).exists()
    assert (tmp_path / "a").read_bytes() == b"2"
    assert {p.name for p in tmp_path.iterdir()} == {"..data", new, "a"}


@pytest.mark.parametrize("path", ["/abs", "../up", "a/../b", "..hidden"])
def test_paths_that_could_escape_are_refused(tmp_path: Path, path: str) -> None:
    with pytest.raises(PayloadError):
        write_payload(tmp_path, {path: FileProjection(b"", 0o644)})
