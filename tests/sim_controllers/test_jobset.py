"""JobSet emulation: KAI's docs/batch JobSet example, InOrder startup, success and restarts."""

from __future__ import annotations

import re

from kai.sim.controllers import names

from .ministore import MiniStore, load, owner_of

SUFFIX = f"[{names.ALPHABET}]{{5}}"


def jobset_docs(**spec_changes: object) -> list[dict]:
    docs = [d for d in load("kai-batch-examples.yaml") if d["kind"] == "JobSet"]
    docs[0]["spec"].update(spec_changes)
    return docs


def jobset_store(**spec_changes: object) -> MiniStore:
    store = MiniStore()
    store.apply(jobset_docs(**spec_changes))
    store.settle()
    return store


def test_jobset_example_creates_jobs_and_indexed_pods() -> None:
    store = jobset_store()

    assert store.errors == []
    assert [j["metadata"]["name"] for j in store.of_kind("Job")] == [
        "jobset-example-coordinator-0",
        "jobset-example-worker-0",
        "jobset-example-worker-1",
    ]
    worker_1 = store.get("Job", "jobset-example-worker-1")
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

    pods = store.pods()
    assert len(pods) == 5
    pod_names = store.pod_names()
    assert re.fullmatch(f"jobset-example-coordinator-0-0-{SUFFIX}", pod_names[0])
    assert all(re.fullmatch(f"jobset-example-worker-[01]-[01]-{SUFFIX}", n) for n in pod_names[1:])
    pod = next(p for p in pods if p["metadata"]["name"].startswith("jobset-example-worker-1-1-"))
    labels = pod["metadata"]["labels"]
    assert labels["jobset.sigs.k8s.io/jobset-name"] == "jobset-example"
    assert labels["jobset.sigs.k8s.io/job-index"] == "1"
    assert labels["batch.kubernetes.io/job-completion-index"] == "1"
    assert labels["job-name"] == "jobset-example-worker-1"
    assert pod["metadata"]["annotations"]["jobset.sigs.k8s.io/replicatedjob-name"] == "worker"
    assert pod["spec"]["subdomain"] == "jobset-example"
    assert pod["spec"]["schedulerName"] == "kai-scheduler"
    assert owner_of(pod) == ("Job", "jobset-example-worker-1", True)


def test_in_order_startup_waits_for_the_previous_replicated_job() -> None:
    store = jobset_store(startupPolicy={"startupPolicyOrder": "InOrder"})
    assert [j["metadata"]["name"] for j in store.of_kind("Job")] == ["jobset-example-coordinator-0"]

    store.run_all()
    assert len(store.of_kind("Job")) == 3


def test_all_jobs_succeeding_completes_the_jobset() -> None:
    store = jobset_store()
    store.run_all()
    for name in store.pod_names():
        store.set_phase(name, "Succeeded")
    store.settle()
    jobset = store.get("JobSet", "jobset-example")
    assert [c["type"] for c in jobset["status"]["conditions"]] == ["Completed"]
    assert {s["name"]: s["succeeded"] for s in jobset["status"]["replicatedJobsStatus"]} == {
        "coordinator": 1,
        "worker": 2,
    }


def test_failed_job_restarts_the_jobset_with_the_next_attempt() -> None:
    store = jobset_store()
    store.run_all()
    # backoffLimit is 0: one lost pod fails its Job, which restarts the JobSet.
    victim = next(n for n in store.pod_names() if n.startswith("jobset-example-worker-0-"))
    store.remove_pod(victim)
    store.settle()

    jobset = store.get("JobSet", "jobset-example")
    assert jobset["status"]["restarts"] == 1
    jobs = store.of_kind("Job")
    assert len(jobs) == 3
    assert {j["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] for j in jobs} == {"1"}
    assert len(store.pods()) == 5


def test_failure_past_max_restarts_fails_the_jobset() -> None:
    store = jobset_store(failurePolicy={"maxRestarts": 0})
    store.run_all()
    store.remove_pod(store.pod_names()[0])
    store.settle()
    jobset = store.get("JobSet", "jobset-example")
    assert jobset["status"]["conditions"][-1]["type"] == "Failed"


def test_suspended_jobset_creates_suspended_jobs() -> None:
    store = jobset_store(suspend=True)
    assert all(j["spec"]["suspend"] is True for j in store.of_kind("Job"))
    assert store.pods() == []


def test_jobset_errors_name_the_field() -> None:
    store = jobset_store(replicatedJobs=[])
    assert [e.field for e in store.errors] == ["spec.replicatedJobs"]
    store = jobset_store(successPolicy={"operator": "All", "targetReplicatedJobs": ["nope"]})
    assert [e.field for e in store.errors] == ["spec.successPolicy.targetReplicatedJobs[0]"]
