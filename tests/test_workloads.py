"""Real workload manifests (KubeRay samples, the PyTorchJob gang, the vLLM deployments) applied
unchanged through `kai sim`: the emulated controllers create the pods, the pod grouper makes the
gang, and the scheduler runs it whole, with the right queue and priority."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import yaml
from click.testing import CliRunner

from kai.cli.main import main

MANIFESTS = pathlib.Path(__file__).parent / "sim_controllers" / "manifests"

QUEUE_TEST = """apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: test}
spec:
  resources:
    gpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    memory: {quota: -1, limit: -1, overQuotaWeight: 1}
"""


def sim(*paths: pathlib.Path, args: tuple[str, ...] = ()) -> dict[str, Any]:
    argv = ["sim", *[a for p in paths for a in ("-f", str(p))], *args, "-o", "json"]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def test_kuberay_sample_runs_as_one_gang_in_team_a() -> None:
    doc = sim(MANIFESTS / "ray-cluster.kai-scheduler.yaml")
    pods = [p for p in doc["pods"] if p["labels"].get("ray.io/cluster") == "raycluster-sample"]
    assert len(pods) == 3
    assert {p["phase"] for p in pods} == {"Running"}
    assert {p["queue"] for p in pods} == {"team-a"}
    assert {p["owner"]["kind"] for p in pods} == {"RayCluster"}
    assert sorted(p["labels"]["ray.io/node-type"] for p in pods) == ["head", "worker", "worker"]
    [group] = doc["podGroups"]
    assert (group["minMember"], group["queue"], group["priorityClassName"]) == (3, "team-a", "train")


def test_kuberay_gpu_sharing_workers_share_one_device() -> None:
    doc = sim(MANIFESTS / "ray-cluster.kai-gpu-sharing.yaml")
    workers = [p for p in doc["pods"] if p["labels"].get("ray.io/node-type") == "worker"]
    assert len(workers) == 2
    assert {p["gpuFraction"] for p in workers} == {0.5}
    assert workers[0]["node"] == workers[1]["node"]
    assert workers[0]["gpuGroups"] and workers[0]["gpuGroups"] == workers[1]["gpuGroups"]
    assert workers[0]["labels"]["runai-gpu-group"] == workers[0]["gpuGroups"][0]


def test_vllm_deployments_pack_onto_one_gpu(tmp_path: pathlib.Path) -> None:
    queue = tmp_path / "queue.yaml"
    queue.write_text(QUEUE_TEST)
    doc = sim(queue, MANIFESTS / "vllm-deployments.yaml")
    pods = {p["labels"]["app"]: p for p in doc["pods"]}
    assert set(pods) == {"vllm-test-07", "vllm-test-02"}
    assert {p["phase"] for p in pods.values()} == {"Running"}
    assert pods["vllm-test-07"]["gpuGroups"] == pods["vllm-test-02"]["gpuGroups"] != []
    assert {g["priorityClassName"] for g in doc["podGroups"]} == {"inference"}
    assert {g["preemptible"] for g in doc["podGroups"]} == {False}


def test_pytorchjob_gang_waits_whole_when_it_cannot_fit(tmp_path: pathlib.Path) -> None:
    docs = list(yaml.safe_load_all((MANIFESTS / "pytorch-job.yaml").read_text()))
    for doc in docs:
        if doc and doc.get("kind") == "PyTorchJob":
            worker = doc["spec"]["pytorchReplicaSpecs"]["Worker"]
            worker["replicas"] = 4
            for container in worker["template"]["spec"]["containers"]:
                container["resources"]["limits"]["nvidia.com/gpu"] = "8"
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    out = sim(path)
    assert len(out["pods"]) == 5
    assert {p["phase"] for p in out["pods"]} == {"Pending"}
    [group] = out["podGroups"]
    assert group["minMember"] == 5
    assert group["conditions"][0]["reason"] == "Unschedulable"


def test_pytorchjob_gang_starts_together() -> None:
    doc = sim(MANIFESTS / "pytorch-job.yaml")
    assert len(doc["pods"]) == 3
    assert {p["phase"] for p in doc["pods"]} == {"Running"}
    assert doc["podGroups"][0]["minMember"] == 3


def test_job_pods_get_one_podgroup_each_and_complete(tmp_path: pathlib.Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(
        """apiVersion: batch/v1
kind: Job
metadata: {name: sweep, labels: {kai.scheduler/queue: default-queue}}
spec:
  parallelism: 2
  completions: 2
  template:
    metadata: {annotations: {sim.kai.scheduler/duration: 60s}}
    spec:
      schedulerName: kai-scheduler
      restartPolicy: Never
      containers: [{name: main, image: busybox, resources: {limits: {nvidia.com/gpu: "1"}}}]
"""
    )
    doc = sim(job, args=("--until-idle",))
    assert len(doc["podGroups"]) == 2
    assert {g["minMember"] for g in doc["podGroups"]} == {1}
    assert {p["phase"] for p in doc["pods"]} == {"Succeeded"}


def test_raycluster_without_queue_label_is_explained(tmp_path: pathlib.Path) -> None:
    docs = [d for d in yaml.safe_load_all((MANIFESTS / "ray-cluster.kai-scheduler.yaml").read_text()) if d]
    for d in docs:
        if d["kind"] == "RayCluster":
            del d["metadata"]["labels"]["kai.scheduler/queue"]
    path = tmp_path / "nolabel.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    doc = sim(path)
    assert {p["queue"] for p in doc["pods"]} == {"default-queue"}
    hints = [e for e in doc["events"] if e["reason"] == "QueueLabelMissing"]
    assert hints
    assert "Queue label missing" in hints[0]["message"]
    assert "RayCluster" in hints[0]["message"]


def test_invalid_workload_is_unusable_input(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: -1, template: {}}\n"
    )
    result = CliRunner().invoke(main, ["sim", "-f", str(path)])
    assert result.exit_code == 2
    assert "Deployment web" in result.stderr


def test_evicted_controller_pod_is_recreated_pending_then_rescheduled() -> None:
    from kai.core.model import TaskStatus
    from kai.core.session import SchedulerConfig
    from kai.sim.engine import Simulation
    from kai.sim.loader import load_paths

    loaded = load_paths([str(MANIFESTS / "ray-cluster.kai-scheduler.yaml")])
    sim = Simulation(loaded.objects, config=SchedulerConfig(actions=("allocate",)))
    sim.step()
    workers = sorted(k for k, p in sim.pods.items() if p.labels.get("ray.io/node-type") == "worker")
    victim = sim.pods[workers[0]]
    assert victim.status == TaskStatus.RUNNING
    victim.move(TaskStatus.RELEASING)  # as an eviction would
    victim.release_at = sim.now
    sim.step()  # the grace period is over: the pod is gone and KubeRay creates a replacement
    now_workers = sorted(k for k, p in sim.pods.items() if p.labels.get("ray.io/node-type") == "worker")
    assert workers[0] not in now_workers
    assert len(now_workers) == 2
    assert all(sim.pods[k].status == TaskStatus.RUNNING for k in now_workers)
