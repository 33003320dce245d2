"""Fixtures of the api tests: ``kubectl``, the ``kubectl patch --local`` oracle."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.kubectl_patch import KUBECTL, run_patch


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``kubectl(obj, patch, patch_type)``: the result as kubectl 1.32 computes it."""
    if KUBECTL is None:
        pytest.skip("kubectl 1.32 is not installed beside the dispatcher")
    workdir = tmp_path_factory.mktemp("kubectl-patch")

    def run(obj: dict[str, Any], patch: Any, patch_type: str) -> Any:
        return run_patch(obj, patch, patch_type=patch_type, workdir=workdir)

    return run
