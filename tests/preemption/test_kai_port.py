"""The kai-* scenario directories are generated from `tests/preemption/kai_cases`; this keeps them in step."""

from __future__ import annotations

import pathlib

import pytest
import yaml

from tests.preemption.kai_port import SCENARIOS, active_cases, all_cases, moves, orphans
from tests.scenario_check import run_sim


def test_generated_scenarios_are_up_to_date() -> None:
    stale = []
    for name, manifests, expect in all_cases():
        target = SCENARIOS / name
        if not target.is_dir():
            stale.append(f"{name}: missing")
            continue
        if (target / "manifests.yaml").read_text() != manifests or (target / "expect.yaml").read_text() != expect:
            stale.append(f"{name}: differs (run python -m tests.preemption.kai_port)")
    stale += [f"{d.name}: no case produces it (run python -m tests.preemption.kai_port)" for d in orphans()]
    assert stale == []


def test_every_case_expects_something() -> None:
    for name, _, expect in all_cases():
        assert "pods:" in expect and "phase:" in expect, name


MOVED = [(f"kai-{area}-{case['name']}", moves(case)) for area, case in active_cases() if moves(case)]


@pytest.mark.parametrize("name,moved", MOVED, ids=[n for n, _ in MOVED])
def test_moved_victims_go_where_kai_puts_them(name: str, moved: dict[str, str], tmp_path: pathlib.Path) -> None:
    """A victim KAI shows Pipelined elsewhere is evicted by kai with an event naming that node."""
    case = SCENARIOS / name
    out = run_sim(case, yaml.safe_load((case / "expect.yaml").read_text()), tmp_path)
    messages = {e["object"].removeprefix("Pod/"): e["message"] for e in out["events"] if e["reason"] == "Evicted"}
    for pod, node in moved.items():
        assert f"moved to {node} " in messages.get(pod, ""), (pod, messages.get(pod))
