"""KubeRay emulation: the KAI samples from the KubeRay repository, RayJob and RayService."""

from __future__ import annotations

import copy
import re
from typing import Any

from kai.sim import controllers
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


def ray_pods(sim: Simulation, node_type: str) -> list[dict[str, Any]]:
    return [p for p in pods(sim) if p["metadata"]["labels"].get("ray.io/node-type") == node_type]


def worker_names(sim: Simulation) -> list[str]:
    return [p["metadata"]["name"] for p in ray_pods(sim, "worker")]


def test_kai_scheduler_sample_creates_head_and_two_workers_with_kuberay_names() -> None:
    sim = simulate(load("ray-cluster.kai-scheduler.yaml"))

    assert events(sim, "InvalidSpec") == []
    (head,) = ray_pods(sim, "head")
    workers = ray_pods(sim, "worker")
    assert re.fullmatch(f"raycluster-sample-head-{SUFFIX}", head["metadata"]["name"])
    assert len(workers) == 2
    for worker in workers:
        assert re.fullmatch(f"raycluster-sample-worker-worker-{SUFFIX}", worker["metadata"]["name"])
        assert worker["metadata"]["generateName"] == "raycluster-sample-worker-worker-"


def test_kai_scheduler_sample_pods_carry_kuberay_labels_queue_and_scheduler() -> None:
    sim = simulate(load("ray-cluster.kai-scheduler.yaml"))

    (head,) = ray_pods(sim, "head")
    assert head["metadata"]["labels"] == {
        "app.kubernetes.io/created-by": "kuberay-operator",
        "app.kubernetes.io/name": "kuberay",
        "kai.scheduler/queue": "team-a",
        "kai.scheduler/subgroup-name": "headgroup",  # written by the pod grouper, not KubeRay
        "ray.io/cluster": "raycluster-sample",
        "ray.io/group": "headgroup",
        "ray.io/identifier": "raycluster-sample-head",
        "ray.io/is-ray-node": "yes",
        "ray.io/node-type": "head",
    }
    # KubeRay's one annotation, then what KAI's pod grouper and binder write
    assert head["metadata"]["annotations"] == {
        "ray.io/ft-enabled": "false",
        "pod-group-name": f"pg-raycluster-sample-{uid(get(sim, 'RayCluster', 'raycluster-sample'))}",
        "received-resource-type": "Regular",
    }
    for p in pods(sim):
        assert p["spec"]["schedulerName"] == "kai-scheduler"
        assert p["metadata"]["labels"]["kai.scheduler/queue"] == "team-a"
        assert owner_of(p) == ("RayCluster", "raycluster-sample", True)
        assert p["metadata"]["ownerReferences"][0]["uid"] == uid(get(sim, "RayCluster", "raycluster-sample"))
        assert p["metadata"]["namespace"] == "default"
        assert p["status"]["phase"] == "Running"
    worker = ray_pods(sim, "worker")[0]
    assert worker["metadata"]["labels"]["ray.io/group"] == "worker"
    assert worker["metadata"]["labels"]["ray.io/identifier"] == "raycluster-sample-worker"
    assert worker["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}}
    assert [c["name"] for c in worker["spec"]["initContainers"]] == ["wait-gcs-ready"]


def test_gpu_sharing_sample_workers_keep_the_gpu_fraction_annotation() -> None:
    sim = simulate(load("ray-cluster.kai-gpu-sharing.yaml"))

    workers = ray_pods(sim, "worker")
    assert len(workers) == 2
    for worker in workers:
        assert re.fullmatch(f"raycluster-half-gpu-shared-gpu-worker-{SUFFIX}", worker["metadata"]["name"])
        assert worker["metadata"]["annotations"]["gpu-fraction"] == "0.5"
        assert worker["metadata"]["annotations"]["received-resource-type"] == "Fraction"
        assert worker["metadata"]["labels"]["ray.io/group"] == "shared-gpu"
    assert workers[0]["metadata"]["labels"]["runai-gpu-group"] == workers[1]["metadata"]["labels"]["runai-gpu-group"]
    (head,) = ray_pods(sim, "head")
    assert "gpu-fraction" not in head["metadata"]["annotations"]


def test_cluster_without_queue_label_gets_scheduler_name_but_no_queue() -> None:
    docs = load("ray-cluster.kai-scheduler.yaml")
    del docs[2]["metadata"]["labels"]
    sim = simulate(docs)

    assert len(pods(sim)) == 3
    for p in pods(sim):
        assert p["spec"]["schedulerName"] == "kai-scheduler"
        assert "kai.scheduler/queue" not in p["metadata"]["labels"]


def test_lost_worker_is_recreated_under_a_new_name() -> None:
    sim = simulate(load("ray-cluster.kai-scheduler.yaml"))
    lost = worker_names(sim)[0]

    remove(sim, lost)

    workers = worker_names(sim)
    assert len(workers) == 2 and lost not in workers
    assert all(re.fullmatch(f"raycluster-sample-worker-worker-{SUFFIX}", name) for name in workers)
    assert {p["status"]["phase"] for p in ray_pods(sim, "worker")} == {"Running"}


def test_terminating_worker_is_replaced_only_once_gone() -> None:
    sim = simulate(load("ray-cluster.kai-scheduler.yaml"))
    before = worker_names(sim)
    victim = before[0]

    sim.delete_pod(key(sim, victim), reason="evicted")
    sim.step()
    assert worker_names(sim) == before  # the terminating worker still counts

    remove(sim, victim)
    assert len(worker_names(sim)) == 2
    assert victim not in pod_names(sim)


def test_terminal_head_is_deleted_then_recreated() -> None:
    sim = simulate(load("ray-cluster.kai-scheduler.yaml"))
    (old_head,) = ray_pods(sim, "head")

    finish(sim, old_head["metadata"]["name"], failed=True)
    sim.step()

    (head,) = ray_pods(sim, "head")
    assert head["metadata"]["name"] != old_head["metadata"]["name"]
    assert head["status"]["phase"] == "Running"


def test_cluster_becomes_ready_when_all_pods_run() -> None:
    sim = simulate(load("ray-cluster.kai-scheduler.yaml"))
    # the controller last looked before this cycle's scheduler bound the pods
    assert "state" not in get(sim, "RayCluster", "raycluster-sample")["status"]

    sim.step()

    status = get(sim, "RayCluster", "raycluster-sample")["status"]
    assert status["state"] == "ready"
    assert status["desiredWorkerReplicas"] == 2
    assert status["readyWorkerReplicas"] == 2


def worker_group(**fields: object) -> dict[str, Any]:
    group: dict[str, Any] = {
        "groupName": "g",
        "template": {"spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "w", "image": "ray"}]}},
    }
    group.update(fields)
    return group


def cluster(*groups: dict[str, Any], **spec_fields: object) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "headGroupSpec": {
            "template": {"spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "h", "image": "ray"}]}}
        },
        "workerGroupSpecs": list(groups),
    }
    spec.update(spec_fields)
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc"}, "spec": spec}


def test_worker_counts_clamp_replicas_multiply_hosts_and_skip_suspended_groups() -> None:
    sim = simulate(
        [
            cluster(
                worker_group(groupName="low", replicas=1, minReplicas=3, maxReplicas=5),
                worker_group(groupName="high", replicas=9, minReplicas=0, maxReplicas=2),
                worker_group(groupName="hosts", replicas=2, numOfHosts=2),
                worker_group(groupName="unset", minReplicas=1),
                worker_group(groupName="off", replicas=4, suspend=True),
            )
        ]
    )

    counts: dict[str, int] = {}
    for p in ray_pods(sim, "worker"):
        group = p["metadata"]["labels"]["ray.io/group"]
        counts[group] = counts.get(group, 0) + 1
    assert counts == {"low": 3, "high": 2, "hosts": 4, "unset": 1}
    assert get(sim, "RayCluster", "rc")["status"]["desiredWorkerReplicas"] == 10


def test_suspended_cluster_has_no_pods() -> None:
    sim = simulate([cluster(worker_group(replicas=2), suspend=True)])
    settle(sim)

    assert pods(sim) == []
    assert get(sim, "RayCluster", "rc")["status"]["state"] == "suspended"


def test_autoscaling_head_gets_the_autoscaler_sidecar() -> None:
    sim = simulate([cluster(worker_group(replicas=1), enableInTreeAutoscaling=True)])

    (head,) = ray_pods(sim, "head")
    autoscaler = head["spec"]["containers"][1]
    assert autoscaler["name"] == "autoscaler"
    assert autoscaler["resources"]["requests"] == {"cpu": "500m", "memory": "512Mi"}


def test_template_labels_cannot_override_cluster_group_or_node_type() -> None:
    group = worker_group(replicas=1)
    group["template"]["metadata"] = {"labels": {"ray.io/group": "x", "ray.io/node-type": "head", "team": "a"}}
    sim = simulate([cluster(group)])

    (worker,) = ray_pods(sim, "worker")
    labels = worker["metadata"]["labels"]
    assert (labels["ray.io/group"], labels["ray.io/node-type"], labels["team"]) == ("g", "worker", "a")


def test_invalid_cluster_specs_are_reported_with_their_field() -> None:
    cases = {
        "spec.workerGroupSpecs[0].minReplicas": cluster(worker_group(minReplicas=4, maxReplicas=2)),
        "spec.workerGroupSpecs[0].replicas": cluster(worker_group(replicas=-1)),
        "spec.workerGroupSpecs[0].template": cluster({"groupName": "g", "replicas": 1}),
        "spec.headGroupSpec": {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc"}, "spec": {}},
        "spec.workerGroupSpecs[1].groupName": cluster(worker_group(), worker_group()),
    }
    for field, manifest in cases.items():
        (error,) = refusal([manifest])
        assert error.startswith(f"RayCluster rc: {field}: "), error
        assert "To fix:" in error


def run_and_lose_a_worker() -> Simulation:
    sim = simulate(load("ray-cluster.kai-gpu-sharing.yaml"))
    remove(sim, worker_names(sim)[0])
    settle(sim)
    return sim


def test_same_input_twice_gives_the_same_names() -> None:
    first, second = run_and_lose_a_worker(), run_and_lose_a_worker()
    assert pod_names(first) == pod_names(second)
    assert [uid(p) for p in pods(first)] == [uid(p) for p in pods(second)]
    assert len(pods(first)) == 3


def test_another_seed_gives_other_names() -> None:
    (sample,) = [d for d in load("ray-cluster.kai-scheduler.yaml") if d["kind"] == "RayCluster"]
    sample["metadata"]["uid"] = "uid-raycluster-sample"
    controller = controllers.controller_for(sample)
    assert controller is not None
    created = [
        [p["metadata"]["name"] for p in controller.reconcile(owner=sample, children=(), names=source).create]
        for source in (controllers.SeededNameSource(seed="a"), controllers.SeededNameSource(seed="b"))
    ]
    assert len(created[0]) == len(created[1]) == 3
    assert created[0] != created[1]


# --- RayJob ---------------------------------------------------------------------------------


def rayjob_docs() -> list[dict[str, Any]]:
    return [d for d in load("kai-batch-examples.yaml") if d["kind"] == "RayJob"]


def submitter(sim: Simulation) -> dict[str, Any]:
    (found,) = [p for p in pods(sim) if owner_of(p)[0] == "Job"]
    return found


def test_rayjob_creates_its_cluster_and_records_it_in_status() -> None:
    sim = simulate(rayjob_docs())

    (rc,) = of_kind(sim, "RayCluster")
    name = rc["metadata"]["name"]
    assert re.fullmatch(f"rayjob-example-{SUFFIX}", name)
    rayjob = get(sim, "RayJob", "rayjob-example")
    assert rayjob["status"]["rayClusterName"] == name
    assert rayjob["status"]["jobDeploymentStatus"] == "Initializing"
    assert owner_of(rc) == ("RayJob", "rayjob-example", True)
    assert rc["metadata"]["labels"] == {
        "kai.scheduler/queue": "default-queue",
        "ray.io/originated-from-cr-name": "rayjob-example",
        "ray.io/originated-from-crd": "RayJob",
    }
    assert len(pods(sim)) == 3
    for p in pods(sim):
        assert p["metadata"]["labels"]["kai.scheduler/queue"] == "default-queue"
        assert p["metadata"]["labels"]["ray.io/cluster"] == name
        assert owner_of(p)[0] == "RayCluster"
    assert of_kind(sim, "Job") == []


def test_rayjob_submits_after_the_cluster_is_ready_and_completes_with_the_submitter() -> None:
    sim = simulate(rayjob_docs())
    settle(sim)

    (submitter_job,) = of_kind(sim, "Job")
    assert submitter_job["metadata"]["name"] == "rayjob-example"
    assert owner_of(submitter_job) == ("RayJob", "rayjob-example", True)
    pod_ = submitter(sim)
    assert re.fullmatch(f"rayjob-example-{SUFFIX}", pod_["metadata"]["name"])
    assert pod_["spec"]["schedulerName"] == "kai-scheduler"
    assert pod_["metadata"]["labels"]["kai.scheduler/queue"] == "default-queue"
    assert pod_["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m", "memory": "200Mi"}
    assert pod_["status"]["phase"] == "Running"
    assert get(sim, "RayJob", "rayjob-example")["status"]["jobDeploymentStatus"] == "Running"
    assert [e.type for e in events(sim, "KAISchedulerK8sJobMode")] == ["Warning"]

    finish(sim, pod_["metadata"]["name"])
    settle(sim)

    status = get(sim, "RayJob", "rayjob-example")["status"]
    assert (status["jobDeploymentStatus"], status["jobStatus"]) == ("Complete", "SUCCEEDED")
    assert len(of_kind(sim, "RayCluster")) == 1  # shutdownAfterJobFinishes is false
    assert len(ray_pods(sim, "worker")) == 2


def test_rayjob_with_shutdown_deletes_its_cluster_when_done() -> None:
    docs = rayjob_docs()
    docs[0]["spec"]["shutdownAfterJobFinishes"] = True
    sim = simulate(docs)
    settle(sim)
    finish(sim, submitter(sim)["metadata"]["name"])
    settle(sim)

    assert of_kind(sim, "RayCluster") == []
    assert [(owner_of(p)[0], p["status"]["phase"]) for p in pods(sim)] == [("Job", "Succeeded")]


def test_rayjob_http_mode_has_no_submitter_and_suspend_creates_nothing() -> None:
    docs = rayjob_docs()
    docs[0]["spec"]["submissionMode"] = "HTTPMode"
    sim = simulate(docs)
    settle(sim)
    assert of_kind(sim, "Job") == []
    assert get(sim, "RayJob", "rayjob-example")["status"]["jobDeploymentStatus"] == "Running"

    suspended = rayjob_docs()
    suspended[0]["spec"]["suspend"] = True
    sim = simulate(suspended)
    settle(sim)
    assert of_kind(sim, "RayCluster") == [] and pods(sim) == []


def test_rayjob_duration_annotation_reaches_the_default_submitter() -> None:
    docs = rayjob_docs()
    docs[0]["metadata"]["annotations"] = {"sim.kai.scheduler/duration": "90s"}
    sim = simulate(docs)
    settle(sim)

    pod_ = submitter(sim)
    assert pod_["metadata"]["annotations"]["sim.kai.scheduler/duration"] == "90s"
    assert pod_["status"]["phase"] == "Succeeded"  # it ran for 90s of virtual time
    assert get(sim, "RayJob", "rayjob-example")["status"]["jobStatus"] == "SUCCEEDED"


def test_rayjob_without_cluster_spec_is_an_error() -> None:
    docs = rayjob_docs()
    del docs[0]["spec"]["rayClusterSpec"]
    (error,) = refusal(docs)
    assert error.startswith("RayJob rayjob-example: spec.rayClusterSpec: "), error


# --- RayService -----------------------------------------------------------------------------


def test_rayservice_creates_a_cluster_and_promotes_it_when_ready() -> None:
    service = copy.deepcopy(cluster(worker_group(replicas=1)))
    service.update(kind="RayService", metadata={"name": "serve", "labels": {"kai.scheduler/queue": "team-a"}})
    service["spec"] = {"rayClusterConfig": service["spec"]}
    sim = simulate([queue("team-a"), service])

    (rc,) = of_kind(sim, "RayCluster")
    assert re.fullmatch(f"serve-{SUFFIX}", rc["metadata"]["name"])
    assert rc["metadata"]["labels"]["ray.io/originated-from-crd"] == "RayService"
    status = get(sim, "RayService", "serve")["status"]
    assert status["pendingServiceStatus"] == {"rayClusterName": rc["metadata"]["name"]}
    assert all(p["metadata"]["labels"]["kai.scheduler/queue"] == "team-a" for p in pods(sim))
    assert set(phases(sim).values()) == {"Running"}

    settle(sim)
    status = get(sim, "RayService", "serve")["status"]
    assert status["activeServiceStatus"] == {"rayClusterName": rc["metadata"]["name"]}
    assert status["pendingServiceStatus"] == {}
