"""Fixtures of the deploy tests: one real API server per test module (see kube.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.deploy.kube import Kube, start_cluster


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    yield from start_cluster(tmp_path_factory.mktemp("k8s"))
