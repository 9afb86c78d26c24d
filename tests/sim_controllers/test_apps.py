"""apps/v1 emulation: the vLLM Deployments of seed 003, ReplicaSets and StatefulSets."""

from __future__ import annotations

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
# pod-template-hash values are the decimal digits of a 32-bit hash mapped onto the alphabet.
HASH = "[4-9bcdf]{1,10}"


def vllm_cluster() -> Simulation:
    return simulate([queue("test"), *load("vllm-deployments.yaml")])


def test_each_vllm_deployment_gets_a_hashed_replicaset_and_one_pod() -> None:
    sim = vllm_cluster()

    assert events(sim, "InvalidSpec") == []
    sets = of_kind(sim, "ReplicaSet")
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
        assert rs["metadata"]["ownerReferences"][0]["uid"] == uid(get(sim, "Deployment", deployment))
        assert rs["spec"]["replicas"] == 1
        assert rs["spec"]["selector"]["matchLabels"] == {"app": deployment, "pod-template-hash": pod_hash}
    all_pods = pods(sim)
    assert len(all_pods) == 2
    for p in all_pods:
        rs_name = owner_of(p)[1]
        assert owner_of(p) == ("ReplicaSet", rs_name, True)
        assert re.fullmatch(f"{re.escape(rs_name)}-{SUFFIX}", p["metadata"]["name"])
        assert p["metadata"]["namespace"] == "ai-workloads"
        assert p["spec"]["schedulerName"] == "kai-scheduler"
        assert p["metadata"]["labels"]["kai.scheduler/queue"] == "test"
        assert p["metadata"]["labels"]["pod-template-hash"] == rs_name.rsplit("-", 1)[1]
        assert p["status"]["phase"] == "Running"
    fractions = {p["metadata"]["labels"]["app"]: p["metadata"]["annotations"]["gpu-fraction"] for p in all_pods}
    assert fractions == {"vllm-test-07": "0.7", "vllm-test-02": "0.2"}


def test_pod_template_hash_is_stable_and_depends_on_the_template() -> None:
    first, second = vllm_cluster(), vllm_cluster()
    assert [rs["metadata"]["name"] for rs in of_kind(first, "ReplicaSet")] == [
        rs["metadata"]["name"] for rs in of_kind(second, "ReplicaSet")
    ]
    hashes = {rs["metadata"]["labels"]["pod-template-hash"] for rs in of_kind(first, "ReplicaSet")}
    assert len(hashes) == 2


def test_evicted_deployment_pod_is_replaced_at_once_under_a_new_name() -> None:
    sim = vllm_cluster()
    before = pod_names(sim)
    victim = before[0]

    sim.delete_pod(key(sim, victim), reason="evicted")
    sim.step()
    assert "deletionTimestamp" in pod(sim, victim)["metadata"]
    (replacement,) = set(pod_names(sim)) - set(before)  # the terminating pod does not count
    assert owner_of(pod(sim, replacement)) == owner_of(pod(sim, victim))

    settle(sim)
    assert sorted(pod_names(sim)) == sorted({*before, replacement} - {victim})


def replicaset_pod(name: str, *, created: str, running: bool) -> dict[str, Any]:
    """A pod of ReplicaSet web as `kubectl get pod -o yaml` prints it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"app": "web", "kai.scheduler/queue": "default-queue"},
            "creationTimestamp": created,
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "uid-web", "controller": True}
            ],
        },
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [{"name": "web", "image": "nginx"}],
            **({"nodeName": "node-0"} if running else {}),
        },
        "status": {"phase": "Running" if running else "Pending"},
    }


def test_replicaset_scales_down_pending_pods_first() -> None:
    # A cluster caught right after `kubectl scale rs web --replicas=1`: the newest pod is the running one.
    replicaset = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web", "uid": "uid-web", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web", "kai.scheduler/queue": "default-queue"}},
                "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "web", "image": "nginx"}]},
            },
        },
    }
    sim = simulate(
        [
            replicaset,
            replicaset_pod("web-a", created="2026-01-01T00:00:01Z", running=False),
            replicaset_pod("web-b", created="2026-01-01T00:00:02Z", running=False),
            replicaset_pod("web-c", created="2026-01-01T00:00:03Z", running=True),
        ]
    )
    assert phases(sim) == {"web-c": "Running"}
    assert get(sim, "ReplicaSet", "web")["status"]["readyReplicas"] == 1


def test_deployment_with_lost_indentation_is_reported() -> None:
    # vllm-test-02 as the guide prints it: `metadata` and `spec` end up empty.
    broken = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "vllm-test-02"}, "spec": None}
    (error,) = refusal([broken])
    assert error == "Deployment vllm-test-02: spec: is missing"


def statefulset(
    *, replicas: int = 3, policy: str | None = None, start: int | None = None, gpus: int = 0
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "db", "image": "postgres"}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    spec: dict[str, Any] = {
        "replicas": replicas,
        "serviceName": "db",
        "selector": {"matchLabels": {"app": "db"}},
        "template": {
            "metadata": {"labels": {"app": "db", "kai.scheduler/queue": "team-a"}},
            "spec": {"schedulerName": "kai-scheduler", "containers": [container]},
        },
    }
    if policy:
        spec["podManagementPolicy"] = policy
    if start is not None:
        spec["ordinals"] = {"start": start}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"}, "spec": spec}


def test_statefulset_ordered_ready_creates_one_pod_at_a_time() -> None:
    sim = simulate([queue("team-a"), statefulset()])
    assert phases(sim) == {"db-0": "Running"}

    sim.step()
    assert phases(sim) == {"db-0": "Running", "db-1": "Running"}
    settle(sim)
    assert pod_names(sim) == ["db-0", "db-1", "db-2"]

    db_1 = pod(sim, "db-1")
    labels = db_1["metadata"]["labels"]
    assert labels["statefulset.kubernetes.io/pod-name"] == "db-1"
    assert labels["apps.kubernetes.io/pod-index"] == "1"
    assert re.fullmatch(f"db-{HASH}", labels["controller-revision-hash"])
    assert labels["kai.scheduler/queue"] == "team-a"
    assert (db_1["spec"]["hostname"], db_1["spec"]["subdomain"]) == ("db-1", "db")
    assert owner_of(db_1) == ("StatefulSet", "db", True)
    assert "generateName" not in db_1["metadata"]


def test_statefulset_ordered_ready_waits_behind_a_pod_that_cannot_run() -> None:
    # 4 nodes of 8 GPUs: db-0..db-3 run, db-4 stays Pending and db-5 is never created.
    sim = simulate([queue("team-a"), statefulset(replicas=6, gpus=8)])
    settle(sim)
    assert phases(sim) == {f"db-{i}": "Running" for i in range(4)} | {"db-4": "Pending"}


@pytest.mark.parametrize(("start", "expected"), [(None, ["db-0", "db-1", "db-2"]), (1, ["db-1", "db-2", "db-3"])])
def test_statefulset_parallel_creates_all_ordinals(start: int | None, expected: list[str]) -> None:
    sim = simulate([queue("team-a"), statefulset(policy="Parallel", start=start)])
    assert pod_names(sim) == expected


def test_statefulset_recreates_a_lost_pod_under_the_same_name() -> None:
    sim = simulate([queue("team-a"), statefulset(policy="Parallel")])
    old = uid(pod(sim, "db-1"))

    sim.delete_pod(key(sim, "db-1"), reason="evicted")
    sim.step()
    assert uid(pod(sim, "db-1")) == old  # the name is taken until the pod is gone

    remove(sim, "db-1")
    assert uid(pod(sim, "db-1")) != old
    assert pod(sim, "db-1")["status"]["phase"] == "Running"

    finished = uid(pod(sim, "db-2"))
    finish(sim, "db-2")
    sim.step()
    assert uid(pod(sim, "db-2")) != finished  # a terminal pod is deleted and created anew
    assert pod(sim, "db-2")["status"]["phase"] == "Running"
    assert [e.object for e in events(sim, "Completed")] == [f"Pod/{key(sim, 'db-2')}"]
