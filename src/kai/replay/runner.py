"""Replays an Alibaba `openb` trace through the real scheduling core, one seed and one policy at a time.

The cluster is built as API objects (a Node per trace node, labelled with its GPU model) and the
inflated arrival sequence as pending single-pod PodGroups in one unlimited queue; one snapshot
holds them all and one session places them in arrival order, each through the same statement,
fit, node scores and GPU policy that the allocate action uses. Pods only arrive (the published
protocol), so no time passes and nothing is evicted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec
import numpy as np

from kai.actions.common.placement import place_tasks
from kai.api.meta import ObjectMeta
from kai.api.node import GPU_MEMORY_LABEL, GPU_PRODUCT_LABEL, Node
from kai.api.pod import GpuShare, NodeSelectorRequirement, NodeSelectorTerm, Pod
from kai.api.podgroup import PodGroup
from kai.api.priority import default_priority_class
from kai.api.queue import Queue, QueueResource
from kai.core.model import TaskStatus
from kai.core.session import SchedulerConfig
from kai.core.snapshot_builder import PodState, build_snapshot
from kai.core.statement import Statement
from kai.plugins.fragmentation_policy import FragmentationState
from kai.replay import protocol, trace
from kai.scheduler.cycle import open_session

POLICIES = ("binpack", "spread", "fragmentation")
MIB = 2**20
QUEUE = "replay"
Progress = Callable[[int, int], None]


class SeedResult(msgspec.Struct, frozen=True, kw_only=True):
    policy: str
    seed: int
    metrics: protocol.ReplayMetrics
    curve: protocol.AllocationCurve


def _nodes(nodes: Sequence[trace.TraceNode]) -> list[Node]:
    out = []
    for n in nodes:
        labels = {"kubernetes.io/hostname": n.name, GPU_MEMORY_LABEL: "81920"}
        if n.gpu_model:
            labels[GPU_PRODUCT_LABEL] = n.gpu_model
        out.append(
            Node(
                meta=ObjectMeta(name=n.name, labels=labels),
                allocatable={
                    "cpu": float(n.cpu_milli),
                    "memory": float(n.memory_mib) * MIB,
                    "nvidia.com/gpu": float(n.num_gpu),
                    "pods": 1_000_000.0,  # the published protocol does not limit pods per node
                },
                taints=(),
                unschedulable=False,
                ready=True,
            )
        )
    return out


def _pod(index: int, pod: trace.TracePod) -> tuple[Pod, PodGroup]:
    name = f"a{index:06d}"
    requests: dict[str, float] = {"cpu": float(pod.cpu_milli), "memory": float(pod.memory_mib) * MIB}
    share = None
    if pod.num_gpu and pod.gpu_milli >= 1000:
        requests["nvidia.com/gpu"] = float(pod.num_gpu)
    elif pod.num_gpu:
        share = GpuShare(fraction=pod.gpu_milli / 1000.0, memory_mib=None, num_devices=pod.num_gpu)
    terms: tuple[NodeSelectorTerm, ...] = ()
    if pod.gpu_models:
        terms = (
            NodeSelectorTerm(
                expressions=(
                    NodeSelectorRequirement(key=GPU_PRODUCT_LABEL, operator="In", values=tuple(pod.gpu_models)),
                )
            ),
        )
    meta = ObjectMeta(name=name, namespace="trace", uid=name, creation_timestamp=float(index))
    return (
        Pod(
            meta=meta,
            scheduler_name="kai-scheduler",
            node_name="",
            phase="Pending",
            requests=requests,
            affinity_terms=terms,
            gpu_share=share,
        ),
        PodGroup(meta=meta, min_member=1, queue=QUEUE, priority_class_name="train", preemptibility=None, sub_groups=()),
    )


def _queues() -> list[Queue]:
    unlimited = {k: QueueResource(quota=-1.0, limit=-1.0, over_quota_weight=1.0) for k in ("gpu", "cpu", "memory")}
    return [
        Queue(
            meta=ObjectMeta(name="cluster", creation_timestamp=0.0),
            display_name="",
            parent=None,
            priority=100,
            resources=unlimited,
            preempt_min_runtime=None,
            reclaim_min_runtime=None,
        ),
        Queue(
            meta=ObjectMeta(name=QUEUE, creation_timestamp=1.0),
            display_name="",
            parent="cluster",
            priority=100,
            resources=unlimited,
            preempt_min_runtime=None,
            reclaim_min_runtime=None,
        ),
    ]


def replay_seed(
    *, data: trace.Trace, policy: str, load: float, seed: int, progress: Progress | None = None
) -> SeedResult:
    """One replay of the published protocol with one placement policy; deterministic given the seed."""
    if policy not in POLICIES:
        raise ValueError(f'unknown policy "{policy}"; use one of: {", ".join(POLICIES)}')
    cluster_gpus = sum(n.num_gpu for n in data.nodes)
    workload = protocol.inflate_workload(pods=data.pods, cluster_gpus=cluster_gpus, load=load, seed=seed)
    pods, groups = [], []
    for i, pod_index in enumerate(workload.order):
        pod, group = _pod(i, data.pods[int(pod_index)])
        pods.append(PodState(pod=pod, status=TaskStatus.PENDING, podgroup=group.name))
        groups.append(group)
    built = build_snapshot(
        now=0.0,
        nodes=_nodes(data.nodes),
        pods=pods,
        foreign_pods=[],
        podgroups=groups,
        queues=_queues(),
        priority_classes={"train": default_priority_class("train", 50)},
    )
    config = msgspec.structs.replace(
        SchedulerConfig(),
        actions=(),
        gpu_placement=policy,
        cpu_placement="binpack",
        gpu_device_policy="spread" if policy == "spread" else "binpack",
    )
    session = open_session(built.snapshot, config)
    placed = np.zeros(len(groups), dtype=np.bool_)
    jobs = built.snapshot.jobs  # sorted by namespace/name: arrival order, by the a<index> names
    for i, job in enumerate(jobs):
        stmt = Statement(session, action="replay")
        if place_tasks(session, stmt, job, session.pending_tasks(job), why=False) is None:
            stmt.commit()
            placed[i] = True
        else:
            stmt.discard()
        if progress is not None:
            progress(i + 1, len(jobs))
    curve = protocol.allocation_curve(
        request_gpu_milli=workload.request_gpu_milli, placed=placed, cluster_gpus=cluster_gpus
    )
    view = FragmentationState(session)
    target = protocol.target_from_pods(data.pods, models=view.models)
    metrics = protocol.replay_metrics(curve=curve, placed=placed, final_state=view.state(), target=target)
    return SeedResult(policy=policy, seed=seed, metrics=metrics, curve=curve)
