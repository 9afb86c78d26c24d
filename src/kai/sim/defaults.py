"""What `kai sim` adds when the input leaves it out: the embedded cluster, priority classes, queues."""

from __future__ import annotations

from kai.api.meta import ObjectMeta
from kai.api.node import GPU_MEMORY_LABEL, GPU_PRODUCT_LABEL, Node
from kai.api.priority import DEFAULT_PRIORITY_CLASSES, PriorityClass, default_priority_class
from kai.api.queue import Queue, QueueResource

DEFAULT_QUEUE = "default-queue"
DEFAULT_PARENT_QUEUE = "default-parent-queue"
DEFAULT_START = "2026-01-01T00:00:00Z"


def default_nodes() -> list[Node]:
    """4 nodes, each 8 A100-80GB GPUs, 64 CPUs and 512Gi memory."""
    nodes = []
    for i in range(4):
        name = f"node-{i}"
        nodes.append(
            Node(
                meta=ObjectMeta(
                    name=name,
                    labels={
                        "kubernetes.io/hostname": name,
                        GPU_MEMORY_LABEL: "81920",
                        GPU_PRODUCT_LABEL: "NVIDIA-A100-SXM4-80GB",
                        "nvidia.com/gpu.count": "8",
                    },
                ),
                allocatable={
                    "cpu": 64000.0,
                    "memory": float(512 * 2**30),
                    "nvidia.com/gpu": 8.0,
                    "pods": 110.0,
                },
                taints=(),
                unschedulable=False,
                ready=True,
            )
        )
    return nodes


def default_priority_classes() -> list[PriorityClass]:
    return [default_priority_class(name, value) for name, value in DEFAULT_PRIORITY_CLASSES.items()]


def default_queues(*, created: float) -> list[Queue]:
    """KAI's Helm defaults: default-parent-queue with child default-queue (quota 0, limit -1, weight 1)."""
    res = {k: QueueResource(quota=0.0, limit=-1.0, over_quota_weight=1.0) for k in ("gpu", "cpu", "memory")}
    return [
        Queue(
            meta=ObjectMeta(name=DEFAULT_PARENT_QUEUE, creation_timestamp=created),
            display_name="",
            parent=None,
            priority=100,
            resources=res,
            preempt_min_runtime=None,
            reclaim_min_runtime=None,
        ),
        Queue(
            meta=ObjectMeta(name=DEFAULT_QUEUE, creation_timestamp=created),
            display_name="",
            parent=DEFAULT_PARENT_QUEUE,
            priority=100,
            resources=res,
            preempt_min_runtime=None,
            reclaim_min_runtime=None,
        ),
    ]
