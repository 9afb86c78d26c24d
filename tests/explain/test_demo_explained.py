"""Every workload left waiting in `kai demo`'s scenes (the seeds' walkthroughs) is explained: one
dominant reason, a fix that was verified (applied to the scene, it makes the workload run), its place
in its queue and its estimated start (a virtual time: the scenes give their jobs durations and show
the moment workloads wait, with `--cycles`), in the same words in `kai explain`, the podgroups table, the
PodGroup's condition, its pods' messages and its last Warning event."""

from __future__ import annotations

import json
import pathlib
import shutil
from typing import Any

import pytest

from kai.cli.demo import load_scenes
from tests.cli.golden import scene_flags
from tests.explain.explain_check import explain, kai, runs_after, sim_words

SCENES = pathlib.Path(__file__).parents[2] / "src" / "kai" / "cli" / "scenes"
RUNNING = ("Running", "Succeeded")

# Waiting workloads whose start no simulation can tell, and why. ray-big waits on RayClusters, which
# serve until deleted: their pods have no duration, and one that ended would be recreated at once.
NO_START = {
    ("06-ray.yaml", "ray-big"): "unknown: waits on jobs with no duration (ray-nolabel and ray-train)",
}


def _waiting() -> list[tuple[str, str]]:
    """(scene, PodGroup) for each workload left waiting at the moment the scene's command shows."""
    found = []
    for scene in load_scenes():
        flags = scene_flags(scene.file)
        out = json.loads(kai(["sim", "-f", str(SCENES / scene.file), *flags, "-o", "json"]))
        found += [(scene.file, f"{g['namespace']}/{g['name']}") for g in out["podGroups"] if g["phase"] not in RUNNING]
    return found


WAITING = _waiting()


def test_the_demo_leaves_workloads_waiting() -> None:
    assert {scene for scene, _ in WAITING} == {"02-gang-waits.yaml", "03-fair-share.yaml", "06-ray.yaml"}


@pytest.mark.parametrize(("scene", "podgroup"), WAITING, ids=[f"{s}:{g.split('/')[1][:24]}" for s, g in WAITING])
def test_a_waiting_workload_is_explained_with_a_verified_fix(scene: str, podgroup: str, tmp_path: pathlib.Path) -> None:
    case = tmp_path / "scene"
    case.mkdir()
    shutil.copy(SCENES / scene, case / "manifests.yaml")
    flags = scene_flags(scene)
    doc: dict[str, Any] = json.loads(explain(case, ["podgroup", podgroup], flags, "json"))
    assert doc["phase"] == "Pending" and doc["reason"], doc
    assert doc["position"] is not None and doc["position"]["inQueue"] >= 1
    no_start = NO_START.get((scene, doc["workload"].split("/")[-1]))
    if no_start is None:
        assert doc["estimatedStart"] is not None, f"{doc['workload']} has no start time: {doc['estimate']}"
        assert doc["estimate"].startswith(f"starts at {doc['estimatedStart']} (in "), doc["estimate"]
    else:
        assert (doc["estimatedStart"], doc["estimate"]) == (None, no_start)
    assert doc["suggestions"], f"{doc['workload']} waits with no verified fix: {doc['message']}"
    assert runs_after(case, doc, doc["suggestions"][0], flags, tmp_path)

    message = doc["message"]
    assert set(sim_words(case, doc, flags)) == {message}
    table = kai(["sim", "-f", str(case / "manifests.yaml"), *flags, "--show", "podgroups"])
    assert " ".join(message.split()) in " ".join(table.split())
