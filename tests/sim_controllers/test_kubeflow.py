"""Kubeflow emulation: KAI's PyTorchJob example, the docs/batch examples, MPIJob v1, Notebook."""

from __future__ import annotations

import copy
import re
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
    queue,
    refusal,
    remove,
    settle,
    simulate,
    uid,
)

SUFFIX = f"[{names.ALPHABET}]{{5}}"
JOB = "pytorch-dist-mnist-nccl"
MASTER, WORKER_0, WORKER_1 = f"{JOB}-master-0", f"{JOB}-worker-0", f"{JOB}-worker-1"


def pytorch_docs(**spec_changes: object) -> list[dict[str, Any]]:
    docs = load("pytorch-job.yaml")
    docs[0]["spec"].update(spec_changes)
    return docs


def pytorch_cluster(**spec_changes: object) -> Simulation:
    return simulate(pytorch_docs(**spec_changes))


def conditions(sim: Simulation, kind: str, name: str) -> list[str]:
    return [c["type"] for c in get(sim, kind, name)["status"]["conditions"]]


def test_pytorch_dist_mnist_nccl_gets_master_and_two_workers() -> None:
    sim = pytorch_cluster()

    assert events(sim, "InvalidSpec") == []
    assert pod_names(sim) == [MASTER, WORKER_0, WORKER_1]
    master = pod(sim, MASTER)
    assert master["metadata"]["labels"] == {
        "kai.scheduler/subgroup-name": "master",  # written by the pod grouper, not the training operator
        "training.kubeflow.org/job-name": JOB,
        "training.kubeflow.org/job-role": "master",
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/replica-index": "0",
        "training.kubeflow.org/replica-type": "master",
    }
    worker = pod(sim, WORKER_1)
    assert worker["metadata"]["labels"]["training.kubeflow.org/replica-type"] == "worker"
    assert worker["metadata"]["labels"]["training.kubeflow.org/replica-index"] == "1"
    assert "training.kubeflow.org/job-role" not in worker["metadata"]["labels"]
    assert worker["metadata"]["labels"]["kai.scheduler/subgroup-name"] == "worker"
    job_uid = uid(get(sim, "PyTorchJob", JOB))
    for p in pods(sim):
        assert owner_of(p) == ("PyTorchJob", JOB, True)
        assert p["metadata"]["ownerReferences"][0]["uid"] == job_uid
        assert p["spec"]["schedulerName"] == "kai-scheduler"
        assert p["spec"]["restartPolicy"] == "OnFailure"
        assert p["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "1"}}
        # The training operator does not copy the job's labels: KAI reads the queue on the top owner.
        assert "kai.scheduler/queue" not in p["metadata"]["labels"]
        assert p["status"]["phase"] == "Running"


def test_evicted_worker_is_recreated_with_the_same_name() -> None:
    sim = pytorch_cluster()
    old_uid = uid(pod(sim, WORKER_1))

    sim.delete_pod(key(sim, WORKER_1), reason="evicted")
    sim.step()
    assert pod_names(sim) == [MASTER, WORKER_0, WORKER_1]  # the name is still taken while the pod terminates
    assert uid(pod(sim, WORKER_1)) == old_uid

    remove(sim, WORKER_1)
    recreated = pod(sim, WORKER_1)
    assert uid(recreated) != old_uid
    assert recreated["status"]["phase"] == "Running"  # recreated Pending, then placed in the same cycle


def test_master_success_completes_the_job_and_nothing_is_recreated() -> None:
    sim = pytorch_cluster()
    sim.step()
    finish(sim, MASTER)
    sim.step()
    assert conditions(sim, "PyTorchJob", JOB) == ["Created", "Succeeded"]
    # cleanPodPolicy defaults to None: the workers are left alone.
    assert phases(sim) == {MASTER: "Succeeded", WORKER_0: "Running", WORKER_1: "Running"}

    remove(sim, WORKER_0)
    settle(sim)
    assert pod_names(sim) == [MASTER, WORKER_1]


def test_clean_pod_policy_running_deletes_running_workers_after_success() -> None:
    sim = pytorch_cluster(runPolicy={"cleanPodPolicy": "Running"})
    finish(sim, MASTER)
    sim.step()
    assert all("deletionTimestamp" in pod(sim, name)["metadata"] for name in (WORKER_0, WORKER_1))
    settle(sim)
    assert pod_names(sim) == [MASTER]


def test_failed_pod_restarts_under_on_failure_until_the_backoff_limit() -> None:
    sim = pytorch_cluster(runPolicy={"backoffLimit": 1})
    first = uid(pod(sim, WORKER_0))
    finish(sim, WORKER_0, failed=True)
    sim.step()
    assert uid(pod(sim, WORKER_0)) != first
    assert pod(sim, WORKER_0)["status"]["phase"] == "Running"

    finish(sim, WORKER_0, failed=True)
    settle(sim)
    assert conditions(sim, "PyTorchJob", JOB)[-1] == "Failed"
    assert pods(sim) == []


def test_failed_pod_with_never_fails_the_job() -> None:
    docs = load("pytorch-job.yaml")
    docs[0]["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = "Never"
    sim = simulate(docs)
    finish(sim, WORKER_1, failed=True)
    sim.step()
    assert conditions(sim, "PyTorchJob", JOB)[-1] == "Failed"
    assert [(e.type, e.object) for e in events(sim, "PyTorchJobFailed")] == [("Warning", f"PyTorchJob/default/{JOB}")]


def test_elastic_pytorchjob_starts_with_replicas_workers() -> None:
    docs = load("pytorch-job.yaml")
    spec = docs[0]["spec"]
    del spec["pytorchReplicaSpecs"]["Master"]
    spec["pytorchReplicaSpecs"]["Worker"]["replicas"] = 3
    spec["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 5}
    sim = simulate(docs)
    assert pod_names(sim) == [f"{JOB}-worker-{i}" for i in range(3)]


def test_suspended_training_job_has_no_pods() -> None:
    sim = pytorch_cluster(runPolicy={"suspend": True})
    settle(sim)
    assert pods(sim) == []


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (
            "TFJob",
            {
                "tf-dist-mnist-chief-0": ("chief", "tfjob-controller", True),
                "tf-dist-mnist-worker-0": ("worker", "tfjob-controller", False),
                "tf-dist-mnist-worker-1": ("worker", "tfjob-controller", False),
            },
        ),
        (
            "XGBoostJob",
            {
                "xgboost-dist-iris-master-0": ("master", "xgboostjob-controller", True),
                "xgboost-dist-iris-worker-0": ("worker", "xgboostjob-controller", False),
                "xgboost-dist-iris-worker-1": ("worker", "xgboostjob-controller", False),
            },
        ),
        (
            "JAXJob",
            {
                "jax-dist-mnist-worker-0": ("worker", "jaxjob-controller", True),
                "jax-dist-mnist-worker-1": ("worker", "jaxjob-controller", False),
                "jax-dist-mnist-worker-2": ("worker", "jaxjob-controller", False),
                "jax-dist-mnist-worker-3": ("worker", "jaxjob-controller", False),
            },
        ),
    ],
)
def test_kai_docs_training_examples(kind: str, expected: dict[str, tuple[str, str, bool]]) -> None:
    sim = simulate([d for d in load("kai-batch-examples.yaml") if d["kind"] == kind])

    got = {
        p["metadata"]["name"]: (
            p["metadata"]["labels"]["training.kubeflow.org/replica-type"],
            p["metadata"]["labels"]["training.kubeflow.org/operator-name"],
            p["metadata"]["labels"].get("training.kubeflow.org/job-role") == "master",
        )
        for p in pods(sim)
    }
    assert got == expected
    assert {owner_of(p)[0] for p in pods(sim)} == {kind}


def test_tfjob_without_chief_makes_worker_zero_the_master() -> None:
    docs = [d for d in load("kai-batch-examples.yaml") if d["kind"] == "TFJob"]
    del docs[0]["spec"]["tfReplicaSpecs"]["Chief"]
    sim = simulate(docs)
    roles = {p["metadata"]["name"]: p["metadata"]["labels"].get("training.kubeflow.org/job-role") for p in pods(sim)}
    assert roles == {"tf-dist-mnist-worker-0": "master", "tf-dist-mnist-worker-1": None}


def test_mpijob_v2beta1_creates_workers_and_a_launcher_job() -> None:
    sim = simulate([d for d in load("kai-batch-examples.yaml") if d["kind"] == "MPIJob"])

    (launcher_job,) = of_kind(sim, "Job")
    assert launcher_job["metadata"]["name"] == "mpi-hello-world-launcher"
    assert launcher_job["metadata"]["labels"] == {"app": "mpi-hello-world"}
    assert owner_of(launcher_job) == ("MPIJob", "mpi-hello-world", True)
    names_ = pod_names(sim)
    assert names_[1:] == ["mpi-hello-world-worker-0", "mpi-hello-world-worker-1"]
    assert re.fullmatch(f"mpi-hello-world-launcher-{SUFFIX}", names_[0])
    launcher = pod(sim, names_[0])
    assert launcher["metadata"]["labels"]["training.kubeflow.org/job-role"] == "launcher"
    assert launcher["metadata"]["labels"]["training.kubeflow.org/operator-name"] == "mpi-operator"
    assert owner_of(launcher) == ("Job", "mpi-hello-world-launcher", True)
    worker = pod(sim, "mpi-hello-world-worker-1")
    assert worker["metadata"]["labels"]["training.kubeflow.org/job-role"] == "worker"
    assert worker["metadata"]["labels"]["training.kubeflow.org/replica-index"] == "1"
    assert (worker["spec"]["hostname"], worker["spec"]["subdomain"]) == ("mpi-hello-world-worker-1", "mpi-hello-world")

    sim.step()
    finish(sim, names_[0])
    settle(sim)
    assert conditions(sim, "MPIJob", "mpi-hello-world")[-1] == "Succeeded"


def test_mpijob_wait_for_workers_ready_delays_the_launcher() -> None:
    docs = [d for d in load("kai-batch-examples.yaml") if d["kind"] == "MPIJob"]
    docs[0]["spec"]["launcherCreationPolicy"] = "WaitForWorkersReady"
    sim = simulate(docs)
    assert of_kind(sim, "Job") == []
    assert phases(sim) == {"mpi-hello-world-worker-0": "Running", "mpi-hello-world-worker-1": "Running"}

    sim.step()  # the workers run: now the launcher Job is created
    assert [j["metadata"]["name"] for j in of_kind(sim, "Job")] == ["mpi-hello-world-launcher"]


def test_mpijob_v1_uses_the_training_operator_layout() -> None:
    docs = [d for d in load("kai-batch-examples.yaml") if d["kind"] == "MPIJob"]
    docs[0]["apiVersion"] = "kubeflow.org/v1"
    sim = simulate(docs)

    assert pod_names(sim) == ["mpi-hello-world-launcher", "mpi-hello-world-worker-0", "mpi-hello-world-worker-1"]
    launcher = pod(sim, "mpi-hello-world-launcher")
    assert launcher["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"
    assert launcher["metadata"]["labels"]["training.kubeflow.org/operator-name"] == "mpijob-controller"
    assert of_kind(sim, "Job") == []


def test_notebook_runs_one_statefulset_pod() -> None:
    notebook: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Notebook",
        "metadata": {"name": "nb", "namespace": "team", "labels": {"kai.scheduler/queue": "team-a"}},
        "spec": {
            "template": {"spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "nb", "image": "jupyter"}]}}
        },
    }
    sim = simulate([queue("team-a"), notebook])

    (sts,) = of_kind(sim, "StatefulSet")
    assert owner_of(sts) == ("Notebook", "nb", True)
    (nb,) = pods(sim)
    assert nb["metadata"]["name"] == "nb-0"
    assert nb["metadata"]["namespace"] == "team"
    assert owner_of(nb) == ("StatefulSet", "nb", True)
    labels = nb["metadata"]["labels"]
    assert (labels["statefulset"], labels["notebook-name"], labels["kai.scheduler/queue"]) == ("nb", "nb", "team-a")
    assert nb["status"]["phase"] == "Running"

    stopped = copy.deepcopy(notebook)
    stopped["metadata"]["annotations"] = {"kubeflow-resource-stopped": "2026-01-01T00:00:00Z"}
    sim = simulate([queue("team-a"), stopped])
    settle(sim)
    assert pods(sim) == []


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda s: s["pytorchReplicaSpecs"]["Worker"].pop("template"), "spec.pytorchReplicaSpecs.Worker.template"),
        (lambda s: s["pytorchReplicaSpecs"]["Worker"].update(replicas=-2), "spec.pytorchReplicaSpecs.Worker.replicas"),
        (
            lambda s: s["pytorchReplicaSpecs"].update(Chief=s["pytorchReplicaSpecs"]["Worker"]),
            "spec.pytorchReplicaSpecs.Chief",
        ),
        (
            lambda s: s["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0].update(name="main"),
            "spec.pytorchReplicaSpecs.Master.template.spec.containers",
        ),
        (lambda s: s.pop("pytorchReplicaSpecs"), "spec.pytorchReplicaSpecs"),
    ],
)
def test_invalid_pytorchjob_names_the_field(change, field: str) -> None:  # type: ignore[no-untyped-def]
    docs = load("pytorch-job.yaml")
    change(docs[0]["spec"])
    (error,) = refusal(docs)
    assert error.startswith(f"PyTorchJob {JOB}: {field}: "), error


def test_replica_type_keys_are_case_insensitive() -> None:
    docs = load("pytorch-job.yaml")
    specs = docs[0]["spec"]["pytorchReplicaSpecs"]
    specs["master"] = specs.pop("Master")
    sim = simulate(docs)
    assert MASTER in pod_names(sim)
