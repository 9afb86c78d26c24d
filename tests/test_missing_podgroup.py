"""A pod that names a PodGroup which does not exist is told so, and runs once the PodGroup appears."""

from __future__ import annotations

import json

from click.testing import CliRunner

from kai.cli.main import main

POD = """apiVersion: v1
kind: Pod
metadata: {name: p1, annotations: {pod-group-name: pg-late}}
spec:
  schedulerName: kai-scheduler
  containers: [{name: main, image: busybox, resources: {limits: {nvidia.com/gpu: "1"}}}]
"""
PODGROUP = """---
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata: {name: pg-late, annotations: {sim.kai.scheduler/create-at: 10s}}
spec: {minMember: 1, queue: default-queue}
"""


def test_missing_podgroup_is_explained() -> None:
    result = CliRunner().invoke(main, ["sim", "-f", "-", "-o", "json"], input=POD)
    [pod] = json.loads(result.stdout)["pods"]
    assert (pod["phase"], pod["reason"]) == ("Pending", "PodGroupNotFound")
    assert 'PodGroup "pg-late"' in pod["message"]


def test_pod_runs_once_its_podgroup_is_created() -> None:
    result = CliRunner().invoke(main, ["sim", "-f", "-", "--until-idle", "-o", "json"], input=POD + PODGROUP)
    [pod] = json.loads(result.stdout)["pods"]
    assert pod["phase"] == "Running"
    assert pod["reason"] is None
