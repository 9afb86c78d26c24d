"""Shared fixtures for the replay tests: where the openb trace lives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

OPENB_DIR = Path(os.environ.get("KAI_OPENB_DIR", "/work/shared/data/alibaba-gpu-v2023"))


@pytest.fixture
def openb_dir() -> Path:
    """The published openb CSVs (override with KAI_OPENB_DIR); tests that need them skip without."""
    if not (OPENB_DIR / "openb_pod_list_default.csv").is_file():
        pytest.skip(f"openb trace not found in {OPENB_DIR} (set KAI_OPENB_DIR)")
    return OPENB_DIR
