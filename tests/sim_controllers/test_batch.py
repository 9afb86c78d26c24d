"""batch/v1 emulation: KAI's batch-job example, Job completion and backoff, CronJob."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import pytest

from kai.sim.controllers import names
from kai.sim.engine import Simulation

from .cluster import (
    events,
    finish,
    get,
    key,
    load,
    of_kind,
    owner_of,
    phases,
    pod,
    pod_names,
    pods,
    refusal,
    remove,
    run_until,
    settle,
    simulate,
    uid,
)

SUFFIX = f"[{names.ALPHABET}]{{5}}"


def job_docs(**spec_changes: object) -> list[dict[str, Any]]:
    docs = load("batch-job.yaml")
    docs[0]["spec"].update(spec_changes)
    return docs


def job_cluster(**spec_changes: object) -> Simulation:
    return simulate(job_docs(**spec_changes))


def job_status(sim: Simulation) -> dict[str, Any]:
    status = dict(get(sim, "Job", "batch-job")["status"])
    status.pop("sim.kai.scheduler/tracking")
    return status


def test_batch_job_example_runs_two_labelled_pods() -> None:
    sim = job_cluster()

    assert events(sim, "InvalidSpec") == []
    job_uid = uid(get(sim, "Job", "batch-job"))
    all_pods = pods(sim)
    assert len(all_pods) == 2
    for p in all_pods:
        assert re.fullmatch(f"batch-job-{SUFFIX}", p["metadata"]["name"])
        assert p["metadata"]["generateName"] == "batch-job-"
        assert p["metadata"]["labels"] == {
            "batch.kubernetes.io/controller-uid": job_uid,
            "batch.kubernetes.io/job-name": "batch-job",
            "controller-uid": job_uid,
            "job-name": "batch-job",
            "kai.scheduler/queue": "default-queue",
        }
        assert owner_of(p) == ("Job", "batch-job", True)
        assert p["metadata"]["ownerReferences"][0]["uid"] == job_uid
        assert p["spec"]["schedulerName"] == "kai-scheduler"
        assert p["spec"]["restartPolicy"] == "OnFailure"
        assert p["status"]["phase"] == "Running"
    # the Job's status is what it saw before the scheduler bound its pods in this cycle
    assert job_status(sim) == {"active": 2, "ready": 0, "succeeded": 0, "failed": 0, "terminating": 0}
    sim.step()
    assert job_status(sim) == {"active": 2, "ready": 2, "succeeded": 0, "failed": 0, "terminating": 0}


def test_succeeded_pods_are_not_recreated_and_the_job_completes() -> None:
    sim = job_cluster()
    first, second = pod_names(sim)

    finish(sim, first)
    sim.step()
    assert phases(sim) == {first: "Succeeded", second: "Running"}

    finish(sim, second)
    sim.step()
    status = job_status(sim)
    assert (status["succeeded"], status["active"]) == (2, 0)
    assert [c["type"] for c in status["conditions"]] == ["Complete"]
    assert phases(sim) == {first: "Succeeded", second: "Succeeded"}
    assert [e.object for e in events(sim, "Completed")] == [
        f"Pod/{key(sim, first)}",
        f"Pod/{key(sim, second)}",
        "Job/default/batch-job",
    ]


def test_evicted_pod_counts_as_a_failure_and_is_replaced() -> None:
    sim = job_cluster()
    before = pod_names(sim)
    victim = before[0]

    remove(sim, victim)
    sim.step()
    assert len(pods(sim)) == 2 and victim not in pod_names(sim)
    assert set(phases(sim).values()) == {"Running"}
    assert job_status(sim)["failed"] == 1


def test_terminating_pod_is_replaced_at_once_by_default_and_later_with_policy_failed() -> None:
    sim = job_cluster()
    sim.delete_pod(key(sim, pod_names(sim)[0]), reason="evicted")
    sim.step()
    assert len(pods(sim)) == 3

    sim = job_cluster(podReplacementPolicy="Failed")
    victim = pod_names(sim)[0]
    sim.delete_pod(key(sim, victim), reason="evicted")
    sim.step()
    assert len(pods(sim)) == 2
    assert "deletionTimestamp" in pod(sim, victim)["metadata"]
    settle(sim)
    assert len(pods(sim)) == 2 and victim not in pod_names(sim)


def test_failures_past_the_backoff_limit_fail_the_job() -> None:
    sim = job_cluster(backoffLimit=1)
    for _ in range(2):
        remove(sim, pod_names(sim)[0])
        sim.step()
    settle(sim)
    status = job_status(sim)
    assert status["failed"] == 2
    assert status["conditions"][0]["reason"] == "BackoffLimitExceeded"
    assert pods(sim) == []
    assert [e.object for e in events(sim, "BackoffLimitExceeded")] == ["Job/default/batch-job"]


def test_indexed_job_names_pods_by_index() -> None:
    sim = job_cluster(completionMode="Indexed", parallelism=2, completions=3)
    all_pods = pods(sim)
    assert len(all_pods) == 2
    by_index = {p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]: p for p in all_pods}
    assert sorted(by_index) == ["0", "1"]
    for index, p in by_index.items():
        assert re.fullmatch(f"batch-job-{index}-{SUFFIX}", p["metadata"]["name"])
        assert p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == index
        assert p["spec"]["hostname"] == f"batch-job-{index}"

    finish(sim, by_index["0"]["metadata"]["name"])
    sim.step()
    indexes = sorted(p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] for p in pods(sim))
    assert indexes == ["0", "1", "2"]
    assert job_status(sim)["completedIndexes"] == "0"


def test_job_without_completions_is_done_after_one_success() -> None:
    sim = job_cluster(completions=None, parallelism=2)
    first, second = pod_names(sim)
    finish(sim, first)
    sim.step()
    assert pod_names(sim) == [first, second]  # no new pod after a success
    assert "conditions" not in job_status(sim)
    finish(sim, second)
    sim.step()
    assert job_status(sim)["conditions"][0]["type"] == "Complete"


def test_suspended_job_has_no_pods() -> None:
    sim = job_cluster(suspend=True)
    settle(sim)
    assert pods(sim) == []


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"parallelism": -1}, "spec.parallelism"),
        ({"completions": "two"}, "spec.completions"),
        ({"completionMode": "Indexed", "completions": None}, "spec.completions"),
        ({"template": {"spec": {"containers": [{"name": "a"}]}}}, "spec.template.spec.restartPolicy"),
        ({"template": {"metadata": {}}}, "spec.template.spec"),
    ],
)
def test_invalid_job_names_the_field(change: dict[str, Any], field: str) -> None:
    (error,) = refusal(job_docs(**change))
    assert error.startswith(f"Job batch-job: {field}: "), error


def cronjob(**spec_changes: object) -> dict[str, Any]:
    job = load("batch-job.yaml")[0]
    spec: dict[str, Any] = {
        "schedule": "*/5 * * * *",
        "jobTemplate": {"metadata": {"labels": {"team": "a"}}, "spec": job["spec"]},
    }
    spec.update(spec_changes)
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly", "creationTimestamp": "2026-01-01T00:10:00Z"},
        "spec": spec,
    }


def at(clock: str) -> float:
    """2026-01-01 at `clock` (HH:MM) as epoch seconds, the store's virtual time."""
    return datetime.fromisoformat(f"2026-01-01T{clock}:00+00:00").timestamp()


def job_names(sim: Simulation) -> list[str]:
    return [j["metadata"]["name"] for j in of_kind(sim, "Job")]


def test_cronjob_runs_on_its_schedule() -> None:
    """*/5 created at 00:10: nothing at 00:10 (a run needs a time after creation), a Job at 00:15, the
    next at 00:20; the clock then waits for the next scheduled time."""
    sim = simulate([cronjob()])
    assert of_kind(sim, "Job") == []

    run_until(sim, at("00:15"))
    (job,) = of_kind(sim, "Job")
    assert job["metadata"]["name"] == "nightly-29453775"  # minutes since the epoch of 2026-01-01T00:15Z
    assert job["metadata"]["labels"] == {"team": "a"}
    assert job["metadata"]["annotations"] == {"batch.kubernetes.io/cronjob-scheduled-timestamp": "2026-01-01T00:15:00Z"}
    assert owner_of(job) == ("CronJob", "nightly", True)
    assert len(pods(sim)) == 2
    assert all(re.fullmatch(f"nightly-29453775-{SUFFIX}", name) for name in pod_names(sim))
    assert [e.reason for e in sim.totals.events if e.object.startswith("CronJob/")] == ["SuccessfulCreate"]

    run_until(sim, at("00:17"))
    assert len(of_kind(sim, "Job")) == 1  # nothing due until 00:20
    run_until(sim, at("00:20"))
    assert job_names(sim) == ["nightly-29453775", "nightly-29453780"]
    assert sim.next_timed_event() == at("00:25")


def test_cronjob_skips_missed_runs_and_keeps_its_history_limit() -> None:
    cron = cronjob(successfulJobsHistoryLimit=1)
    cron["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["annotations"] = {"sim.kai.scheduler/duration": "1m"}
    # the CronJob was created at 00:10; the simulation starts at 00:42
    sim = simulate([cron], start="2026-01-01T00:42:00Z")
    (job,) = of_kind(sim, "Job")
    assert job["metadata"]["name"] == "nightly-29453800"  # 00:15 .. 00:40 were due: only the most recent runs
    run_until(sim, at("00:45"))  # the 00:40 Job completed at 00:43
    run_until(sim, at("00:50"))  # so did the 00:45 one, at 00:46
    assert job_names(sim) == ["nightly-29453805", "nightly-29453810"]  # 00:40 deleted: one finished Job is kept
    assert [c["type"] for c in get(sim, "Job", "nightly-29453805")["status"]["conditions"]] == ["Complete"]


def test_cronjob_forbid_waits_for_the_active_job_and_replace_replaces_it() -> None:
    sim = simulate([cronjob(concurrencyPolicy="Forbid")])
    run_until(sim, at("00:20"))
    assert job_names(sim) == ["nightly-29453775"]
    assert events(sim, "JobAlreadyActive") != []

    sim = simulate([cronjob(concurrencyPolicy="Replace")])
    run_until(sim, at("00:20"))
    assert job_names(sim) == ["nightly-29453780"]
    jobs_of_pods = {(owner_of(p)[1], "deletionTimestamp" in p["metadata"]) for p in pods(sim)}
    assert jobs_of_pods == {("nightly-29453775", True), ("nightly-29453780", False)}  # the replaced Job's terminate


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"schedule": "every five minutes"}, "spec.schedule"),
        ({"schedule": "TZ=UTC */5 * * * *"}, "spec.schedule"),
        ({"schedule": "*/5 * * * * *"}, "spec.schedule"),
        ({"timeZone": "Mars/Olympus"}, "spec.timeZone"),
        ({"concurrencyPolicy": "Sometimes"}, "spec.concurrencyPolicy"),
    ],
)
def test_invalid_cronjob_names_the_field(change: dict[str, Any], field: str) -> None:
    (error,) = refusal([cronjob(**change)])
    assert error.startswith(f"CronJob nightly: {field}: "), error


def test_cronjob_macro_and_time_zone() -> None:
    sim = simulate([cronjob(schedule="@hourly", timeZone="Asia/Kolkata")])  # UTC+5:30: hours fall at :30 UTC
    run_until(sim, at("00:31"))
    (job,) = of_kind(sim, "Job")
    assert job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"] == "2026-01-01T00:30:00Z"


def test_suspended_or_scheduleless_cronjob() -> None:
    sim = simulate([cronjob(suspend=True)])
    run_until(sim, at("00:20"))
    assert of_kind(sim, "Job") == []

    broken = cronjob()
    del broken["spec"]["schedule"]
    (error,) = refusal([broken])
    assert error.startswith("CronJob nightly: spec.schedule: "), error
