"""A CronJob in `kai sim` runs on its schedule in virtual time, until --max-time."""

from __future__ import annotations

import json
import pathlib

from click.testing import CliRunner

from kai.cli.main import main

CRONJOB = """\
apiVersion: batch/v1
kind: CronJob
metadata:
  name: nightly-eval
  labels: {kai.scheduler/queue: default-queue}
spec:
  schedule: "*/1 * * * *"
  jobTemplate:
    spec:
      template:
        metadata:
          annotations: {sim.kai.scheduler/duration: 20s}
        spec:
          schedulerName: kai-scheduler
          restartPolicy: Never
          containers:
          - name: eval
            image: busybox
            resources: {limits: {nvidia.com/gpu: "1"}}
"""


def test_cronjob_fires_every_minute_until_max_time(tmp_path: pathlib.Path) -> None:
    manifest = tmp_path / "cron.yaml"
    manifest.write_text(CRONJOB)
    result = CliRunner().invoke(main, ["sim", "-f", str(manifest), "--until-idle", "--max-time", "3m30s", "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["clock"] == "2026-01-01T00:03:30Z"
    runs = [(e["time"], e["message"]) for e in doc["events"] if e["reason"] == "SuccessfulCreate"]
    assert runs == [
        ("2026-01-01T00:01:00Z", "Created job nightly-eval-29453761"),
        ("2026-01-01T00:02:00Z", "Created job nightly-eval-29453762"),
        ("2026-01-01T00:03:00Z", "Created job nightly-eval-29453763"),
    ]
    assert [p["phase"] for p in doc["pods"]] == ["Succeeded"] * 3
    assert "runs on its schedule until --max-time (3m30s)" in result.stderr
