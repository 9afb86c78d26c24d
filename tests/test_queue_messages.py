"""What a user reads when the queue is wrong or missing (the seeds' troubleshooting cases)."""

from __future__ import annotations

import json
import pathlib
from typing import Any

from click.testing import CliRunner

from kai.cli.main import main

QUEUES = """apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: department-1}
spec:
  resources:
    gpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    memory: {quota: -1, limit: -1, overQuotaWeight: 1}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: team-a}
spec:
  parentQueue: department-1
  resources:
    gpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    memory: {quota: -1, limit: -1, overQuotaWeight: 1}
"""


def pod(name: str, labels: str) -> str:
    return f"""---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {labels}}}
spec:
  schedulerName: kai-scheduler
  containers: [{{name: main, image: ubuntu, resources: {{limits: {{nvidia.com/gpu: "1"}}}}}}]
"""


def run(tmp_path: pathlib.Path, text: str) -> dict[str, Any]:
    path = tmp_path / "in.yaml"
    path.write_text(text)
    result = CliRunner().invoke(main, ["sim", "-f", str(path), "-o", "json"])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def test_unknown_queue_names_the_fix(tmp_path: pathlib.Path) -> None:
    doc = run(tmp_path, QUEUES + pod("lost", "{kai.scheduler/queue: team-x}"))
    [p] = doc["pods"]
    assert p["phase"] == "Pending"
    [group] = doc["podGroups"]
    [condition] = group["conditions"]
    assert condition["reason"] == "QueueDoesNotExist"
    assert condition["message"] == (
        'queue "team-x" does not exist; create it or set the kai.scheduler/queue label to one of: '
        "default-queue, team-a; to run it: set the kai.scheduler/queue label of lost to team-a"
    )


def test_parent_queue_is_not_a_leaf(tmp_path: pathlib.Path) -> None:
    doc = run(tmp_path, QUEUES + pod("top", "{kai.scheduler/queue: department-1}"))
    [condition] = doc["podGroups"][0]["conditions"]
    assert condition["reason"] == "QueueDoesNotExist"
    assert 'queue "department-1" is not a leaf queue' in condition["message"]
    assert "set the kai.scheduler/queue label to one of: team-a" in condition["message"]


def test_missing_label_is_explained_and_falls_back_to_default_queue(tmp_path: pathlib.Path) -> None:
    doc = run(tmp_path, QUEUES + pod("nolabel", "{}"))
    [p] = doc["pods"]
    assert p["queue"] == "default-queue"
    assert p["phase"] == "Running"
    reasons = {(e["reason"], e["object"]) for e in doc["events"]}
    assert ("QueueLabelMissing", "Pod/default/nolabel") in reasons


def test_legacy_runai_queue_label_is_honoured_with_a_warning(tmp_path: pathlib.Path) -> None:
    doc = run(tmp_path, QUEUES + pod("legacy", "{runai/queue: team-a}"))
    [p] = doc["pods"]
    assert p["queue"] == "team-a"
    assert p["phase"] == "Running"
    warnings = [e for e in doc["events"] if e["reason"] == "DeprecatedQueueLabel"]
    assert warnings and "kai.scheduler/queue=team-a" in warnings[0]["message"]
