"""Scenario tables: manifests a user would apply, run through `kai sim`, checked against expect.yaml."""

from __future__ import annotations

import pathlib

import pytest
import yaml

from tests.scenario_check import diff, run_sim

CASES = sorted(p for p in (pathlib.Path(__file__).parent / "scenarios").iterdir() if (p / "expect.yaml").exists())


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_scenario(case: pathlib.Path, tmp_path: pathlib.Path) -> None:
    expect = yaml.safe_load((case / "expect.yaml").read_text())
    out = run_sim(case, expect, tmp_path)
    assert diff(out, expect) == []


def test_same_input_same_output(tmp_path: pathlib.Path) -> None:
    """Byte-identical JSON for the same input and flags."""
    case = pathlib.Path(__file__).parent / "scenarios" / "gpu-memory-shares-device"
    expect = yaml.safe_load((case / "expect.yaml").read_text())
    assert run_sim(case, expect, tmp_path) == run_sim(case, expect, tmp_path)
