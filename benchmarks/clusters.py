"""Seeded generators for the clusters the performance targets are measured on.

Every generator takes its sizes and a seed and returns the same cluster for the same arguments
(numpy's `default_rng(seed)`), so a figure can be reproduced and compared across commits:

* `allocate_manifests` / `allocate_cluster`: target 1, the `kai sim` input (a JSON `v1 List`) and the
  same cluster as typed objects: N nodes x 8 GPUs, 20 queues, M pending pods in gangs of 1..64 pods
  of 1, 2, 4 or 8 GPUs.
* `reclaim_cluster`: target 2, a full cluster where reclaim and preempt have work (queues with a GPU
  quota under one root; half of them hold every running pod, the other half are starving).
* `starving_cluster`: target 8, a full cluster where reclaim cannot help: departments with GPU quota
  -1 as in the seeds' queues (each deserves what it asks), every GPU busy in the first half of the
  departments, the leaf queues of the second half starving.

The in-process ones return typed API objects (`Cluster`), ready for `build_snapshot`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kai.api.meta import ObjectMeta
from kai.api.node import Node
from kai.api.pod import Pod
from kai.api.podgroup import PodGroup
from kai.api.priority import PriorityClass, default_priority_class
from kai.api.queue import Queue, QueueResource
from kai.core.model import TaskStatus
from kai.core.snapshot_builder import BuiltSnapshot, PodState, build_snapshot

GPUS_PER_NODE = 8
NODE_ALLOCATABLE = {"cpu": 128000.0, "memory": float(1024 * 2**30), "nvidia.com/gpu": 8.0, "pods": 110.0}
NOW = 200000.0  # the cycle's clock: after every creation time below


@dataclass(frozen=True, kw_only=True, slots=True)
class Cluster:
    """Typed objects for `build_snapshot`."""

    nodes: list[Node]
    queues: list[Queue]
    podgroups: list[PodGroup]
    pods: list[PodState]
    priority_classes: dict[str, PriorityClass]

    def built(self, now: float = NOW) -> BuiltSnapshot:
        """The snapshot builder's result for this cluster at `now` (no foreign pods)."""
        return build_snapshot(
            now=now,
            nodes=self.nodes,
            pods=self.pods,
            foreign_pods=[],
            podgroups=self.podgroups,
            queues=self.queues,
            priority_classes=self.priority_classes,
        )

    @property
    def running(self) -> int:
        return sum(1 for p in self.pods if p.status == TaskStatus.RUNNING)

    @property
    def pending_jobs(self) -> int:
        pending = {p.podgroup for p in self.pods if p.status == TaskStatus.PENDING}
        return len(pending)


def _classes() -> dict[str, PriorityClass]:
    return {n: default_priority_class(n, v) for n, v in (("train", 50), ("build", 100), ("inference", 125))}


def _node(i: int) -> Node:
    return Node(
        meta=ObjectMeta(name=f"node-{i:05d}", labels={"nvidia.com/gpu.memory": "81920"}),
        allocatable=dict(NODE_ALLOCATABLE),
        taints=(),
        unschedulable=False,
        ready=True,
    )


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


def _running_jobs(
    rng: np.random.Generator, *, nodes: int, running: int, queues: list[str]
) -> tuple[list[PodGroup], list[PodState]]:
    """Per node 8 one-GPU pods then CPU-only pods, gathered into gangs and elastic jobs of 1..8 pods,
    dealt round-robin over `queues`."""
    slots: list[tuple[str, float, float]] = []
    per_node = max(1, running // nodes)
    for i in range(nodes):
        for k in range(per_node):
            gpu_pod = k < GPUS_PER_NODE
            slots.append((f"node-{i:05d}", 1.0 if gpu_pod else 0.0, 1000.0 if gpu_pod else 4000.0))
    slots = slots[:running]
    groups: list[PodGroup] = []
    states: list[PodState] = []
    made, g = 0, 0
    while made < len(slots):
        size = min(len(slots) - made, int(rng.integers(1, 9)))
        name = f"run-{g:06d}"
        elastic = bool(rng.random() < 0.3)
        groups.append(
            _group(
                name,
                queue=queues[g % len(queues)],
                created=float(g),
                min_member=1 if elastic else size,
                priority_class="train",
            )
        )
        for k in range(size):
            node, gpus, cpu = slots[made + k]
            states.append(
                PodState(
                    pod=_pod(f"{name}-{k}", created=float(g), gpus=gpus, cpu=cpu, node=node),
                    status=TaskStatus.RUNNING,
                    node=node,
                    start_time=float(g),
                    podgroup=name,
                )
            )
        made += size
        g += 1
    return groups, states


def _pending_job(
    name: str, *, queue: str, created: float, size: int, gpus: float, priority_class: str
) -> tuple[PodGroup, list[PodState]]:
    group = _group(name, queue=queue, created=created, min_member=size, priority_class=priority_class)
    pods = [
        PodState(
            pod=_pod(f"{name}-{k}", created=created, gpus=gpus, cpu=1000.0), status=TaskStatus.PENDING, podgroup=name
        )
        for k in range(size)
    ]
    return group, pods


def reclaim_cluster(
    *, nodes: int, queues: int = 20, running: int | None = None, pending: int | None = None, seed: int = 0
) -> Cluster:
    """Target 2: N nodes x 8 GPUs, 20 running pods per node (8 one-GPU train pods, the rest CPU-only) in
    the first half of the queues, nodes/2 pending jobs: four in five are train gangs of 1..4 one- or
    two-GPU pods in the starved half (reclaim), the rest one-pod inference jobs in the busy half (preempt).
    Every queue's GPU quota is a 40th of the cluster (half the cluster guaranteed, half shared)."""
    running = 20 * nodes if running is None else running
    pending = nodes // 2 if pending is None else pending
    rng = np.random.default_rng(seed)
    quota = nodes * GPUS_PER_NODE / queues / 2
    queue_objs = [_queue("root", None, 0.0, -1.0)]
    queue_objs += [_queue(f"q{q:03d}", "root", float(q + 1), quota) for q in range(queues)]
    busy = max(1, queues // 2)
    groups, states = _running_jobs(rng, nodes=nodes, running=running, queues=[f"q{q:03d}" for q in range(busy)])
    for j in range(pending):
        reclaimer = rng.random() < 0.8
        queue = f"q{busy + j % max(1, queues - busy):03d}" if reclaimer else f"q{j % busy:03d}"
        size = int(rng.integers(1, 5)) if reclaimer else 1
        gpus = float(rng.choice([1, 2]))
        group, pods = _pending_job(
            f"pend-{j:05d}",
            queue=queue,
            created=100000.0 + j,
            size=size,
            gpus=gpus,
            priority_class="train" if reclaimer else "inference",
        )
        groups.append(group)
        states += pods
    return Cluster(
        nodes=[_node(i) for i in range(nodes)],
        queues=queue_objs,
        podgroups=groups,
        pods=states,
        priority_classes=_classes(),
    )


def starving_cluster(
    *, nodes: int, departments: int = 4, teams: int = 5, pending: int | None = None, seed: int = 0
) -> Cluster:
    """Target 8: departments with GPU (and CPU, memory) quota -1, limit -1, weight 1, as in the seeds'
    queues, each with `teams` leaf queues of quota -1; N nodes x 8 GPUs with 20 running train pods per
    node (every GPU busy) in the leaves of the first half of the departments; nodes/2 pending train gangs
    of 1..4 one- or two-GPU pods in the leaves of the second half. Every department deserves what it
    asks, so no reclaim scenario is valid and no pending job can run."""
    pending = nodes // 2 if pending is None else pending
    rng = np.random.default_rng(seed)
    queue_objs: list[Queue] = []
    leaves: list[list[str]] = []
    created = 0.0
    for d in range(departments):
        dept = f"department-{d}"
        queue_objs.append(_queue(dept, None, created, -1.0))
        created += 1
        names = []
        for t in range(teams):
            name = f"d{d}-team-{t}"
            queue_objs.append(_queue(name, dept, created, -1.0))
            created += 1
            names.append(name)
        leaves.append(names)
    half = max(1, departments // 2)
    busy = [q for names in leaves[:half] for q in names]
    starving = [q for names in leaves[half:] for q in names] or busy
    groups, states = _running_jobs(rng, nodes=nodes, running=20 * nodes, queues=busy)
    for j in range(pending):
        size = int(rng.integers(1, 5))
        gpus = float(rng.choice([1, 2]))
        group, pods = _pending_job(
            f"pend-{j:05d}",
            queue=starving[j % len(starving)],
            created=100000.0 + j,
            size=size,
            gpus=gpus,
            priority_class="train",
        )
        groups.append(group)
        states += pods
    return Cluster(
        nodes=[_node(i) for i in range(nodes)],
        queues=queue_objs,
        podgroups=groups,
        pods=states,
        priority_classes=_classes(),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Gang:
    """One pending gang of target 1: `size` pods of `gpus` GPUs each, minMember = size."""

    name: str
    queue: str
    size: int
    gpus: int
    created: float


def allocate_gangs(*, pods: int, queues: int = 20, seed: int = 0, largest: int = 64) -> list[Gang]:
    """Gangs of 1..64 pods (1..`largest`) of 1, 2, 4 or 8 GPUs until `pods` pods, dealt round-robin over
    the queues."""
    rng = np.random.default_rng(seed)
    gangs: list[Gang] = []
    made = 0
    while made < pods:
        g = len(gangs)
        size = min(pods - made, int(rng.integers(1, largest + 1)))
        gpus = int(rng.choice([1, 2, 4, 8]))
        gangs.append(Gang(name=f"job-{g:06d}", queue=f"q{g % queues:03d}", size=size, gpus=gpus, created=float(g)))
        made += size
    return gangs


def allocate_cluster(*, nodes: int, pods: int, queues: int = 20, seed: int = 0, largest: int = 64) -> Cluster:
    """Target 1's cluster as typed objects (the same one `allocate_manifests` writes as JSON); gangs of
    at most `largest` pods."""
    queue_objs = [_queue("root", None, 0.0, -1.0)]
    share = nodes * GPUS_PER_NODE / queues
    queue_objs += [_queue(f"q{q:03d}", "root", float(q + 1), share) for q in range(queues)]
    groups: list[PodGroup] = []
    states: list[PodState] = []
    for gang in allocate_gangs(pods=pods, queues=queues, seed=seed, largest=largest):
        groups.append(
            _group(gang.name, queue=gang.queue, created=gang.created, min_member=gang.size, priority_class="train")
        )
        for i in range(gang.size):
            pod = Pod(
                meta=ObjectMeta(name=f"{gang.name}-{i}", namespace="bench", creation_timestamp=gang.created),
                scheduler_name="kai-scheduler",
                node_name="",
                phase="Pending",
                requests={"cpu": 4000.0, "memory": float(32 * 2**30), "nvidia.com/gpu": float(gang.gpus)},
            )
            states.append(PodState(pod=pod, status=TaskStatus.PENDING, podgroup=gang.name))
    return Cluster(
        nodes=[_node(i) for i in range(nodes)],
        queues=queue_objs,
        podgroups=groups,
        pods=states,
        priority_classes=_classes(),
    )


def allocate_manifests(*, nodes: int, pods: int, queues: int = 20, seed: int = 0) -> dict[str, Any]:
    """Target 1: the `kai sim` input as a `v1 List`: nodes, queues (a root, 20 leaves with an equal GPU
    quota), PodGroups (gangs of 1..64 pods, minMember = size) and their pending pods (1, 2, 4 or 8 GPUs)."""
    items: list[dict[str, Any]] = []
    for i in range(nodes):
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"node-{i:05d}", "labels": {"nvidia.com/gpu.memory": "81920"}},
                "status": {"allocatable": {"cpu": "128", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"}},
            }
        )

    def queue(name: str, parent: str | None, gpu_quota: float) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "resources": {
                "gpu": {"quota": gpu_quota, "limit": -1, "overQuotaWeight": 1},
                "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
            }
        }
        if parent is not None:
            spec["parentQueue"] = parent
        return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}

    items.append(queue("root", None, -1))
    share = nodes * GPUS_PER_NODE / queues
    items += [queue(f"q{q:03d}", "root", share) for q in range(queues)]
    for gang in allocate_gangs(pods=pods, queues=queues, seed=seed):
        items.append(
            {
                "apiVersion": "scheduling.run.ai/v2alpha2",
                "kind": "PodGroup",
                "metadata": {"name": gang.name, "namespace": "bench"},
                "spec": {"minMember": gang.size, "queue": gang.queue, "priorityClassName": "train"},
            }
        )
        requests = {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": str(gang.gpus)}
        for i in range(gang.size):
            items.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{gang.name}-{i}",
                        "namespace": "bench",
                        "annotations": {"pod-group-name": gang.name},
                        "labels": {"kai.scheduler/queue": gang.queue},
                    },
                    "spec": {
                        "schedulerName": "kai-scheduler",
                        "containers": [{"name": "main", "image": "trainer", "resources": {"requests": requests}}],
                    },
                }
            )
    return {"apiVersion": "v1", "kind": "List", "items": items}
