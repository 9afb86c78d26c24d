"""The virtual clock: pods with a duration complete and free their GPUs; --until-idle runs time forward."""

from __future__ import annotations

import json
import pathlib

from click.testing import CliRunner

from kai.cli.main import main

MANIFEST = """apiVersion: v1
kind: Node
metadata: {name: node-a}
status: {allocatable: {cpu: "8", memory: 64Gi, nvidia.com/gpu: "1", pods: "110"}}
"""
POD = """---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  annotations: {{sim.kai.scheduler/duration: 90s}}
spec:
  schedulerName: kai-scheduler
  containers: [{{name: main, image: busybox, resources: {{limits: {{nvidia.com/gpu: "1"}}}}}}]
"""


def test_until_idle_runs_pods_one_after_another(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(MANIFEST + POD.format(name="first") + POD.format(name="second"))
    result = CliRunner().invoke(main, ["sim", "-f", str(path), "--until-idle", "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [p["phase"] for p in doc["pods"]] == ["Succeeded", "Succeeded"]
    # one GPU: the second pod starts when the first finishes at 90s and finishes at 180s
    assert doc["clock"] >= "2026-01-01T00:03:00Z"
    assert doc["clock"] < "2026-01-01T00:04:00Z"


def test_one_cycle_runs_only_the_first(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(MANIFEST + POD.format(name="first") + POD.format(name="second"))
    result = CliRunner().invoke(main, ["sim", "-f", str(path), "-o", "json"])
    doc = json.loads(result.stdout)
    phases = {p["name"]: p["phase"] for p in doc["pods"]}
    assert phases == {"first": "Running", "second": "Pending"}
    assert doc["clock"] == "2026-01-01T00:00:01Z"
