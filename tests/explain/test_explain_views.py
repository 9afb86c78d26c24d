"""`kai explain queue` and `kai explain pod`, and what `kai explain` says when the object is missing."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
from click.testing import CliRunner

from kai.cli.main import main
from kai.sim import forecast

CASES = pathlib.Path(__file__).parent / "cases"
REST = pathlib.Path(__file__).parent / "rest"


def explain(*args: str, case: str) -> Any:
    result = CliRunner().invoke(main, ["explain", *args, "-f", str(CASES / case / "manifests.yaml"), "-o", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_queue_shows_its_share_how_it_was_made_and_its_waiting_jobs() -> None:
    doc = explain("queue", "team-a", case="gang-does-not-fit")
    assert (doc["quota"]["gpu"], doc["limit"]["gpu"], doc["fairShare"]["gpu"]) == (-1.0, -1.0, 6.0)
    [step] = doc["fairShareSteps"]
    assert step["queue"] == "team-a" and step["amount"] == 6.0 and step["fromQuota"] == 6.0
    assert [w["podGroup"] for w in doc["waiting"]] == ["trainer"]
    assert doc["waiting"][0]["reason"] == "GangDoesNotFit"


def test_queue_over_its_fair_share_lists_what_reclaim_may_take() -> None:
    doc = explain("queue", "team-b", case="fragmented")
    assert doc["allocated"]["gpu"] == 12.0
    assert doc["reclaimCandidates"] == []  # its pods are non-preemptible: never victims


def test_running_pod_says_where_and_why_there() -> None:
    doc = explain("pod", "first-job", case="over-limit")
    assert doc["phase"] == "Running" and doc["reason"] is None
    assert doc["message"].startswith("running on node-0 since 2026-01-01T00:00:00Z, placed by bin-pack placement")
    doc = explain("pod", "b-0", case="reclaim")
    assert doc["message"] == (
        "running on node-0 since 2026-01-01T00:00:00Z; it was bound there before the scheduler saw it"
    )


def test_missing_object_exits_2_naming_it() -> None:
    path = str(CASES / "reclaim" / "manifests.yaml")
    for args, name in ((["podgroup", "nope"], "podgroup default/nope"), (["queue", "nope"], "queue nope")):
        result = CliRunner().invoke(main, ["explain", *args, "-f", path])
        assert result.exit_code == 2
        assert f"error: {name} does not exist" in result.output


def test_a_pod_of_another_scheduler_says_which_field_hands_it_to_kai(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\n"
        "spec: {schedulerName: default-scheduler, containers: [{name: main, image: nginx}]}\n"
    )
    result = CliRunner().invoke(main, ["explain", "pod", "web", "-f", str(path), "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["phase"], doc["reason"]) == ("Pending", "NotOurScheduler")
    assert (
        doc["message"]
        == 'spec.schedulerName is "default-scheduler"; set it to kai-scheduler for kai to schedule this pod'
    )


def test_either_manifests_or_a_cluster() -> None:
    result = CliRunner().invoke(main, ["explain", "queue", "q"])
    assert result.exit_code == 2
    assert "give either -f" in result.output


def test_a_queue_view_simulates_starts_after_a_fix_for_the_first_jobs_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each start after a fix costs a fork of the simulation, fewer as the cluster grows: past them a
    queue's view says the start after the fix was not simulated, instead of giving none. Here the
    cluster's 3 pods are as many as `AFTER_FIX_PODS` allows for: one fork."""
    monkeypatch.setattr(forecast, "AFTER_FIX_PODS", 3)
    result = CliRunner().invoke(main, ["explain", "queue", "team", "-f", str(REST / "three-wait.yaml"), "-o", "json"])
    assert result.exit_code == 0, result.output
    first, second = json.loads(result.stdout)["waiting"]
    assert first["estimateAfterFix"] == "reduce to 8 GPUs per pod" and first["estimatedStart"] is not None
    assert (second["estimatedStart"], second["estimateAfterFix"]) == (None, None)
    assert second["estimate"] == (
        "none: it does not start unless something changes; its start after its fix (reduce to 8 GPUs per pod) "
        "was not simulated (more than 1 here)"
    )
