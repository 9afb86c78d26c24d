"""JobSet emulation: KAI's docs/batch JobSet example, InOrder startup, success and restarts."""

from __future__ import annotations

import re
from typing import Any

from kai.sim.controllers import names
from kai.sim.engine import Simulation

from .cluster import events, get, load, of_kind, owner_of, phases, pod_names, pods, refusal, remove, settle, simulate

SUFFIX = f"[{names.ALPHABET}]{{5}}"


def jobset_docs(**spec_changes: object) -> list[dict[str, Any]]:
    docs = [d for d in load("kai-batch-examples.yaml") if d["kind"] == "JobSet"]
    docs[0]["spec"].update(spec_changes)
    return docs


def jobset_cluster(**spec_changes: object) -> Simulation:
    return simulate(jobset_docs(**spec_changes))


def test_jobset_example_creates_jobs_and_indexed_pods() -> None:
    sim = jobset_cluster()

    assert events(sim, "InvalidSpec") == []
    assert [j["metadata"]["name"] for j in of_kind(sim, "Job")] == [
        "jobset-example-coordinator-0",
        "jobset-example-worker-0",
        "jobset-example-worker-1",
    ]
    worker_1 = get(sim, "Job", "jobset-example-worker-1")
    assert owner_of(worker_1) == ("JobSet", "jobset-example", True)
    assert worker_1["spec"]["completionMode"] == "Indexed"
    assert worker_1["metadata"]["labels"] == {
        "jobset.sigs.k8s.io/global-replicas": "3",
        "jobset.sigs.k8s.io/job-global-index": "2",
        "jobset.sigs.k8s.io/job-index": "1",
        "jobset.sigs.k8s.io/job-key": names.sha1_hex("default/jobset-example-worker-1"),
        "jobset.sigs.k8s.io/jobset-name": "jobset-example",
        "jobset.sigs.k8s.io/replicatedjob-name": "worker",
        "jobset.sigs.k8s.io/replicatedjob-replicas": "2",
        "jobset.sigs.k8s.io/restart-attempt": "0",
    }

    all_pods = pods(sim)
    assert len(all_pods) == 5
    names_ = pod_names(sim)
    assert re.fullmatch(f"jobset-example-coordinator-0-0-{SUFFIX}", names_[0])
    assert all(re.fullmatch(f"jobset-example-worker-[01]-[01]-{SUFFIX}", n) for n in names_[1:])
    pod = next(p for p in all_pods if p["metadata"]["name"].startswith("jobset-example-worker-1-1-"))
    labels = pod["metadata"]["labels"]
    assert labels["jobset.sigs.k8s.io/jobset-name"] == "jobset-example"
    assert labels["jobset.sigs.k8s.io/job-index"] == "1"
    assert labels["batch.kubernetes.io/job-completion-index"] == "1"
    assert labels["job-name"] == "jobset-example-worker-1"
    assert pod["metadata"]["annotations"]["jobset.sigs.k8s.io/replicatedjob-name"] == "worker"
    assert pod["spec"]["subdomain"] == "jobset-example"
    assert pod["spec"]["schedulerName"] == "kai-scheduler"
    assert owner_of(pod) == ("Job", "jobset-example-worker-1", True)
    assert set(phases(sim).values()) == {"Running"}


def test_in_order_startup_waits_for_the_previous_replicated_job() -> None:
    sim = jobset_cluster(startupPolicy={"startupPolicyOrder": "InOrder"})
    assert [j["metadata"]["name"] for j in of_kind(sim, "Job")] == ["jobset-example-coordinator-0"]
    assert len(pods(sim)) == 1

    settle(sim)
    assert len(of_kind(sim, "Job")) == 3
    assert len(pods(sim)) == 5


def test_all_jobs_succeeding_completes_the_jobset() -> None:
    docs = jobset_docs()
    # the example's containers sleep 10s (coordinator) and 15s (workers)
    for replicated, duration in zip(docs[0]["spec"]["replicatedJobs"], ("10s", "15s"), strict=True):
        replicated["template"]["spec"]["template"]["metadata"] = {
            "annotations": {"sim.kai.scheduler/duration": duration}
        }
    sim = simulate(docs)
    settle(sim)

    assert set(phases(sim).values()) == {"Succeeded"}
    jobset = get(sim, "JobSet", "jobset-example")
    assert [c["type"] for c in jobset["status"]["conditions"]] == ["Completed"]
    assert {s["name"]: s["succeeded"] for s in jobset["status"]["replicatedJobsStatus"]} == {
        "coordinator": 1,
        "worker": 2,
    }
    assert [e.object for e in events(sim, "AllJobsCompleted")] == ["JobSet/default/jobset-example"]


def test_failed_job_restarts_the_jobset_with_the_next_attempt() -> None:
    sim = jobset_cluster()
    before = set(pod_names(sim))
    # backoffLimit is 0: one lost pod fails its Job, which restarts the JobSet.
    victim = next(n for n in before if n.startswith("jobset-example-worker-0-"))
    remove(sim, victim)
    settle(sim)

    jobset = get(sim, "JobSet", "jobset-example")
    assert jobset["status"]["restarts"] == 1
    jobs = of_kind(sim, "Job")
    assert len(jobs) == 3
    assert {j["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] for j in jobs} == {"1"}
    assert len(pods(sim)) == 5
    assert before.isdisjoint(pod_names(sim))  # every pod of the first attempt is gone
    assert set(phases(sim).values()) == {"Running"}


def test_failure_past_max_restarts_fails_the_jobset() -> None:
    sim = jobset_cluster(failurePolicy={"maxRestarts": 0})
    remove(sim, pod_names(sim)[0])
    settle(sim)
    jobset = get(sim, "JobSet", "jobset-example")
    assert [(c["type"], c["reason"]) for c in jobset["status"]["conditions"]] == [("Failed", "FailedJobs")]
    assert jobset["status"]["restarts"] == 0
    assert pods(sim) == []  # the failed JobSet's Jobs stop their pods


def test_suspended_jobset_creates_suspended_jobs() -> None:
    sim = jobset_cluster(suspend=True)
    settle(sim)
    jobs = of_kind(sim, "Job")
    assert len(jobs) == 3
    assert all(j["spec"]["suspend"] is True for j in jobs)
    assert pods(sim) == []


def test_jobset_errors_name_the_field() -> None:
    (error,) = refusal(jobset_docs(replicatedJobs=[]))
    assert error.startswith("JobSet jobset-example: spec.replicatedJobs: "), error
    (error,) = refusal(jobset_docs(successPolicy={"operator": "All", "targetReplicatedJobs": ["nope"]}))
    assert error.startswith("JobSet jobset-example: spec.successPolicy.targetReplicatedJobs[0]: "), error
