"""The kai-* scenario directories are generated from `tests/preemption/kai_cases`; this keeps them in step."""

from __future__ import annotations

from tests.preemption.kai_port import SCENARIOS, all_cases


def test_generated_scenarios_are_up_to_date() -> None:
    stale = []
    for name, manifests, expect in all_cases():
        target = SCENARIOS / name
        if not target.is_dir():
            stale.append(f"{name}: missing")
            continue
        if (target / "manifests.yaml").read_text() != manifests or (target / "expect.yaml").read_text() != expect:
            stale.append(f"{name}: differs (run python -m tests.preemption.kai_port)")
    assert stale == []


def test_every_case_expects_something() -> None:
    for name, _, expect in all_cases():
        assert "pods:" in expect and "phase:" in expect, name
