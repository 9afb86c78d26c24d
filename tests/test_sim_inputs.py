"""`kai sim -f` reads like `kubectl apply -f`: files, directories, standard input, JSON, v1 List."""

from __future__ import annotations

import json
import pathlib
from typing import Any

from click.testing import CliRunner

from kai.cli.main import main

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p1", "labels": {"kai.scheduler/queue": "default-queue"}},
    "spec": {
        "schedulerName": "kai-scheduler",
        "containers": [{"name": "main", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "2"}}}],
    },
}


def sim(args: list[str], stdin: str | None = None) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["sim", *args, "-o", "json"], input=stdin)
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def test_json_file_with_a_list(tmp_path: pathlib.Path) -> None:
    second = json.loads(json.dumps(POD))
    second["metadata"]["name"] = "p2"
    path = tmp_path / "pods.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [POD, second]}))
    doc = sim(["-f", str(path)])
    assert [(p["name"], p["phase"]) for p in doc["pods"]] == [("p1", "Running"), ("p2", "Running")]


def test_directory_and_stdin(tmp_path: pathlib.Path) -> None:
    (tmp_path / "a.yaml").write_text(json.dumps(POD))
    other = json.loads(json.dumps(POD))
    other["metadata"]["name"] = "p2"
    doc = sim(["-f", str(tmp_path), "-f", "-"], stdin=json.dumps(other))
    assert sorted(p["name"] for p in doc["pods"]) == ["p1", "p2"]


def test_embedded_cluster_defaults() -> None:
    doc = sim(["-f", "-"], stdin=json.dumps(POD))
    [pod] = doc["pods"]
    assert pod["node"] == "node-0"
    queues = {q["name"]: q for q in doc["queues"]}
    assert queues["default-queue"]["parent"] == "default-parent-queue"
    assert queues["default-queue"]["quota"] == {"gpu": 0.0, "cpu": 0.0, "memory": 0.0}
    assert queues["default-queue"]["allocated"]["gpu"] == 2.0
    [group] = doc["podGroups"]
    assert (group["priorityClassName"], group["priority"], group["preemptible"]) == ("train", 50, True)
    assert doc["clock"] == "2026-01-01T00:00:01Z"


def test_other_scheduler_pods() -> None:
    foreign = json.loads(json.dumps(POD))
    foreign["spec"]["schedulerName"] = "default-scheduler"
    running = json.loads(json.dumps(foreign))
    running["metadata"]["name"] = "busy"
    running["spec"]["nodeName"] = "node-0"
    running["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "8"
    ours = json.loads(json.dumps(POD))
    ours["metadata"]["name"] = "mine"
    text = "\n---\n".join(json.dumps(o) for o in (foreign, running, ours))
    doc = sim(["-f", "-"], stdin=text)
    pods = {p["name"]: p for p in doc["pods"]}
    assert pods["p1"]["phase"] == "Pending"
    assert pods["p1"]["reason"] == "NotOurScheduler"
    # node-0 is taken by the foreign pod, so ours goes to node-1
    assert pods["mine"]["node"] == "node-1"
