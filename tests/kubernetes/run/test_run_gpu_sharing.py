"""GPU sharing on a real API server: the seeds' vLLM pair (0.7 + 0.2 of one GPU) and KubeRay's half-GPU
workers get one reservation pod for their shared device, its UUID, and lose it when they are gone; the
device counts as one whole GPU of the node, while the queue is charged the fractions, as by `kai sim`.

The test plays the device plugin and kubelet for the reservation pods (`gpu_sharing.FakeDevicePlugin`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kai.cli.main import main
from kai.kubernetes import client as kc
from kai.kubernetes import resources
from tests.kubernetes.objects import finish_deletion, mark_running
from tests.kubernetes.run.conftest import NodeFactory, Objects, RunKai
from tests.kubernetes.run.gpu_sharing import UUID_ANNOTATION, device_plugin
from tests.kubernetes.run.support import DEPARTMENT, QUEUE, eventually, get, items, unique
from tests.kubernetes.run.test_run_scheduling import POD, node_of, pods, queues

GROUP = "runai-gpu-group"


def vllm(name: str, queue: str, fraction: str) -> str:
    """Seed 003's vLLM Deployment (image and probes aside)."""
    return f"""
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  labels: {{app: {name}}}
spec:
  replicas: 1
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}, kai.scheduler/queue: {queue}}}
      annotations: {{gpu-fraction: "{fraction}"}}
    spec:
      schedulerName: kai-scheduler
      containers:
      - name: vllm
        image: vllm/vllm-openai:latest
        command: ["/bin/sh", "-c"]
        args: ["vllm serve Qwen/Qwen2.5-1.5B-Instruct --gpu-memory-utilization={fraction}"]
        resources:
          limits: {{cpu: "8", memory: 15G}}
          requests: {{cpu: "6", memory: 6G}}
"""


@pytest.fixture
async def reservation_namespace(kube: kc.KubeClient) -> AsyncIterator[str]:
    """The namespace of this test's reservation pods (the chart creates `kai-resource-reservation`)."""
    name = unique("reservations")
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    await kube.request("POST", resources.NAMESPACES.path(), body=body)
    yield name
    await kube.request("DELETE", resources.NAMESPACES.path(name=name))


def pod_of(deployment: str) -> dict[str, Any]:
    """The pod a Deployment's ReplicaSet makes (as kai sim is given it)."""
    name = yaml.safe_load(deployment)["metadata"]["name"]
    template = yaml.safe_load(deployment)["spec"]["template"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **template["metadata"]},
        "spec": template["spec"],
    }


def sim_queue_gpus(tmp_path: Path, documents: list[str], queue: str) -> float:
    """The GPUs `kai sim` charges `queue` once it has scheduled `documents`."""
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text("\n---\n".join(documents))
    result = CliRunner().invoke(main, ["sim", "-f", str(scenario), "--until-idle", "-o", "json"])
    assert result.exit_code == 0, result.output
    [found] = [q for q in json.loads(result.stdout)["queues"] if q["name"] == queue]
    return float(found["allocated"]["gpu"])


def sharing_flags(reservations: str) -> tuple[str, ...]:
    return ("--resource-reservation-namespace", reservations)


async def reservation_pods(kube: kc.KubeClient, namespace: str, node: str) -> list[dict[str, Any]]:
    """The live reservation pods on `node` (the test's own: the API server is shared, and kai also holds
    devices for pods other tests left pending on their nodes)."""
    found = await items(kube, resources.PODS, namespace)
    return [p for p in found if not p["metadata"].get("deletionTimestamp") and p["spec"].get("nodeName") == node]


async def bound_pods(kube: kc.KubeClient, namespace: str, count: int) -> dict[str, dict[str, Any]] | None:
    found = await pods(kube, namespace)
    return found if len(found) == count and all(node_of(p) for p in found.values()) else None


async def test_vllm_pair_shares_one_reserved_device_which_is_freed_when_both_are_gone(
    kube: kc.KubeClient,
    namespace: str,
    objects: Objects,
    nodes: NodeFactory,
    run_kai: RunKai,
    reservation_namespace: str,
    tmp_path: Path,
) -> None:
    """Seed 003: vllm-test-07 (0.7) and vllm-test-02 (0.2) on one GPU node."""
    department, q = unique("dept"), unique("q")
    queue_objects = [
        DEPARTMENT.substitute(name=department),
        QUEUE.substitute(name=q, parent=department, gpu_quota=-1, gpu_limit=-1),
    ]
    for text in queue_objects:
        await objects.create(text)
    node = await nodes(gpus=2, gpu_memory_mib=81920)
    pair = [vllm("vllm-test-07", q, "0.7"), vllm("vllm-test-02", q, "0.2")]
    for text in pair:
        await objects.create(text)
    async with device_plugin(kube, reservation_namespace), run_kai(*sharing_flags(reservation_namespace)):
        found = await eventually(lambda: bound_pods(kube, namespace, 2), timeout=60)
        a, b = sorted(found.values(), key=lambda p: p["metadata"]["name"])
        assert node_of(a) == node_of(b) == node
        group = a["metadata"]["labels"][GROUP]
        assert b["metadata"]["labels"][GROUP] == group, "the pair shares one device"

        async def one_reservation() -> dict[str, Any] | None:
            found = await reservation_pods(kube, reservation_namespace, node)
            return found[0] if len(found) == 1 and found[0]["metadata"]["labels"].get(GROUP) == group else None

        reservation = await eventually(one_reservation)
        assert reservation["spec"]["nodeName"] == node
        assert reservation["metadata"]["labels"] == {"app": "kai-resource-reservation", GROUP: group}
        [container] = reservation["spec"]["containers"]
        assert container["resources"]["requests"] == {"nvidia.com/gpu": "1"}
        assert reservation["metadata"]["annotations"][UUID_ANNOTATION] == f"GPU-{node}-0"
        for pod in (a, b):
            assert pod["metadata"]["annotations"]["received-resource-type"] == "Fraction"

        async def told_no_device_settings() -> bool:
            # no mutating webhook in this test: the pods are bound and told how to get their device settings
            events = await items(kube, resources.EVENTS, namespace)
            told = {e["regarding"]["name"] for e in events if e.get("reason") == "GPUSharingEnvMissing"}
            return told == {a["metadata"]["name"], b["metadata"]["name"]}

        await eventually(told_no_device_settings)

        # the queue is charged the pair's fractions, as kai sim charges it for the same pods on the same node
        sim_node = await get(kube, resources.NODES, node)
        sim_node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node, "labels": sim_node["metadata"]["labels"]},
            "status": sim_node["status"],
        }
        sim_pods = [pod_of(text) for text in pair]
        sim_allocated = sim_queue_gpus(
            tmp_path, [*queue_objects, yaml.safe_dump(sim_node), *map(yaml.safe_dump, sim_pods)], q
        )
        assert sim_allocated == pytest.approx(0.9)

        async def charged() -> float | None:
            status = (await get(kube, resources.QUEUES, q)).get("status") or {}
            allocated = float((status.get("allocated") or {}).get("nvidia.com/gpu", "-1"))
            return allocated if allocated == sim_allocated else None

        await eventually(charged)

        # the shared device and its reservation pod count once: one of the node's two GPUs is left
        for name in ("whole-1", "whole-2"):
            await objects.create(POD.substitute(name=name, queue=q, priority="train", gpus=1, annotations=""))

        async def one_fits() -> list[str] | None:
            found = await pods(kube, namespace)
            pair = [found["whole-1"], found["whole-2"]]
            bound = [p["metadata"]["name"] for p in pair if node_of(p) == node]
            waiting = [
                p["metadata"]["name"]
                for p in pair
                if not node_of(p)
                and any(
                    c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
                    for c in (p.get("status") or {}).get("conditions") or []
                )
            ]
            return bound if len(bound) == 1 and len(waiting) == 1 else None

        await eventually(one_fits, timeout=60)
        for name in ("whole-1", "whole-2"):
            await finish_deletion(kube, namespace, name)

        # the seed's check: both Running on the node, same GPU-GROUP
        for pod in (a, b):
            await mark_running(kube, namespace, pod["metadata"]["name"])
        # both Deployments go; the kubelet stops their containers; the device is freed
        for name in ("vllm-test-07", "vllm-test-02"):
            await kube.request("DELETE", resources.DEPLOYMENTS.path(namespace=namespace, name=name))

        async def terminating_pods() -> list[str] | None:
            found = await pods(kube, namespace)
            names = [n for n, p in found.items() if p["metadata"].get("deletionTimestamp")]
            return names if len(names) == 2 else None

        for name in await eventually(terminating_pods, timeout=60):
            # still holding the device until the containers stop
            assert len(await reservation_pods(kube, reservation_namespace, node)) == 1
            await finish_deletion(kube, namespace, name)

        async def freed() -> bool:
            return not await reservation_pods(kube, reservation_namespace, node)

        await eventually(freed)


async def test_restart_mid_way_leaves_no_orphan_and_no_double_reservation(
    kube: kc.KubeClient,
    namespace: str,
    objects: Objects,
    nodes: NodeFactory,
    run_kai: RunKai,
    reservation_namespace: str,
) -> None:
    """kai run is killed while a fractional pod waits for its device; while it is down a running
    sharer's reservation pod is deleted. After the restart: the reservation pod of the abandoned bind
    is removed, the missing one is recreated, every device has exactly one."""
    q = (await queues(objects))["q"]
    node = await nodes(gpus=2, gpu_memory_mib=81920)
    await objects.create(vllm("first", q, "0.5"))
    async with device_plugin(kube, reservation_namespace) as plugin:
        async with run_kai(*sharing_flags(reservation_namespace)) as kai:
            first = await eventually(lambda: bound_pods(kube, namespace, 1), timeout=60)
            [first_pod] = first.values()
            first_group = first_pod["metadata"]["labels"][GROUP]
            # a whole GPU's worth of fractions that cannot share the first device
            plugin.paused = True
            await objects.create(vllm("second", q, "0.6"))

            async def waiting_reservation() -> list[dict[str, Any]] | None:
                found = await reservation_pods(kube, reservation_namespace, node)
                return found if len(found) == 2 else None

            await eventually(waiting_reservation, timeout=60)
            kai.kill()  # mid-bind: the second pod's reservation pod exists, the pod is not bound
        abandoned = {
            p["metadata"]["name"]
            for p in await reservation_pods(kube, reservation_namespace, node)
            if p["metadata"]["labels"][GROUP] != first_group
        }
        [kept] = [
            p
            for p in await reservation_pods(kube, reservation_namespace, node)
            if p["metadata"]["labels"][GROUP] == first_group
        ]
        await kube.request(
            "DELETE",
            resources.PODS.path(namespace=reservation_namespace, name=kept["metadata"]["name"]),
            body={"gracePeriodSeconds": 0},
        )
        plugin.paused = False
        async with run_kai(*sharing_flags(reservation_namespace)):
            found = await eventually(lambda: bound_pods(kube, namespace, 2), timeout=60)

            async def settled() -> dict[str, list[str]] | None:
                by_group: dict[str, list[str]] = {}
                for p in await reservation_pods(kube, reservation_namespace, node):
                    by_group.setdefault(p["metadata"]["labels"][GROUP], []).append(p["metadata"]["name"])
                groups = {p["metadata"]["labels"][GROUP] for p in found.values()}
                done = set(by_group) == groups and all(len(v) == 1 for v in by_group.values())
                return by_group if done and not abandoned & {n for v in by_group.values() for n in v} else None

            by_group = await eventually(settled, timeout=60)
        assert len(by_group) == 2, "two devices, one reservation pod each"
        assert all(node_of(p) == node for p in found.values())


CDI_POD = """
apiVersion: v1
kind: Pod
metadata:
  name: half
  labels: {kai.scheduler/queue: $queue}
  annotations: {gpu-fraction: "0.5", runai/shared-gpu-configmap: half-shared-gpu}
spec:
  schedulerName: kai-scheduler
  containers:
  - name: main
    image: example.invalid/idle
    env:  # as the mutating webhook leaves it
    - name: NVIDIA_VISIBLE_DEVICES
      valueFrom: {configMapKeyRef: {name: half-shared-gpu-0, key: NVIDIA_VISIBLE_DEVICES}}
"""


async def test_a_device_uuid_late_fails_the_reservation_once_then_the_pod_gets_the_cdi_name(
    kube: kc.KubeClient,
    namespace: str,
    objects: Objects,
    nodes: NodeFactory,
    run_kai: RunKai,
    reservation_namespace: str,
) -> None:
    """The device plugin does not answer within --resource-reservation-timeout: the pod is not bound,
    gets one GPUReservationFailed event (and no Scheduled one), and is scheduled again; once the UUID
    comes, the pod is bound, reported Scheduled once, and, with --gpu-cdi, reads the device's CDI name."""
    q = (await queues(objects))["q"]
    node = await nodes(gpus=1, gpu_memory_mib=81920)
    await objects.create(CDI_POD.replace("$queue", q))
    flags = (*sharing_flags(reservation_namespace), "--gpu-cdi", "--resource-reservation-timeout", "2")
    async with device_plugin(kube, reservation_namespace) as plugin:
        plugin.paused = True  # before kai starts: no UUID for the first reservation pod
        async with run_kai(*flags):

            async def failures() -> list[dict[str, Any]] | None:
                found = [
                    e
                    for e in await items(kube, resources.EVENTS, namespace)
                    if e.get("reason") == "GPUReservationFailed" and e["regarding"]["name"] == "half"
                ]
                return found or None

            [event] = await eventually(failures, timeout=60)
            assert event["type"] == "Warning"
            assert event["note"].startswith("GPU reservation failed: reservation pod ")
            assert event["note"].endswith(
                f"on node {node} reported no device UUID (run.ai/reserve_for_gpu_index) within 2s: is the NVIDIA "
                "device plugin running on the node, and can the reservation image start there?; the pod is scheduled "
                "again"
            )
            assert not node_of(await get(kube, resources.PODS, "half", namespace)), "no binding without the UUID"
            plugin.paused = False
            await eventually(lambda: bound_pods(kube, namespace, 1), timeout=60)
            [reservation] = await reservation_pods(kube, reservation_namespace, node)
            uuid = reservation["metadata"]["annotations"][UUID_ANNOTATION]
            configmap = await get(kube, resources.CONFIG_MAPS, "half-shared-gpu-0", namespace)
            assert configmap["data"]["NVIDIA_VISIBLE_DEVICES"] == f"k8s.device-plugin.nvidia.com/gpu={uuid}"
            assert await failures() == [event], "the event is not repeated each cycle"

            async def scheduled() -> list[str] | None:
                events = await items(kube, resources.EVENTS, namespace)
                found = [
                    e["note"] for e in events if e.get("reason") == "Scheduled" and e["regarding"]["name"] == "half"
                ]
                return found or None

            # reported assigned once: when it was bound, not at each attempt the reservation failed
            assert await eventually(scheduled) == [f"Successfully assigned {namespace}/half to {node}"]
