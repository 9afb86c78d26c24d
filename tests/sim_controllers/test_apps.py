"""apps/v1 emulation: the vLLM Deployments of seed 003, ReplicaSets and StatefulSets."""

from __future__ import annotations

import re

import pytest

from kai.sim.controllers import names

from .ministore import MiniStore, load, owner_of

SUFFIX = f"[{names.ALPHABET}]{{5}}"
# pod-template-hash values are the decimal digits of a 32-bit hash mapped onto the alphabet.
HASH = "[4-9bcdf]{1,10}"


def vllm_store() -> MiniStore:
    store = MiniStore()
    store.apply(load("vllm-deployments.yaml"))
    store.settle()
    return store


def test_each_vllm_deployment_gets_a_hashed_replicaset_and_one_pod() -> None:
    store = vllm_store()

    assert store.errors == []
    sets = store.of_kind("ReplicaSet")
    assert [owner_of(rs) for rs in sets] == [
        ("Deployment", "vllm-test-02", True),
        ("Deployment", "vllm-test-07", True),
    ]
    for rs in sets:
        deployment = owner_of(rs)[1]
        pod_hash = rs["metadata"]["labels"]["pod-template-hash"]
        assert re.fullmatch(HASH, pod_hash)
        assert rs["metadata"]["name"] == f"{deployment}-{pod_hash}"
        assert rs["metadata"]["namespace"] == "ai-workloads"
        assert rs["spec"]["replicas"] == 1
        assert rs["spec"]["selector"]["matchLabels"] == {"app": deployment, "pod-template-hash": pod_hash}
    pods = store.pods()
    assert len(pods) == 2
    for pod in pods:
        rs_name = owner_of(pod)[1]
        assert owner_of(pod) == ("ReplicaSet", rs_name, True)
        assert re.fullmatch(f"{re.escape(rs_name)}-{SUFFIX}", pod["metadata"]["name"])
        assert pod["metadata"]["namespace"] == "ai-workloads"
        assert pod["spec"]["schedulerName"] == "kai-scheduler"
        assert pod["metadata"]["labels"]["kai.scheduler/queue"] == "test"
        assert pod["metadata"]["labels"]["pod-template-hash"] == rs_name.rsplit("-", 1)[1]
    fractions = {p["metadata"]["labels"]["app"]: p["metadata"]["annotations"]["gpu-fraction"] for p in pods}
    assert fractions == {"vllm-test-07": "0.7", "vllm-test-02": "0.2"}


def test_pod_template_hash_is_stable_and_depends_on_the_template() -> None:
    first, second = vllm_store(), vllm_store()
    assert [rs["metadata"]["name"] for rs in first.of_kind("ReplicaSet")] == [
        rs["metadata"]["name"] for rs in second.of_kind("ReplicaSet")
    ]
    hashes = {rs["metadata"]["labels"]["pod-template-hash"] for rs in first.of_kind("ReplicaSet")}
    assert len(hashes) == 2


def test_evicted_deployment_pod_is_replaced_at_once_under_a_new_name() -> None:
    store = vllm_store()
    store.run_all()
    victim = store.pod_names()[0]

    store.terminate_pod(victim)
    store.settle()
    assert len(store.pods()) == 3  # the terminating pod does not count: its replacement is Pending
    assert [p["status"]["phase"] for p in store.pods() if p["metadata"]["name"] != victim].count("Pending") == 1

    store.remove_pod(victim)
    store.settle()
    assert len(store.pods()) == 2 and victim not in store.pod_names()


def test_replicaset_scales_down_pending_pods_first() -> None:
    store = vllm_store()
    rs = store.of_kind("ReplicaSet")[0]
    rs["spec"]["replicas"] = 3
    store.settle()
    running = next(p["metadata"]["name"] for p in store.pods() if owner_of(p)[1] == rs["metadata"]["name"])
    store.set_phase(running, "Running")

    rs["spec"]["replicas"] = 1
    store.settle()
    assert [p["metadata"]["name"] for p in store.pods() if owner_of(p)[1] == rs["metadata"]["name"]] == [running]


def test_deployment_with_lost_indentation_is_reported() -> None:
    # vllm-test-02 as the guide prints it: `metadata` and `spec` end up empty.
    broken = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "vllm-test-02"}, "spec": None}
    store = MiniStore()
    store.apply([broken])
    store.settle()
    (error,) = store.errors
    assert (error.kind, error.name, error.field) == ("Deployment", "vllm-test-02", "spec")
    assert store.objects and store.pods() == []


def statefulset(*, replicas: int = 3, policy: str | None = None, start: int | None = None) -> dict:
    spec: dict = {
        "replicas": replicas,
        "serviceName": "db",
        "selector": {"matchLabels": {"app": "db"}},
        "template": {
            "metadata": {"labels": {"app": "db", "kai.scheduler/queue": "team-a"}},
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "db", "image": "postgres"}]},
        },
    }
    if policy:
        spec["podManagementPolicy"] = policy
    if start is not None:
        spec["ordinals"] = {"start": start}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"}, "spec": spec}


def test_statefulset_ordered_ready_creates_one_pod_at_a_time() -> None:
    store = MiniStore()
    store.apply([statefulset()])
    store.settle()
    assert store.pod_names() == ["db-0"]

    store.set_phase("db-0", "Running")
    store.settle()
    assert store.pod_names() == ["db-0", "db-1"]
    store.run_all()
    store.run_all()
    assert store.pod_names() == ["db-0", "db-1", "db-2"]

    pod = store.get("Pod", "db-1")
    labels = pod["metadata"]["labels"]
    assert labels["statefulset.kubernetes.io/pod-name"] == "db-1"
    assert labels["apps.kubernetes.io/pod-index"] == "1"
    assert re.fullmatch(f"db-{HASH}", labels["controller-revision-hash"])
    assert labels["kai.scheduler/queue"] == "team-a"
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("db-1", "db")
    assert owner_of(pod) == ("StatefulSet", "db", True)
    assert "generateName" not in pod["metadata"]


@pytest.mark.parametrize(("start", "expected"), [(None, ["db-0", "db-1", "db-2"]), (1, ["db-1", "db-2", "db-3"])])
def test_statefulset_parallel_creates_all_ordinals(start: int | None, expected: list[str]) -> None:
    store = MiniStore()
    store.apply([statefulset(policy="Parallel", start=start)])
    store.settle()
    assert store.pod_names() == expected


def test_statefulset_recreates_a_lost_pod_under_the_same_name() -> None:
    store = MiniStore()
    store.apply([statefulset(policy="Parallel")])
    store.settle()
    old = store.get("Pod", "db-1")["metadata"]["uid"]

    store.terminate_pod("db-1")
    store.settle()
    assert store.get("Pod", "db-1")["metadata"]["uid"] == old

    store.remove_pod("db-1")
    store.settle()
    assert store.get("Pod", "db-1")["metadata"]["uid"] != old

    store.set_phase("db-2", "Succeeded")
    store.settle()
    assert store.get("Pod", "db-2")["status"] == {"phase": "Pending"}
