"""batch/v1 emulation: KAI's batch-job example, Job completion and backoff, CronJob."""

from __future__ import annotations

import re
from datetime import datetime

import pytest

from kai.sim import controllers
from kai.sim.controllers import names

from .ministore import MiniStore, load, owner_of

SUFFIX = f"[{names.ALPHABET}]{{5}}"


def job_store(**spec_changes: object) -> MiniStore:
    docs = load("batch-job.yaml")
    docs[0]["spec"].update(spec_changes)
    store = MiniStore()
    store.apply(docs)
    store.settle()
    return store


def job_status(store: MiniStore) -> dict:
    status = dict(store.get("Job", "batch-job")["status"])
    status.pop("sim.kai.scheduler/tracking")
    return status


def test_batch_job_example_runs_two_labelled_pods() -> None:
    store = job_store()

    assert store.errors == []
    pods = store.pods()
    assert len(pods) == 2
    for pod in pods:
        assert re.fullmatch(f"batch-job-{SUFFIX}", pod["metadata"]["name"])
        assert pod["metadata"]["generateName"] == "batch-job-"
        assert pod["metadata"]["labels"] == {
            "batch.kubernetes.io/controller-uid": "uid-job-batch-job",
            "batch.kubernetes.io/job-name": "batch-job",
            "controller-uid": "uid-job-batch-job",
            "job-name": "batch-job",
            "kai.scheduler/queue": "default-queue",
        }
        assert owner_of(pod) == ("Job", "batch-job", True)
        assert pod["spec"]["schedulerName"] == "kai-scheduler"
        assert pod["spec"]["restartPolicy"] == "OnFailure"
    assert job_status(store) == {"active": 2, "ready": 0, "succeeded": 0, "failed": 0, "terminating": 0}


def test_succeeded_pods_are_not_recreated_and_the_job_completes() -> None:
    store = job_store()
    store.run_all()
    first, second = store.pod_names()

    store.set_phase(first, "Succeeded")
    store.settle()
    assert store.pod_names() == [first, second]

    store.set_phase(second, "Succeeded")
    store.settle()
    status = job_status(store)
    assert (status["succeeded"], status["active"]) == (2, 0)
    assert [c["type"] for c in status["conditions"]] == ["Complete"]
    assert len(store.pods()) == 2


def test_evicted_pod_counts_as_a_failure_and_is_replaced() -> None:
    store = job_store()
    store.run_all()
    victim = store.pod_names()[0]

    store.remove_pod(victim)
    store.settle()
    assert len(store.pods()) == 2 and victim not in store.pod_names()
    assert job_status(store)["failed"] == 1


def test_terminating_pod_is_replaced_at_once_by_default_and_later_with_policy_failed() -> None:
    store = job_store()
    store.terminate_pod(store.pod_names()[0])
    store.settle()
    assert len(store.pods()) == 3

    store = job_store(podReplacementPolicy="Failed")
    store.terminate_pod(store.pod_names()[0])
    store.settle()
    assert len(store.pods()) == 2


def test_failures_past_the_backoff_limit_fail_the_job() -> None:
    store = job_store(backoffLimit=1)
    for _ in range(2):
        store.run_all()
        store.remove_pod(store.pod_names()[0])
        store.settle()
    status = job_status(store)
    assert status["failed"] == 2
    assert status["conditions"][0]["reason"] == "BackoffLimitExceeded"
    assert store.pods() == []
    assert any(e.reason == "BackoffLimitExceeded" for e in store.events)


def test_indexed_job_names_pods_by_index() -> None:
    store = job_store(completionMode="Indexed", parallelism=2, completions=3)
    pods = store.pods()
    assert len(pods) == 2
    by_index = {p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]: p for p in pods}
    assert sorted(by_index) == ["0", "1"]
    for index, pod in by_index.items():
        assert re.fullmatch(f"batch-job-{index}-{SUFFIX}", pod["metadata"]["name"])
        assert pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == index
        assert pod["spec"]["hostname"] == f"batch-job-{index}"

    store.set_phase(by_index["0"]["metadata"]["name"], "Succeeded")
    store.settle()
    indexes = sorted(p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] for p in store.pods())
    assert indexes == ["0", "1", "2"]
    assert job_status(store)["completedIndexes"] == "0"


def test_job_without_completions_is_done_after_one_success() -> None:
    store = job_store(completions=None, parallelism=2)
    store.run_all()
    first, second = store.pod_names()
    store.set_phase(first, "Succeeded")
    store.settle()
    assert len(store.pods()) == 2  # no new pod after a success
    store.set_phase(second, "Succeeded")
    store.settle()
    assert job_status(store)["conditions"][0]["type"] == "Complete"


def test_suspended_job_has_no_pods() -> None:
    assert job_store(suspend=True).pods() == []


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
def test_invalid_job_names_the_field(change: dict, field: str) -> None:
    store = job_store(**change)
    assert store.pods() == []
    assert [e.field for e in store.errors] == [field]


def cronjob(**spec_changes: object) -> dict:
    job = load("batch-job.yaml")[0]
    spec: dict = {
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


def finish(store: MiniStore, job: dict) -> None:
    job["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}


def test_cronjob_runs_on_its_schedule() -> None:
    """*/5 created at 00:10: nothing at 00:10 (a run needs a time after creation), a Job at 00:15, the
    next at 00:20; the answer asks to be reconciled at the next scheduled time."""
    store = MiniStore()
    store.apply([cronjob()])
    store.settle(now=at("00:10"))
    assert store.of_kind("Job") == []

    store.settle(now=at("00:15"))
    (job,) = store.of_kind("Job")
    assert job["metadata"]["name"] == "nightly-29453775"  # minutes since the epoch of 2026-01-01T00:15Z
    assert job["metadata"]["labels"] == {"team": "a"}
    assert job["metadata"]["annotations"] == {"batch.kubernetes.io/cronjob-scheduled-timestamp": "2026-01-01T00:15:00Z"}
    assert owner_of(job) == ("CronJob", "nightly", True)
    assert len(store.pods()) == 2
    assert all(re.fullmatch(f"nightly-29453775-{SUFFIX}", name) for name in store.pod_names())
    assert [e.reason for e in store.events if e.kind == "CronJob"] == ["SuccessfulCreate"]

    store.settle(now=at("00:17"))
    assert len(store.of_kind("Job")) == 1  # nothing due until 00:20
    store.settle(now=at("00:20"))
    assert [j["metadata"]["name"] for j in store.of_kind("Job")] == ["nightly-29453775", "nightly-29453780"]

    (cron,) = store.of_kind("CronJob")
    result = controllers.controller_for(cron).reconcile(
        owner=cron, children=store.children(cron), names=store.names, now=at("00:20")
    )
    assert result.requeue_at == at("00:25")


def test_cronjob_skips_missed_runs_and_keeps_its_history_limit() -> None:
    store = MiniStore()
    store.apply([cronjob(successfulJobsHistoryLimit=1)])
    store.settle(now=at("00:42"))  # 00:15 .. 00:40 were due: only the most recent one runs
    (job,) = store.of_kind("Job")
    assert job["metadata"]["name"] == "nightly-29453800"  # 00:40
    finish(store, job)
    store.settle(now=at("00:45"))
    finish(store, store.of_kind("Job")[-1])
    store.settle(now=at("00:50"))
    names = [j["metadata"]["name"] for j in store.of_kind("Job")]
    assert names == ["nightly-29453805", "nightly-29453810"]  # 00:40 deleted: one finished Job is kept


def test_cronjob_forbid_waits_for_the_active_job_and_replace_replaces_it() -> None:
    store = MiniStore()
    store.apply([cronjob(concurrencyPolicy="Forbid")])
    store.settle(now=at("00:15"))
    store.settle(now=at("00:20"))
    assert [j["metadata"]["name"] for j in store.of_kind("Job")] == ["nightly-29453775"]
    assert "JobAlreadyActive" in [e.reason for e in store.events]

    store = MiniStore()
    store.apply([cronjob(concurrencyPolicy="Replace")])
    store.settle(now=at("00:15"))
    store.settle(now=at("00:20"))
    assert [j["metadata"]["name"] for j in store.of_kind("Job")] == ["nightly-29453780"]


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
def test_invalid_cronjob_names_the_field(change: dict, field: str) -> None:
    store = MiniStore()
    store.apply([cronjob(**change)])
    store.settle(now=at("00:15"))
    assert store.of_kind("Job") == []
    assert [e.field for e in store.errors] == [field]


def test_cronjob_macro_and_time_zone() -> None:
    store = MiniStore()
    store.apply([cronjob(schedule="@hourly", timeZone="Asia/Kolkata")])  # UTC+5:30: hours fall at :30 UTC
    store.settle(now=at("00:31"))
    (job,) = store.of_kind("Job")
    assert job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"] == "2026-01-01T00:30:00Z"


def test_suspended_or_scheduleless_cronjob() -> None:
    store = MiniStore()
    store.apply([cronjob(suspend=True)])
    store.settle()
    assert store.of_kind("Job") == []

    broken = cronjob()
    del broken["spec"]["schedule"]
    store = MiniStore()
    store.apply([broken])
    store.settle()
    assert [e.field for e in store.errors] == ["spec.schedule"]
