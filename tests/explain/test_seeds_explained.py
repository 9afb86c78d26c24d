"""Every workload the seeds' walkthroughs and `kai demo`'s scenes leave waiting, applied as a user
applies it, is explained: one dominant reason, a fix that was verified (applied to the input, the
workload then runs), its place in a queue (for a workload whose queue is unusable, the place it
would take in the queue its fix moves it to, stated as such) and its start time (a workload that
does not start as things are: the time it starts once its first fix is made now, naming that fix),
in the same words in `kai explain`, the podgroups table, the PodGroup's condition, its pods'
messages and its last Warning event.

* seed 000 (KubeRay with KAI), its troubleshooting: a RayCluster with no queue label;
* seed 003 (the OpenNebula guide) as printed: its Queue manifests lose their indentation and are
  refused, so the guide's gpu-pod waits for queue test, which does not exist;
* the demo's scenes (the other seeds' walkthroughs), each seen at the moment its command shows it.
"""

from __future__ import annotations

import json
import pathlib
import shutil
from typing import Any

import pytest

from kai.cli.demo import load_scenes
from tests.cli.golden import scene_flags
from tests.explain.explain_check import explain, kai, runs_after, sim_words

HERE = pathlib.Path(__file__).parent
SCENES = pathlib.Path(__file__).parents[2] / "src" / "kai" / "cli" / "scenes"
SEEDS = {
    "000-raycluster-without-queue-label": HERE / "cases" / "missing-queue-label" / "manifests.yaml",
    "003-gpu-pod-without-its-queues": HERE / "seeds" / "003-gpu-pod-without-its-queues" / "manifests.yaml",
}


def _walkthroughs() -> dict[str, tuple[pathlib.Path, list[str]]]:
    """Each walkthrough: its manifests and how far it is played (the seeds until idle, a scene as far
    as its own command plays it)."""
    found = {name: (path, ["--until-idle"]) for name, path in SEEDS.items()}
    for scene in load_scenes():
        found[f"demo/{scene.file}"] = (SCENES / scene.file, scene_flags(scene.file))
    return found


WALKTHROUGHS = _walkthroughs()


def _waiting() -> list[tuple[str, str]]:
    found = []
    for name, (path, flags) in WALKTHROUGHS.items():
        out = json.loads(kai(["sim", "-f", str(path), *flags, "-o", "json"]))
        found += [(name, f"{g['namespace']}/{g['name']}") for g in out["podGroups"] if g["phase"] == "Pending"]
    return found


WAITING = _waiting()


def test_the_walkthroughs_that_leave_workloads_waiting() -> None:
    assert {name for name, _ in WAITING} == {
        *SEEDS,
        "demo/02-gang-waits.yaml",
        "demo/03-fair-share.yaml",
        "demo/06-ray.yaml",
    }


@pytest.mark.parametrize(("walkthrough", "podgroup"), WAITING, ids=[f"{w}:{g.split('/')[1][:24]}" for w, g in WAITING])
def test_a_waiting_workload_has_a_reason_a_verified_fix_a_place_and_a_start(
    walkthrough: str, podgroup: str, tmp_path: pathlib.Path
) -> None:
    path, flags = WALKTHROUGHS[walkthrough]
    case = tmp_path / "case"
    case.mkdir()
    shutil.copy(path, case / "manifests.yaml")
    doc: dict[str, Any] = json.loads(explain(case, ["podgroup", podgroup], flags, "json"))
    assert doc["phase"] == "Pending" and doc["reason"], doc
    assert doc["suggestions"], f"{doc['workload']} waits with no verified fix: {doc['message']}"
    fix = doc["suggestions"][0]
    assert runs_after(case, doc, fix, flags, tmp_path)

    position = doc["position"]
    assert position is not None and position["inQueue"] >= 1, doc
    if position.get("afterFix") is not None:
        # its own queue takes no work: the place is the one it takes in the queue its fix moves it to
        assert position["afterFix"] == fix["change"] and position["queue"] != doc["queue"]
    text = explain(case, ["podgroup", podgroup], flags, "text")
    if position.get("afterFix") is not None:
        assert f"in queue {position['queue']}, after its fix ({fix['change']})" in text

    # a start time, as things are or once its first fix is made now (then the estimate names it)
    assert doc["estimatedStart"] is not None, f"{doc['workload']} has no start time: {doc['estimate']}"
    assert doc["estimate"].startswith(f"starts at {doc['estimatedStart']} (in "), doc["estimate"]
    if doc["estimateAfterFix"] is not None:
        assert doc["estimateAfterFix"] == fix["change"]
        assert f"after its fix ({fix['change']})" in doc["estimate"], doc["estimate"]
    assert f"  Start:  {doc['estimate']}\n" in text + "\n"

    message = doc["message"]
    assert set(sim_words(case, doc, flags)) == {message}
    table = kai(["sim", "-f", str(case / "manifests.yaml"), *flags, "--show", "podgroups"])
    assert " ".join(message.split()) in " ".join(table.split())
