"""Every workload a step of the seeds' walkthroughs leaves waiting for good, applied as a user
applies it, is explained: one dominant reason, a fix that was verified (applied to the input, the
workload then runs), its place in a queue (for a workload whose queue is unusable, the place it
would take in the queue its fix moves it to, stated as such), and when it starts (a workload that
waits until something changes says so), in the same words in `kai explain`, the table, the
PodGroup's condition, its pods' messages and its Warning event. The walkthroughs that run are the
demo's scenes (`test_demo_explained.py`).

* seed 000 (KubeRay with KAI), its troubleshooting: a RayCluster with no queue label;
* seed 003 (the OpenNebula guide) as printed: its Queue manifests lose their indentation and are
  refused, so the guide's gpu-pod waits for queue test, which does not exist.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from tests.explain.explain_check import explain, kai, runs_after, sim_words

HERE = pathlib.Path(__file__).parent
WALKTHROUGHS = {
    "000-raycluster-without-queue-label": HERE / "cases" / "missing-queue-label",
    "003-gpu-pod-without-its-queues": HERE / "seeds" / "003-gpu-pod-without-its-queues",
}
FLAGS = ["--until-idle"]
NEVER = "none: it does not start unless something changes"


def _waiting() -> list[tuple[str, str]]:
    found = []
    for name, case in WALKTHROUGHS.items():
        out = json.loads(kai(["sim", "-f", str(case / "manifests.yaml"), *FLAGS, "-o", "json"]))
        found += [(name, f"{g['namespace']}/{g['name']}") for g in out["podGroups"] if g["phase"] == "Pending"]
    return found


WAITING = _waiting()


def test_each_walkthrough_leaves_a_workload_waiting() -> None:
    assert {name for name, _ in WAITING} == set(WALKTHROUGHS)


@pytest.mark.parametrize(("walkthrough", "podgroup"), WAITING, ids=[w for w, _ in WAITING])
def test_a_waiting_workload_has_a_reason_a_verified_fix_a_place_and_a_start(
    walkthrough: str, podgroup: str, tmp_path: pathlib.Path
) -> None:
    case = WALKTHROUGHS[walkthrough]
    doc: dict[str, Any] = json.loads(explain(case, ["podgroup", podgroup], FLAGS, "json"))
    assert doc["phase"] == "Pending" and doc["reason"], doc
    assert doc["suggestions"], f"{doc['workload']} waits with no verified fix: {doc['message']}"
    fix = doc["suggestions"][0]
    assert runs_after(case, doc, fix, FLAGS, tmp_path)

    position = doc["position"]
    assert position is not None and position["inQueue"] >= 1, doc
    if position.get("afterFix") is not None:
        # its own queue takes no work: the place is the one it takes in the queue its fix moves it to
        assert position["afterFix"] == fix["change"] and position["queue"] != doc["queue"]
        text = explain(case, ["podgroup", podgroup], FLAGS, "text")
        assert f"in queue {position['queue']}, after its fix ({fix['change']})" in text
    if doc["estimatedStart"] is None:
        assert doc["estimate"] == NEVER, doc["estimate"]
    else:
        assert doc["estimate"].startswith(f"starts at {doc['estimatedStart']} (in "), doc["estimate"]

    message = doc["message"]
    assert set(sim_words(case, doc, FLAGS)) == {message}
    table = kai(["sim", "-f", str(case / "manifests.yaml"), *FLAGS, "--show", "podgroups"])
    assert " ".join(message.split()) in " ".join(table.split())
