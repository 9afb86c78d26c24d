"""Shared fixtures for the replay tests: where the openb trace lives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# the trace ships in ../shared beside the repository (as CI lays it out)
DEFAULT_OPENB_DIR = Path(__file__).resolve().parents[3] / "shared" / "data" / "alibaba-gpu-v2023"
OPENB_DIR = Path(os.environ.get("KAI_OPENB_DIR", str(DEFAULT_OPENB_DIR)))


@pytest.fixture
def openb_dir() -> Path:
    """The published openb CSVs (override with KAI_OPENB_DIR); tests that need them skip without."""
    if not (OPENB_DIR / "openb_pod_list_default.csv").is_file():
        pytest.skip(f"openb trace not found in {OPENB_DIR} (set KAI_OPENB_DIR)")
    return OPENB_DIR
