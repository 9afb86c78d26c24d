"""Benchmark: one allocate cycle on a synthetic cluster (N nodes x 8 GPUs, M pending pods in gangs).

Usage: python benchmarks/allocate_bench.py [--nodes 1000] [--pods 10000] [--queues 20] [--seed 0]

The cluster is generated with a seeded numpy Generator: gangs of 1..64 pods, each pod asking for
1, 2, 4 or 8 GPUs, spread over the queues. The figure reported is pods placed per second of the
scheduling cycle itself (snapshot building is reported separately).
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from kai.api.meta import ObjectMeta
from kai.api.node import Node
from kai.api.pod import Pod
from kai.api.podgroup import PodGroup
from kai.api.priority import default_priority_class
from kai.api.queue import Queue, QueueResource
from kai.core.model import TaskStatus
from kai.core.session import SchedulerConfig
from kai.core.snapshot_builder import PodState, build_snapshot
from kai.scheduler.cycle import run_cycle


def synthetic(nodes: int, pods: int, queues: int, seed: int) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    node_objs = [
        Node(
            meta=ObjectMeta(name=f"node-{i:05d}", labels={"nvidia.com/gpu.memory": "81920"}),
            allocatable={
                "cpu": 128000.0,
                "memory": float(1024 * 2**30),
                "nvidia.com/gpu": 8.0,
                "pods": 110.0,
            },
            taints=(),
            unschedulable=False,
            ready=True,
        )
        for i in range(nodes)
    ]
    unlimited = {
        k: QueueResource(quota=-1.0, limit=-1.0, over_quota_weight=1.0) for k in ("gpu", "cpu", "memory")
    }
    queue_objs = [
        Queue(
            meta=ObjectMeta(name="root", creation_timestamp=0.0),
            display_name="",
            parent=None,
            priority=100,
            resources=unlimited,
            preempt_min_runtime=None,
            reclaim_min_runtime=None,
        )
    ]
    share = nodes * 8 / queues
    for q in range(queues):
        res = {
            "gpu": QueueResource(quota=share, limit=-1.0, over_quota_weight=1.0),
            "cpu": QueueResource(quota=-1.0, limit=-1.0, over_quota_weight=1.0),
            "memory": QueueResource(quota=-1.0, limit=-1.0, over_quota_weight=1.0),
        }
        queue_objs.append(
            Queue(
                meta=ObjectMeta(name=f"q{q:03d}", creation_timestamp=float(q + 1)),
                display_name="",
                parent="root",
                priority=100,
                resources=res,
                preempt_min_runtime=None,
                reclaim_min_runtime=None,
            )
        )
    groups, states = [], []
    made = 0
    g = 0
    while made < pods:
        size = int(min(pods - made, rng.integers(1, 65)))
        gpus = float(rng.choice([1, 2, 4, 8]))
        name = f"job-{g:06d}"
        groups.append(
            PodGroup(
                meta=ObjectMeta(name=name, namespace="bench", uid=name, creation_timestamp=float(g)),
                min_member=size,
                queue=f"q{g % queues:03d}",
                priority_class_name="train",
                preemptibility=None,
                sub_groups=(),
            )
        )
        for i in range(size):
            pod = Pod(
                meta=ObjectMeta(name=f"{name}-{i}", namespace="bench", creation_timestamp=float(g)),
                scheduler_name="kai-scheduler",
                node_name="",
                phase="Pending",
                requests={"cpu": 4000.0, "memory": float(32 * 2**30), "nvidia.com/gpu": gpus},
            )
            states.append(PodState(pod=pod, status=TaskStatus.PENDING, podgroup=name))
        made += size
        g += 1
    return {"nodes": node_objs, "queues": queue_objs, "podgroups": groups, "pods": states}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--queues", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    data = synthetic(args.nodes, args.pods, args.queues, args.seed)
    classes = {n: default_priority_class(n, v) for n, v in (("train", 50), ("build", 100))}
    t0 = time.perf_counter()
    built = build_snapshot(
        now=0.0,
        nodes=data["nodes"],
        pods=data["pods"],
        foreign_pods=[],  # type: ignore[arg-type]
        podgroups=data["podgroups"],
        queues=data["queues"],
        priority_classes=classes,
    )  # type: ignore[arg-type]
    t1 = time.perf_counter()
    result = run_cycle(built.snapshot, SchedulerConfig(actions=("allocate",)))
    t2 = time.perf_counter()
    placed = len(result.placements)
    print(f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}")
    print(f"nodes={args.nodes} pods={args.pods} queues={args.queues} jobs={len(data['podgroups'])}")  # type: ignore[arg-type]
    print(f"snapshot build: {t1 - t0:.2f}s  allocate cycle: {t2 - t1:.2f}s  placed: {placed}")
    print(f"pods placed per second (cycle): {placed / (t2 - t1):.0f}")


if __name__ == "__main__":
    main()
