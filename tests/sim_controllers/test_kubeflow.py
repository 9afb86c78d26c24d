"""Kubeflow emulation: KAI's PyTorchJob example, the docs/batch examples, MPIJob v1, Notebook."""

from __future__ import annotations

import copy
import re

import pytest

from kai.sim.controllers import names

from .ministore import MiniStore, load, owner_of

SUFFIX = f"[{names.ALPHABET}]{{5}}"


def pytorch_store(**spec_changes: object) -> MiniStore:
    docs = load("pytorch-job.yaml")
    docs[0]["spec"].update(spec_changes)
    store = MiniStore()
    store.apply(docs)
    store.settle()
    return store


def test_pytorch_dist_mnist_nccl_gets_master_and_two_workers() -> None:
    store = pytorch_store()

    assert store.errors == []
    assert store.pod_names() == [
        "pytorch-dist-mnist-nccl-master-0",
        "pytorch-dist-mnist-nccl-worker-0",
        "pytorch-dist-mnist-nccl-worker-1",
    ]
    master = store.get("Pod", "pytorch-dist-mnist-nccl-master-0")
    assert master["metadata"]["labels"] == {
        "training.kubeflow.org/job-name": "pytorch-dist-mnist-nccl",
        "training.kubeflow.org/job-role": "master",
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/replica-index": "0",
        "training.kubeflow.org/replica-type": "master",
    }
    worker = store.get("Pod", "pytorch-dist-mnist-nccl-worker-1")
    assert worker["metadata"]["labels"]["training.kubeflow.org/replica-type"] == "worker"
    assert worker["metadata"]["labels"]["training.kubeflow.org/replica-index"] == "1"
    assert "training.kubeflow.org/job-role" not in worker["metadata"]["labels"]
    for pod in store.pods():
        assert owner_of(pod) == ("PyTorchJob", "pytorch-dist-mnist-nccl", True)
        assert pod["spec"]["schedulerName"] == "kai-scheduler"
        assert pod["spec"]["restartPolicy"] == "OnFailure"
        assert pod["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "1"}}
        # The training operator does not copy the job's labels: KAI reads the queue on the top owner.
        assert "kai.scheduler/queue" not in pod["metadata"]["labels"]


def test_evicted_worker_is_recreated_with_the_same_name() -> None:
    store = pytorch_store()
    store.run_all()
    old_uid = store.get("Pod", "pytorch-dist-mnist-nccl-worker-1")["metadata"]["uid"]

    store.terminate_pod("pytorch-dist-mnist-nccl-worker-1")
    store.settle()
    assert len(store.pods()) == 3  # the name is still taken while the pod terminates

    store.remove_pod("pytorch-dist-mnist-nccl-worker-1")
    store.settle()
    recreated = store.get("Pod", "pytorch-dist-mnist-nccl-worker-1")
    assert recreated["metadata"]["uid"] != old_uid
    assert recreated["status"] == {"phase": "Pending"}


def test_master_success_completes_the_job_and_nothing_is_recreated() -> None:
    store = pytorch_store()
    store.run_all()
    store.set_phase("pytorch-dist-mnist-nccl-master-0", "Succeeded")
    store.settle()
    job = store.get("PyTorchJob", "pytorch-dist-mnist-nccl")
    assert [c["type"] for c in job["status"]["conditions"]] == ["Created", "Succeeded"]
    # cleanPodPolicy defaults to None: the workers are left alone.
    assert len(store.pods()) == 3

    store.remove_pod("pytorch-dist-mnist-nccl-worker-0")
    store.settle()
    assert "pytorch-dist-mnist-nccl-worker-0" not in store.pod_names()


def test_clean_pod_policy_running_deletes_running_workers_after_success() -> None:
    store = pytorch_store(runPolicy={"cleanPodPolicy": "Running"})
    store.run_all()
    store.set_phase("pytorch-dist-mnist-nccl-master-0", "Succeeded")
    store.settle()
    assert store.pod_names() == ["pytorch-dist-mnist-nccl-master-0"]


def test_failed_pod_restarts_under_on_failure_until_the_backoff_limit() -> None:
    store = pytorch_store(runPolicy={"backoffLimit": 1})
    store.run_all()
    store.set_phase("pytorch-dist-mnist-nccl-worker-0", "Failed")
    store.settle()
    assert store.get("Pod", "pytorch-dist-mnist-nccl-worker-0")["status"] == {"phase": "Pending"}

    store.run_all()
    store.set_phase("pytorch-dist-mnist-nccl-worker-0", "Failed")
    store.settle()
    job = store.get("PyTorchJob", "pytorch-dist-mnist-nccl")
    assert job["status"]["conditions"][-1]["type"] == "Failed"
    assert store.pods() == []


def test_failed_pod_with_never_fails_the_job() -> None:
    docs = load("pytorch-job.yaml")
    docs[0]["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = "Never"
    store = MiniStore()
    store.apply(docs)
    store.settle()
    store.set_phase("pytorch-dist-mnist-nccl-worker-1", "Failed")
    store.settle()
    job = store.get("PyTorchJob", "pytorch-dist-mnist-nccl")
    assert job["status"]["conditions"][-1]["type"] == "Failed"
    assert any(e.type == "Warning" and e.reason == "PyTorchJobFailed" for e in store.events)


def test_elastic_pytorchjob_starts_with_replicas_workers() -> None:
    docs = load("pytorch-job.yaml")
    spec = docs[0]["spec"]
    del spec["pytorchReplicaSpecs"]["Master"]
    spec["pytorchReplicaSpecs"]["Worker"]["replicas"] = 3
    spec["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 5}
    store = MiniStore()
    store.apply(docs)
    store.settle()
    assert store.pod_names() == [f"pytorch-dist-mnist-nccl-worker-{i}" for i in range(3)]


def test_suspended_training_job_has_no_pods() -> None:
    assert pytorch_store(runPolicy={"suspend": True}).pods() == []


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
    store = MiniStore()
    store.apply([d for d in load("kai-batch-examples.yaml") if d["kind"] == kind])
    store.settle()

    got = {
        p["metadata"]["name"]: (
            p["metadata"]["labels"]["training.kubeflow.org/replica-type"],
            p["metadata"]["labels"]["training.kubeflow.org/operator-name"],
            p["metadata"]["labels"].get("training.kubeflow.org/job-role") == "master",
        )
        for p in store.pods()
    }
    assert got == expected
    assert {owner_of(p)[0] for p in store.pods()} == {kind}


def test_tfjob_without_chief_makes_worker_zero_the_master() -> None:
    docs = [d for d in load("kai-batch-examples.yaml") if d["kind"] == "TFJob"]
    del docs[0]["spec"]["tfReplicaSpecs"]["Chief"]
    store = MiniStore()
    store.apply(docs)
    store.settle()
    roles = {p["metadata"]["name"]: p["metadata"]["labels"].get("training.kubeflow.org/job-role") for p in store.pods()}
    assert roles == {"tf-dist-mnist-worker-0": "master", "tf-dist-mnist-worker-1": None}


def test_mpijob_v2beta1_creates_workers_and_a_launcher_job() -> None:
    store = MiniStore()
    store.apply([d for d in load("kai-batch-examples.yaml") if d["kind"] == "MPIJob"])
    store.settle()

    (launcher_job,) = store.of_kind("Job")
    assert launcher_job["metadata"]["name"] == "mpi-hello-world-launcher"
    assert launcher_job["metadata"]["labels"] == {"app": "mpi-hello-world"}
    assert owner_of(launcher_job) == ("MPIJob", "mpi-hello-world", True)
    names_ = store.pod_names()
    assert names_[1:] == ["mpi-hello-world-worker-0", "mpi-hello-world-worker-1"]
    assert re.fullmatch(f"mpi-hello-world-launcher-{SUFFIX}", names_[0])
    launcher = store.get("Pod", names_[0])
    assert launcher["metadata"]["labels"]["training.kubeflow.org/job-role"] == "launcher"
    assert launcher["metadata"]["labels"]["training.kubeflow.org/operator-name"] == "mpi-operator"
    assert owner_of(launcher) == ("Job", "mpi-hello-world-launcher", True)
    worker = store.get("Pod", "mpi-hello-world-worker-1")
    assert worker["metadata"]["labels"]["training.kubeflow.org/job-role"] == "worker"
    assert worker["metadata"]["labels"]["training.kubeflow.org/replica-index"] == "1"
    assert (worker["spec"]["hostname"], worker["spec"]["subdomain"]) == ("mpi-hello-world-worker-1", "mpi-hello-world")

    store.run_all()
    store.set_phase(names_[0], "Succeeded")
    store.settle()
    mpijob = store.get("MPIJob", "mpi-hello-world")
    assert mpijob["status"]["conditions"][-1]["type"] == "Succeeded"


def test_mpijob_wait_for_workers_ready_delays_the_launcher() -> None:
    docs = [d for d in load("kai-batch-examples.yaml") if d["kind"] == "MPIJob"]
    docs[0]["spec"]["launcherCreationPolicy"] = "WaitForWorkersReady"
    store = MiniStore()
    store.apply(docs)
    store.settle()
    assert store.of_kind("Job") == []

    store.run_all()
    assert [j["metadata"]["name"] for j in store.of_kind("Job")] == ["mpi-hello-world-launcher"]


def test_mpijob_v1_uses_the_training_operator_layout() -> None:
    docs = [d for d in load("kai-batch-examples.yaml") if d["kind"] == "MPIJob"]
    docs[0]["apiVersion"] = "kubeflow.org/v1"
    store = MiniStore()
    store.apply(docs)
    store.settle()

    assert store.pod_names() == ["mpi-hello-world-launcher", "mpi-hello-world-worker-0", "mpi-hello-world-worker-1"]
    launcher = store.get("Pod", "mpi-hello-world-launcher")
    assert launcher["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"
    assert launcher["metadata"]["labels"]["training.kubeflow.org/operator-name"] == "mpijob-controller"
    assert store.of_kind("Job") == []


def test_notebook_runs_one_statefulset_pod() -> None:
    notebook = {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Notebook",
        "metadata": {"name": "nb", "namespace": "team", "labels": {"kai.scheduler/queue": "team-a"}},
        "spec": {
            "template": {"spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "nb", "image": "jupyter"}]}}
        },
    }
    store = MiniStore()
    store.apply([notebook])
    store.settle()

    (sts,) = store.of_kind("StatefulSet")
    assert owner_of(sts) == ("Notebook", "nb", True)
    (pod,) = store.pods()
    assert pod["metadata"]["name"] == "nb-0"
    assert owner_of(pod) == ("StatefulSet", "nb", True)
    labels = pod["metadata"]["labels"]
    assert (labels["statefulset"], labels["notebook-name"], labels["kai.scheduler/queue"]) == ("nb", "nb", "team-a")

    stopped = copy.deepcopy(notebook)
    stopped["metadata"]["annotations"] = {"kubeflow-resource-stopped": "2026-01-01T00:00:00Z"}
    store = MiniStore()
    store.apply([stopped])
    store.settle()
    assert store.pods() == []


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
    store = MiniStore()
    store.apply(docs)
    store.settle()
    assert store.pods() == []
    assert [e.field for e in store.errors] == [field]


def test_replica_type_keys_are_case_insensitive() -> None:
    docs = load("pytorch-job.yaml")
    specs = docs[0]["spec"]["pytorchReplicaSpecs"]
    specs["master"] = specs.pop("Master")
    store = MiniStore()
    store.apply(docs)
    store.settle()
    assert "pytorch-dist-mnist-nccl-master-0" in store.pod_names()
