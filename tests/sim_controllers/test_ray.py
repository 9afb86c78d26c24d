"""KubeRay emulation: the KAI samples from the KubeRay repository, RayJob and RayService."""

from __future__ import annotations

import copy
import re

from kai.sim.controllers import names

from .ministore import MiniStore, load, owner_of

SUFFIX = f"[{names.ALPHABET}]{{5}}"


def ray_pods(store: MiniStore, node_type: str) -> list[dict]:
    return [p for p in store.pods() if p["metadata"]["labels"].get("ray.io/node-type") == node_type]


def test_kai_scheduler_sample_creates_head_and_two_workers_with_kuberay_names() -> None:
    store = MiniStore()
    store.apply(load("ray-cluster.kai-scheduler.yaml"))
    store.settle()

    assert store.errors == []
    (head,) = ray_pods(store, "head")
    workers = ray_pods(store, "worker")
    assert re.fullmatch(f"raycluster-sample-head-{SUFFIX}", head["metadata"]["name"])
    assert len(workers) == 2
    for worker in workers:
        assert re.fullmatch(f"raycluster-sample-worker-worker-{SUFFIX}", worker["metadata"]["name"])
        assert worker["metadata"]["generateName"] == "raycluster-sample-worker-worker-"


def test_kai_scheduler_sample_pods_carry_kuberay_labels_queue_and_scheduler() -> None:
    store = MiniStore()
    store.apply(load("ray-cluster.kai-scheduler.yaml"))
    store.settle()

    (head,) = ray_pods(store, "head")
    assert head["metadata"]["labels"] == {
        "app.kubernetes.io/created-by": "kuberay-operator",
        "app.kubernetes.io/name": "kuberay",
        "kai.scheduler/queue": "team-a",
        "ray.io/cluster": "raycluster-sample",
        "ray.io/group": "headgroup",
        "ray.io/identifier": "raycluster-sample-head",
        "ray.io/is-ray-node": "yes",
        "ray.io/node-type": "head",
    }
    assert head["metadata"]["annotations"] == {"ray.io/ft-enabled": "false"}
    for pod in store.pods():
        assert pod["spec"]["schedulerName"] == "kai-scheduler"
        assert pod["metadata"]["labels"]["kai.scheduler/queue"] == "team-a"
        assert owner_of(pod) == ("RayCluster", "raycluster-sample", True)
        assert pod["metadata"]["ownerReferences"][0]["uid"] == "uid-raycluster-raycluster-sample"
        assert pod["metadata"]["namespace"] == "default"
        assert pod["status"] == {"phase": "Pending"}
    worker = ray_pods(store, "worker")[0]
    assert worker["metadata"]["labels"]["ray.io/group"] == "worker"
    assert worker["metadata"]["labels"]["ray.io/identifier"] == "raycluster-sample-worker"
    assert worker["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}}
    assert [c["name"] for c in worker["spec"]["initContainers"]] == ["wait-gcs-ready"]


def test_gpu_sharing_sample_workers_keep_the_gpu_fraction_annotation() -> None:
    store = MiniStore()
    store.apply(load("ray-cluster.kai-gpu-sharing.yaml"))
    store.settle()

    workers = ray_pods(store, "worker")
    assert len(workers) == 2
    for worker in workers:
        assert re.fullmatch(f"raycluster-half-gpu-shared-gpu-worker-{SUFFIX}", worker["metadata"]["name"])
        assert worker["metadata"]["annotations"] == {"gpu-fraction": "0.5"}
        assert worker["metadata"]["labels"]["ray.io/group"] == "shared-gpu"
    (head,) = ray_pods(store, "head")
    assert "gpu-fraction" not in head["metadata"].get("annotations", {})


def test_cluster_without_queue_label_gets_scheduler_name_but_no_queue() -> None:
    docs = load("ray-cluster.kai-scheduler.yaml")
    del docs[2]["metadata"]["labels"]
    store = MiniStore()
    store.apply(docs)
    store.settle()

    assert len(store.pods()) == 3
    for pod in store.pods():
        assert pod["spec"]["schedulerName"] == "kai-scheduler"
        assert "kai.scheduler/queue" not in pod["metadata"]["labels"]


def test_lost_worker_is_recreated_under_a_new_name() -> None:
    store = MiniStore()
    store.apply(load("ray-cluster.kai-scheduler.yaml"))
    store.settle()
    store.run_all()
    lost = ray_pods(store, "worker")[0]["metadata"]["name"]

    store.remove_pod(lost)
    store.settle()

    workers = [p["metadata"]["name"] for p in ray_pods(store, "worker")]
    assert len(workers) == 2 and lost not in workers
    assert all(re.fullmatch(f"raycluster-sample-worker-worker-{SUFFIX}", name) for name in workers)


def test_terminating_worker_is_replaced_only_once_gone() -> None:
    store = MiniStore()
    store.apply(load("ray-cluster.kai-scheduler.yaml"))
    store.settle()
    victim = ray_pods(store, "worker")[0]["metadata"]["name"]

    store.terminate_pod(victim)
    store.settle()
    assert len(ray_pods(store, "worker")) == 2

    store.remove_pod(victim)
    store.settle()
    assert len(ray_pods(store, "worker")) == 2
    assert victim not in store.pod_names()


def test_terminal_head_is_deleted_then_recreated() -> None:
    store = MiniStore()
    store.apply(load("ray-cluster.kai-scheduler.yaml"))
    store.settle()
    old_head = ray_pods(store, "head")[0]["metadata"]["name"]

    store.set_phase(old_head, "Failed")
    store.settle()

    (head,) = ray_pods(store, "head")
    assert head["metadata"]["name"] != old_head


def test_cluster_becomes_ready_when_all_pods_run() -> None:
    store = MiniStore()
    store.apply(load("ray-cluster.kai-scheduler.yaml"))
    store.settle()
    assert "state" not in store.get("RayCluster", "raycluster-sample")["status"]

    store.run_all()

    status = store.get("RayCluster", "raycluster-sample")["status"]
    assert status["state"] == "ready"
    assert status["desiredWorkerReplicas"] == 2
    assert status["readyWorkerReplicas"] == 2


def worker_group(**fields: object) -> dict:
    group: dict = {
        "groupName": "g",
        "template": {"spec": {"containers": [{"name": "w", "image": "ray"}]}},
    }
    group.update(fields)
    return group


def cluster(*groups: dict, **spec_fields: object) -> dict:
    spec: dict = {
        "headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": "ray"}]}}},
        "workerGroupSpecs": list(groups),
    }
    spec.update(spec_fields)
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc"}, "spec": spec}


def test_worker_counts_clamp_replicas_multiply_hosts_and_skip_suspended_groups() -> None:
    store = MiniStore()
    store.apply(
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
    store.settle()

    counts: dict[str, int] = {}
    for pod in ray_pods(store, "worker"):
        group = pod["metadata"]["labels"]["ray.io/group"]
        counts[group] = counts.get(group, 0) + 1
    assert counts == {"low": 3, "high": 2, "hosts": 4, "unset": 1}
    assert store.get("RayCluster", "rc")["status"]["desiredWorkerReplicas"] == 10


def test_suspended_cluster_has_no_pods() -> None:
    store = MiniStore()
    store.apply([cluster(worker_group(replicas=2), suspend=True)])
    store.settle()

    assert store.pods() == []
    assert store.get("RayCluster", "rc")["status"]["state"] == "suspended"


def test_autoscaling_head_gets_the_autoscaler_sidecar() -> None:
    store = MiniStore()
    store.apply([cluster(worker_group(replicas=1), enableInTreeAutoscaling=True)])
    store.settle()

    (head,) = ray_pods(store, "head")
    autoscaler = head["spec"]["containers"][1]
    assert autoscaler["name"] == "autoscaler"
    assert autoscaler["resources"]["requests"] == {"cpu": "500m", "memory": "512Mi"}


def test_template_labels_cannot_override_cluster_group_or_node_type() -> None:
    group = worker_group(replicas=1)
    group["template"]["metadata"] = {"labels": {"ray.io/group": "x", "ray.io/node-type": "head", "team": "a"}}
    store = MiniStore()
    store.apply([cluster(group)])
    store.settle()

    (worker,) = ray_pods(store, "worker")
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
        store = MiniStore()
        store.apply([manifest])
        store.settle()
        assert store.pods() == [], field
        assert [e.field for e in store.errors] == [field]
        (error,) = store.errors
        assert str(error).startswith("RayCluster default/rc: ") and "To fix:" in str(error)


def test_same_input_twice_gives_the_same_names() -> None:
    first, second = MiniStore(), MiniStore()
    for store in (first, second):
        store.apply(load("ray-cluster.kai-gpu-sharing.yaml"))
        store.settle()
        store.run_all()
        store.remove_pod(ray_pods(store, "worker")[0]["metadata"]["name"])
        store.settle()
    assert first.pod_names() == second.pod_names()
    assert [p["metadata"]["uid"] for p in first.pods()] == [p["metadata"]["uid"] for p in second.pods()]


def test_another_seed_gives_other_names() -> None:
    first, second = MiniStore(seed="a"), MiniStore(seed="b")
    for store in (first, second):
        store.apply(load("ray-cluster.kai-scheduler.yaml"))
        store.settle()
    assert first.pod_names() != second.pod_names()


# --- RayJob ---------------------------------------------------------------------------------


def rayjob_docs() -> list[dict]:
    return [d for d in load("kai-batch-examples.yaml") if d["kind"] == "RayJob"]


def test_rayjob_creates_its_cluster_and_records_it_in_status() -> None:
    store = MiniStore()
    store.apply(rayjob_docs())
    store.settle()

    (rc,) = store.of_kind("RayCluster")
    name = rc["metadata"]["name"]
    assert re.fullmatch(f"rayjob-example-{SUFFIX}", name)
    rayjob = store.get("RayJob", "rayjob-example")
    assert rayjob["status"]["rayClusterName"] == name
    assert rayjob["status"]["jobDeploymentStatus"] == "Initializing"
    assert owner_of(rc) == ("RayJob", "rayjob-example", True)
    assert rc["metadata"]["labels"] == {
        "kai.scheduler/queue": "default-queue",
        "ray.io/originated-from-cr-name": "rayjob-example",
        "ray.io/originated-from-crd": "RayJob",
    }
    assert len(store.pods()) == 3
    for pod in store.pods():
        assert pod["metadata"]["labels"]["kai.scheduler/queue"] == "default-queue"
        assert pod["metadata"]["labels"]["ray.io/cluster"] == name
        assert owner_of(pod)[0] == "RayCluster"
    assert store.of_kind("Job") == []


def test_rayjob_submits_after_the_cluster_is_ready_and_completes_with_the_submitter() -> None:
    store = MiniStore()
    store.apply(rayjob_docs())
    store.settle()
    store.run_all()

    (submitter_job,) = store.of_kind("Job")
    assert submitter_job["metadata"]["name"] == "rayjob-example"
    assert owner_of(submitter_job) == ("RayJob", "rayjob-example", True)
    (submitter,) = [p for p in store.pods() if owner_of(p)[0] == "Job"]
    assert re.fullmatch(f"rayjob-example-{SUFFIX}", submitter["metadata"]["name"])
    assert submitter["spec"]["schedulerName"] == "kai-scheduler"
    assert submitter["metadata"]["labels"]["kai.scheduler/queue"] == "default-queue"
    assert submitter["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m", "memory": "200Mi"}
    assert store.get("RayJob", "rayjob-example")["status"]["jobDeploymentStatus"] == "Running"
    assert any(e.reason == "KAISchedulerK8sJobMode" and e.type == "Warning" for e in store.events)

    store.run_all()
    store.set_phase(submitter["metadata"]["name"], "Succeeded")
    store.settle()

    status = store.get("RayJob", "rayjob-example")["status"]
    assert (status["jobDeploymentStatus"], status["jobStatus"]) == ("Complete", "SUCCEEDED")
    assert len(store.of_kind("RayCluster")) == 1  # shutdownAfterJobFinishes is false


def test_rayjob_with_shutdown_deletes_its_cluster_when_done() -> None:
    docs = rayjob_docs()
    docs[0]["spec"]["shutdownAfterJobFinishes"] = True
    store = MiniStore()
    store.apply(docs)
    store.settle()
    store.run_all()
    store.run_all()
    submitter = next(p for p in store.pods() if owner_of(p)[0] == "Job")
    store.set_phase(submitter["metadata"]["name"], "Succeeded")
    store.settle()

    assert store.of_kind("RayCluster") == []
    assert [owner_of(p)[0] for p in store.pods()] == ["Job"]


def test_rayjob_http_mode_has_no_submitter_and_suspend_creates_nothing() -> None:
    docs = rayjob_docs()
    docs[0]["spec"]["submissionMode"] = "HTTPMode"
    store = MiniStore()
    store.apply(docs)
    store.settle()
    store.run_all()
    assert store.of_kind("Job") == []
    assert store.get("RayJob", "rayjob-example")["status"]["jobDeploymentStatus"] == "Running"

    suspended = rayjob_docs()
    suspended[0]["spec"]["suspend"] = True
    store = MiniStore()
    store.apply(suspended)
    store.settle()
    assert store.of_kind("RayCluster") == [] and store.pods() == []


def test_rayjob_duration_annotation_reaches_the_default_submitter() -> None:
    docs = rayjob_docs()
    docs[0]["metadata"]["annotations"] = {"sim.kai.scheduler/duration": "90s"}
    store = MiniStore()
    store.apply(docs)
    store.settle()
    store.run_all()

    submitter = next(p for p in store.pods() if owner_of(p)[0] == "Job")
    assert submitter["metadata"]["annotations"]["sim.kai.scheduler/duration"] == "90s"


def test_rayjob_without_cluster_spec_is_an_error() -> None:
    docs = rayjob_docs()
    del docs[0]["spec"]["rayClusterSpec"]
    store = MiniStore()
    store.apply(docs)
    store.settle()
    assert [e.field for e in store.errors] == ["spec.rayClusterSpec"]


# --- RayService -----------------------------------------------------------------------------


def test_rayservice_creates_a_cluster_and_promotes_it_when_ready() -> None:
    service = copy.deepcopy(cluster(worker_group(replicas=1)))
    service.update(kind="RayService", metadata={"name": "serve", "labels": {"kai.scheduler/queue": "team-a"}})
    service["spec"] = {"rayClusterConfig": service["spec"]}
    store = MiniStore()
    store.apply([service])
    store.settle()

    (rc,) = store.of_kind("RayCluster")
    assert re.fullmatch(f"serve-{SUFFIX}", rc["metadata"]["name"])
    assert rc["metadata"]["labels"]["ray.io/originated-from-crd"] == "RayService"
    status = store.get("RayService", "serve")["status"]
    assert status["pendingServiceStatus"] == {"rayClusterName": rc["metadata"]["name"]}
    assert all(p["metadata"]["labels"]["kai.scheduler/queue"] == "team-a" for p in store.pods())

    store.run_all()
    status = store.get("RayService", "serve")["status"]
    assert status["activeServiceStatus"] == {"rayClusterName": rc["metadata"]["name"]}
    assert status["pendingServiceStatus"] == {}
