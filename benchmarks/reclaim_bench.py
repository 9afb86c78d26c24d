"""Benchmark: one full cycle (all five actions) on a busy cluster where reclaim and preempt have work.

Usage: python benchmarks/reclaim_bench.py [--nodes 1000] [--queues 20] [--running 20000] [--pending 500]
       [--seed 0]

The cluster (seeded numpy Generator): N nodes x 8 GPUs, each node running 8 one-GPU train pods
and CPU-only pods, 20,000 running pods in all, grouped into gangs and elastic jobs that belong to
the first half of the queues (which are therefore far over their fair share); every queue's GPU
quota is a 40th of the cluster. The pending jobs:
four in five are train gangs of 1..4 one- or two-GPU pods in the starved half of the queues
(reclaim), the rest are inference jobs in the busy queues (preempt). The figure reported is the
scheduling cycle time; snapshot building is reported separately.
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

GPUS_PER_NODE = 8


def _queue(name: str, parent: str | None, created: float, gpu_quota: float) -> Queue:
    res = {
        "gpu": QueueResource(quota=gpu_quota, limit=-1.0, over_quota_weight=1.0),
        "cpu": QueueResource(quota=-1.0, limit=-1.0, over_quota_weight=1.0),
        "memory": QueueResource(quota=-1.0, limit=-1.0, over_quota_weight=1.0),
    }
    return Queue(
        meta=ObjectMeta(name=name, creation_timestamp=created),
        display_name="",
        parent=parent,
        priority=100,
        resources=res,
        preempt_min_runtime=None,
        reclaim_min_runtime=None,
    )


def _pod(name: str, *, created: float, gpus: float, cpu: float, node: str = "") -> Pod:
    return Pod(
        meta=ObjectMeta(name=name, namespace="bench", creation_timestamp=created),
        scheduler_name="kai-scheduler",
        node_name=node,
        phase="Running" if node else "Pending",
        requests={"cpu": cpu, "memory": float(4 * 2**30), "nvidia.com/gpu": gpus},
    )


def _group(name: str, *, queue: str, created: float, min_member: int, priority_class: str) -> PodGroup:
    return PodGroup(
        meta=ObjectMeta(name=name, namespace="bench", uid=name, creation_timestamp=created),
        min_member=min_member,
        queue=queue,
        priority_class_name=priority_class,
        preemptibility=None,
        sub_groups=(),
    )


def synthetic(nodes: int, queues: int, running: int, pending: int, seed: int) -> dict[str, list[object]]:
    rng = np.random.default_rng(seed)
    node_objs = [
        Node(
            meta=ObjectMeta(name=f"node-{i:05d}", labels={"nvidia.com/gpu.memory": "81920"}),
            allocatable={"cpu": 128000.0, "memory": float(1024 * 2**30), "nvidia.com/gpu": 8.0, "pods": 110.0},
            taints=(),
            unschedulable=False,
            ready=True,
        )
        for i in range(nodes)
    ]
    queue_objs: list[object] = [_queue("root", None, 0.0, -1.0)]
    quota = nodes * GPUS_PER_NODE / queues / 2  # half the cluster is guaranteed, half shared over quota
    queue_objs += [_queue(f"q{q:03d}", "root", float(q + 1), quota) for q in range(queues)]
    busy = max(1, queues // 2)
    groups: list[object] = []
    states: list[object] = []
    # running pods: per node, GPU pods first, then CPU-only pods, gathered into jobs of 1..8 pods
    slots: list[tuple[str, float, float]] = []
    per_node = max(1, running // nodes)
    for i in range(nodes):
        for k in range(per_node):
            gpu_pod = k < GPUS_PER_NODE
            slots.append((f"node-{i:05d}", 1.0 if gpu_pod else 0.0, 1000.0 if gpu_pod else 4000.0))
    slots = slots[:running]
    made, g = 0, 0
    while made < len(slots):
        size = int(min(len(slots) - made, rng.integers(1, 9)))
        name = f"run-{g:06d}"
        elastic = bool(rng.random() < 0.3)
        groups.append(
            _group(name, queue=f"q{g % busy:03d}", created=float(g), min_member=1 if elastic else size,
                   priority_class="train")
        )
        for k in range(size):
            node, gpus, cpu = slots[made + k]
            states.append(PodState(
                pod=_pod(f"{name}-{k}", created=float(g), gpus=gpus, cpu=cpu, node=node),
                status=TaskStatus.RUNNING, node=node, start_time=float(g), podgroup=name,
            ))
        made += size
        g += 1
    for j in range(pending):
        name = f"pend-{j:05d}"
        reclaimer = rng.random() < 0.8
        queue = f"q{busy + j % max(1, queues - busy):03d}" if reclaimer else f"q{j % busy:03d}"
        size = int(rng.integers(1, 5)) if reclaimer else 1
        gpus = float(rng.choice([1, 2]))
        created = 100000.0 + j
        groups.append(_group(name, queue=queue, created=created, min_member=size,
                             priority_class="train" if reclaimer else "inference"))
        for k in range(size):
            states.append(PodState(
                pod=_pod(f"{name}-{k}", created=created, gpus=gpus, cpu=1000.0),
                status=TaskStatus.PENDING, podgroup=name,
            ))
    return {"nodes": node_objs, "queues": queue_objs, "podgroups": groups, "pods": states}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--queues", type=int, default=20)
    parser.add_argument("--running", type=int, default=20000)
    parser.add_argument("--pending", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    data = synthetic(args.nodes, args.queues, args.running, args.pending, args.seed)
    classes = {n: default_priority_class(n, v) for n, v in (("train", 50), ("build", 100), ("inference", 125))}
    t0 = time.perf_counter()
    built = build_snapshot(
        now=200000.0,
        nodes=data["nodes"],  # type: ignore[arg-type]
        pods=data["pods"],  # type: ignore[arg-type]
        foreign_pods=[],
        podgroups=data["podgroups"],  # type: ignore[arg-type]
        queues=data["queues"],  # type: ignore[arg-type]
        priority_classes=classes,
    )
    t1 = time.perf_counter()
    result = run_cycle(built.snapshot, SchedulerConfig())
    t2 = time.perf_counter()
    by_action: dict[str, int] = {}
    for eviction in result.evictions:
        by_action[eviction.action] = by_action.get(eviction.action, 0) + 1
    print(f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}")
    print(
        f"nodes={args.nodes} queues={args.queues} running pods={args.running} pending jobs={args.pending} "
        f"jobs={len(data['podgroups'])}"
    )
    print(f"snapshot build: {t1 - t0:.2f}s  full cycle (5 actions): {t2 - t1:.2f}s")
    print(f"placements: {len(result.placements)}  evictions: {len(result.evictions)} {dict(sorted(by_action.items()))}")


if __name__ == "__main__":
    main()
