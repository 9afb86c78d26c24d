"""What tests do to a cluster that has no kubelet: make Ready GPU nodes and play the kubelet for pods.

The control plane runs no kubelet (see `../shared/k8s/README.md`): a Node is an API object the test
creates with capacity and a Ready condition (the admission plugin's `not-ready` taint is then
removed with a merge patch), a bound pod runs only when the test marks it Running/Ready, and a
deleted pod stays Terminating until the test deletes it again with grace period 0.
"""

from __future__ import annotations

from typing import Any

from kai.kubernetes import client as kc
from kai.kubernetes import resources


async def create_gpu_node(
    client: kc.KubeClient,
    name: str,
    *,
    gpus: int = 8,
    cpu: str = "64",
    memory: str = "512Gi",
    pods: str = "110",
    gpu_memory_mib: int | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Create a Ready, schedulable Node with `gpus` nvidia.com/gpu; return it as the server has it."""
    node_labels = {"kubernetes.io/hostname": name, **(labels or {})}
    if gpu_memory_mib is not None:
        node_labels["nvidia.com/gpu.memory"] = str(gpu_memory_mib)
    capacity = {"cpu": cpu, "memory": memory, "pods": pods, "nvidia.com/gpu": str(gpus)}
    await client.request(
        "POST",
        resources.NODES.path(),
        body={
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": node_labels},
            "status": {
                "capacity": capacity,
                "allocatable": capacity,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            },
        },
    )
    return await client.request(
        "PATCH", resources.NODES.path(name=name), body={"spec": {"taints": None}}, content_type=kc.MERGE_PATCH
    )


async def create_pod(
    client: kc.KubeClient,
    namespace: str,
    name: str,
    *,
    scheduler_name: str = "kai-scheduler",
    gpus: int = 0,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Create a pending pod with one container (requesting `gpus` if any)."""
    container: dict[str, Any] = {"name": "main", "image": "example.invalid/idle"}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    metadata: dict[str, Any] = {"name": name, "labels": labels or {}, "annotations": annotations or {}}
    return await client.request(
        "POST",
        resources.PODS.path(namespace=namespace),
        body={
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": {"schedulerName": scheduler_name, "containers": [container], "terminationGracePeriodSeconds": 30},
        },
    )


async def mark_running(client: kc.KubeClient, namespace: str, name: str) -> dict[str, Any]:
    """Play the kubelet for a bound pod: phase Running with the Ready and PodScheduled conditions."""
    conditions = [
        {"type": condition, "status": "True"}
        for condition in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
    ]
    return await client.request(
        "PATCH",
        resources.PODS.path(namespace=namespace, name=name, subresource="status"),
        body={"status": {"phase": "Running", "conditions": conditions}},
        content_type=kc.MERGE_PATCH,
    )


async def finish_deletion(client: kc.KubeClient, namespace: str, name: str) -> None:
    """Play the kubelet for a Terminating pod: delete it for good (grace period 0); gone is fine."""
    try:
        await client.request(
            "DELETE", resources.PODS.path(namespace=namespace, name=name), body={"gracePeriodSeconds": 0}
        )
    except kc.ApiError as err:
        if err.code != 404:
            raise
