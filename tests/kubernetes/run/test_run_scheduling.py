"""`kai run` against a real API server: the seeds' stories, as a user would see them on a cluster.

Each test creates its nodes, queues and workloads, starts `kai run`, plays the kubelet where a
story needs it, and checks what `kubectl get` would show: bindings, PodGroups, statuses, events.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from string import Template
from typing import Any

import httpx2 as httpx

from kai.kubernetes import client as kc
from kai.kubernetes import resources
from tests.kubernetes.controlplane import ControlPlane
from tests.kubernetes.faultproxy import FaultProxy
from tests.kubernetes.objects import finish_deletion, mark_running
from tests.kubernetes.run.conftest import NodeFactory, Objects, RunKai
from tests.kubernetes.run.support import (
    DEPARTMENT,
    QUEUE,
    KaiRun,
    events_matching,
    eventually,
    get,
    items,
    pods_by_name,
    unique,
)

POD = Template("""
apiVersion: v1
kind: Pod
metadata:
  name: $name
  labels: {kai.scheduler/queue: $queue}
  annotations: {$annotations}
spec:
  schedulerName: kai-scheduler
  priorityClassName: $priority
  terminationGracePeriodSeconds: 30
  containers:
  - name: main
    image: example.invalid/idle
    resources:
      limits: {nvidia.com/gpu: "$gpus"}
""")


async def queues(
    objects: Objects, *, gpu_quota: float = -1, gpu_limit: float = -1, names: tuple[str, ...] = ("q",)
) -> dict[str, str]:
    """A department queue and leaf queues under it; returns the leaves' real (unique) names."""
    department = unique("dept")
    await objects.create(DEPARTMENT.substitute(name=department))
    real = {n: unique(n) for n in names}
    for leaf in real.values():
        await objects.create(QUEUE.substitute(name=leaf, parent=department, gpu_quota=gpu_quota, gpu_limit=gpu_limit))
    return real


async def pods(kube: kc.KubeClient, namespace: str) -> dict[str, dict[str, Any]]:
    return pods_by_name(await items(kube, resources.PODS, namespace))


def node_of(pod: dict[str, Any]) -> str | None:
    node = (pod.get("spec") or {}).get("nodeName")
    return str(node) if node else None


async def test_gang_waits_whole_then_binds_whole(
    kube: kc.KubeClient, namespace: str, objects: Objects, nodes: NodeFactory, run_kai: RunKai
) -> None:
    q = (await queues(objects))["q"]
    await nodes(gpus=8)
    await objects.create(f"""
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata: {{name: trainer}}
spec: {{minMember: 3, queue: {q}, priorityClassName: train}}
""")
    for i in range(3):
        await objects.create(
            POD.substitute(
                name=f"trainer-{i}", queue=q, priority="train", gpus=4, annotations="pod-group-name: trainer"
            )
        )
    async with run_kai():

        async def waiting() -> dict[str, Any] | None:
            group = await get(kube, resources.PODGROUPS, "trainer", namespace)
            conditions = (group.get("status") or {}).get("schedulingConditions") or []
            return group if conditions else None

        group = await eventually(waiting)
        condition = group["status"]["schedulingConditions"][0]
        assert condition["type"] == "UnschedulableOnNodePool"
        assert condition["message"]
        seen = await pods(kube, namespace)
        assert all(node_of(p) is None for p in seen.values()), "no pod of a gang that does not fit is bound"

        async def marked() -> bool:
            found = await pods(kube, namespace)
            return all(
                any(
                    c.get("type") == "PodScheduled"
                    and c.get("status") == "False"
                    and c.get("reason") == "Unschedulable"
                    and c.get("message") == condition["message"]
                    for c in (p.get("status") or {}).get("conditions") or []
                )
                for p in found.values()
            )

        await eventually(marked)
        # a Warning event on the PodGroup says why it waits
        await events_matching(
            kube,
            namespace,
            lambda e: (
                e.get("regarding", {}).get("name") == "trainer" and e.get("reportingController") == "kai-scheduler"
            ),
        )

        await nodes(gpus=8)  # room for the whole gang now

        async def bound() -> dict[str, dict[str, Any]] | None:
            found = await pods(kube, namespace)
            return found if all(node_of(p) for p in found.values()) else None

        found = await eventually(bound)
        per_node: dict[str, int] = {}
        for p in found.values():
            per_node[node_of(p) or ""] = per_node.get(node_of(p) or "", 0) + 4
        assert all(gpus <= 8 for gpus in per_node.values())

        async def cleared() -> dict[str, Any] | None:
            group = await get(kube, resources.PODGROUPS, "trainer", namespace)
            status = group.get("status") or {}
            return group if not status.get("schedulingConditions") else None

        await eventually(cleared)

        async def queue_status() -> dict[str, Any] | None:
            queue = await get(kube, resources.QUEUES, q)
            status = queue.get("status") or {}
            return status if (status.get("allocated") or {}).get("nvidia.com/gpu") == "12" else None

        status = await eventually(queue_status)
        assert status["requested"]["nvidia.com/gpu"] == "12"
        assert "fairShare" in status


async def test_pod_grouper_makes_podgroups_for_jobs_and_pods(
    kube: kc.KubeClient, namespace: str, objects: Objects, nodes: NodeFactory, run_kai: RunKai
) -> None:
    q = (await queues(objects))["q"]
    await nodes(gpus=8)
    job = (
        await objects.create(f"""
apiVersion: batch/v1
kind: Job
metadata: {{name: batch, labels: {{kai.scheduler/queue: {q}}}}}
spec:
  parallelism: 2
  completions: 2
  template:
    metadata: {{labels: {{kai.scheduler/queue: {q}}}}}
    spec:
      schedulerName: kai-scheduler
      restartPolicy: Never
      containers:
      - name: main
        image: example.invalid/idle
        resources: {{limits: {{nvidia.com/gpu: "1"}}}}
""")
    )[0]
    await objects.create("""
apiVersion: v1
kind: Pod
metadata: {name: no-label}
spec:
  schedulerName: kai-scheduler
  containers:
  - {name: main, image: example.invalid/idle}
""")
    async with run_kai():

        async def job_pods_bound() -> list[dict[str, Any]] | None:
            found = [p for p in (await pods(kube, namespace)).values() if p["metadata"]["name"].startswith("batch-")]
            return found if len(found) == 2 and all(node_of(p) for p in found) else None

        found = await eventually(job_pods_bound)
        group_name = found[0]["metadata"]["annotations"]["pod-group-name"]
        # KAI's grouper for Jobs: one PodGroup per pod, named after the pod and the Job's uid
        assert group_name == f"pg-{found[0]['metadata']['name']}-{job['metadata']['uid']}"
        group = await get(kube, resources.PODGROUPS, group_name, namespace)
        assert group["spec"]["queue"] == q
        assert group["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
        assert group["metadata"]["labels"]["kai.scheduler/queue"] == q

        async def unlabelled_bound() -> dict[str, Any] | None:
            pod = (await pods(kube, namespace))["no-label"]
            return pod if node_of(pod) else None

        pod = await eventually(unlabelled_bound)
        unlabelled_group = await get(
            kube, resources.PODGROUPS, pod["metadata"]["annotations"]["pod-group-name"], namespace
        )
        assert unlabelled_group["spec"]["queue"] == "default-queue"
        await events_matching(
            kube,
            namespace,
            lambda e: e.get("reason") == "QueueLabelMissing" and e.get("regarding", {}).get("name") == "no-label",
        )


async def test_build_pod_preempts_train_pod_in_its_queue(
    kube: kc.KubeClient, namespace: str, objects: Objects, nodes: NodeFactory, run_kai: RunKai
) -> None:
    """Seed 002: a one-GPU node and a queue limited to 1 GPU run a train pod; a build pod arrives and
    takes its place once the train pod has terminated."""
    q = (await queues(objects, gpu_quota=1, gpu_limit=1))["q"]
    await nodes(gpus=1)
    await objects.create(POD.substitute(name="train-pod", queue=q, priority="train", gpus=1, annotations=""))
    async with run_kai() as kai:

        async def train_bound() -> dict[str, Any] | None:
            pod = (await pods(kube, namespace))["train-pod"]
            return pod if node_of(pod) else None

        await eventually(train_bound)
        await mark_running(kube, namespace, "train-pod")
        await objects.create(POD.substitute(name="build-pod", queue=q, priority="build", gpus=1, annotations=""))

        async def train_terminating() -> dict[str, Any] | None:
            pod = (await pods(kube, namespace)).get("train-pod")
            return pod if pod is not None and pod["metadata"].get("deletionTimestamp") else None

        await eventually(train_terminating)
        evicted = await events_matching(
            kube, namespace, lambda e: e.get("reason") == "Evicted" and e["regarding"]["name"] == "train-pod"
        )
        assert "preempt" in evicted[0]["note"]
        # the preempt action's search is counted as solved, with the scenario it simulated
        metrics = await kai.metrics()
        assert 'kai_scenario_search_jobs_total{action="preempt",result="solved"} 1.0' in metrics
        assert 'kai_scenario_search_scenarios_total{action="preempt"}' in metrics
        assert node_of((await pods(kube, namespace))["build-pod"]) is None, "the build pod waits for the GPU"
        await finish_deletion(kube, namespace, "train-pod")  # the kubelet stops the container

        async def build_bound() -> dict[str, Any] | None:
            pod = (await pods(kube, namespace))["build-pod"]
            return pod if node_of(pod) else None

        await eventually(build_bound)


async def test_health_readiness_and_metrics(
    kube: kc.KubeClient, namespace: str, objects: Objects, nodes: NodeFactory, run_kai: RunKai
) -> None:
    q = (await queues(objects))["q"]
    await nodes(gpus=8)
    await objects.create(POD.substitute(name="one", queue=q, priority="train", gpus=2, annotations=""))
    async with run_kai() as kai:

        async def bound() -> bool:
            return node_of((await pods(kube, namespace))["one"]) is not None

        await eventually(bound)
        async with httpx.AsyncClient() as http:
            health = await http.get(f"http://127.0.0.1:{kai.health_port}/healthz")
            ready = await http.get(f"http://127.0.0.1:{kai.health_port}/readyz?verbose")
        assert health.status_code == 200
        assert ready.status_code == 200 and "caches synced" in ready.text

        async def scraped() -> str | None:
            text = await kai.metrics()
            return text if f'kai_queue_allocated{{queue="{q}",resource="gpu"}} 2.0' in text else None

        text = await eventually(scraped)
        for name in (
            "kai_cycle_duration_seconds_count",
            'kai_action_duration_seconds_count{action="allocate"}',
            "kai_pods_bound_total 1.0",
            f'kai_queue_fair_share{{queue="{q}",resource="gpu"}}',
            f'kai_queue_requested{{queue="{q}",resource="gpu"}} 2.0',
            f'kai_queue_quota{{queue="{q}",resource="gpu"}} -1.0',
            "kai_pods_pending 0.0",
            "kai_bind_failures_total 0.0",
            "kai_is_leader 1.0",
        ):
            assert name in text, name


async def test_a_cluster_without_the_crds_is_a_clear_error(
    fault_proxy: FaultProxy, kai_cluster: ControlPlane, tmp_path: Path
) -> None:
    fault_proxy.fail(404, method="GET", path="/apis/scheduling.run.ai/", count=100)
    run = KaiRun(kubeconfig=fault_proxy.kubeconfig, log=tmp_path / "no-crds.log")
    await run.start(wait_ready=False)
    assert run.process is not None
    status = await asyncio.to_thread(run.process.wait, 30)
    text = run.log.read_text()
    assert status == 2, text
    assert "podgroups.scheduling.run.ai" in text and "queues.scheduling.run.ai" in text
    assert "kai install crds | kubectl apply -f -" in text


async def test_reclaim_gives_a_starved_queue_its_fair_share(
    kube: kc.KubeClient, namespace: str, objects: Objects, nodes: NodeFactory, run_kai: RunKai
) -> None:
    """Two teams with 4 GPUs of quota each share one 8-GPU node; team-a borrowed all of it."""
    teams = await queues(objects, gpu_quota=4, names=("team-a", "team-b"))
    await nodes(gpus=8)
    for i in range(8):
        await objects.create(
            POD.substitute(name=f"a-{i}", queue=teams["team-a"], priority="train", gpus=1, annotations="")
        )
    async with run_kai():

        async def a_running() -> bool:
            found = await pods(kube, namespace)
            return len(found) == 8 and all(node_of(p) for p in found.values())

        await eventually(a_running)
        for i in range(8):
            await mark_running(kube, namespace, f"a-{i}")
        for i in range(4):
            await objects.create(
                POD.substitute(name=f"b-{i}", queue=teams["team-b"], priority="train", gpus=1, annotations="")
            )

        async def reclaimed() -> list[str] | None:
            found = await pods(kube, namespace)
            going = [n for n, p in found.items() if n.startswith("a-") and p["metadata"].get("deletionTimestamp")]
            return going if len(going) == 4 else None

        victims = await eventually(reclaimed, timeout=30)
        evicted = await events_matching(kube, namespace, lambda e: e.get("reason") == "Evicted", at_least=4)
        notes = [e["note"] for e in evicted]
        assert len(notes) == 4 and all("reclaim" in n for n in notes), notes
        for name in victims:
            await finish_deletion(kube, namespace, name)

        async def b_bound() -> bool:
            found = await pods(kube, namespace)
            return all(node_of(p) for n, p in found.items() if n.startswith("b-"))

        await eventually(b_bound, timeout=30)
        remaining = [n for n in await pods(kube, namespace) if n.startswith("a-")]
        assert len(remaining) == 4, "team-a keeps its quota"


async def test_over_limit_is_reported_with_the_queue_numbers(
    kube: kc.KubeClient, namespace: str, objects: Objects, nodes: NodeFactory, run_kai: RunKai
) -> None:
    q = (await queues(objects, gpu_quota=2, gpu_limit=2))["q"]
    await nodes(gpus=8)
    await objects.create(POD.substitute(name="wide", queue=q, priority="train", gpus=4, annotations=""))
    async with run_kai():

        async def blocked() -> dict[str, Any] | None:
            pod = (await pods(kube, namespace))["wide"]
            group_name = (pod["metadata"].get("annotations") or {}).get("pod-group-name")
            if not group_name:
                return None
            group = await get(kube, resources.PODGROUPS, group_name, namespace)
            conditions = (group.get("status") or {}).get("schedulingConditions") or []
            return conditions[0] if conditions else None

        condition = await eventually(blocked)
        assert condition["reason"] == "OverLimit", condition
        assert "details" in condition["reasons"][0], condition
        details = condition["reasons"][0]["details"]["queueDetails"]
        assert details["name"] == q
        assert details["queueResourceLimits"]["nvidia.com/gpu"] == "2"
        assert details["podGroupRequestedResources"]["nvidia.com/gpu"] == "4"
        assert node_of((await pods(kube, namespace))["wide"]) is None
