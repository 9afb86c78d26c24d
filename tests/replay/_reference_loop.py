"""A minimal placement loop for tests and the slow experiment; the real replay goes through the core.

Policies (each picks a node, then devices inside it):
* fgd: smallest fragmentation increase (`kai.plugins.fragmentation.fgd_scores`), exact.
* fgd-int: the same with the authors' integer scores, int(100 * sigmoid(-increase / 1000)).
* bestfit: the authors' BestFit score, lowest 0.5 * (free cpu - cpu) / 128000 + 0.5 * (free GPU milli
  - GPU request) / 8000; a fractional task takes the fitting device with the least free share,
  whole GPUs the lowest-indexed idle devices.
* random: a uniformly random feasible node; a fractional task takes a uniformly random fitting
  device, whole GPUs the lowest-indexed idle devices.
Ties between nodes go to a seeded random node rank (kube-scheduler picks randomly among the best).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kai.plugins import fragmentation as frag
from kai.replay import protocol, trace

MAX_SPEC_CPU = 128000.0
MAX_SPEC_GPU = 8000.0


@dataclass(frozen=True, kw_only=True, slots=True)
class LoopResult:
    placed: npt.NDArray[np.bool_]
    final_state: frag.DeviceState
    metrics: protocol.ReplayMetrics
    curve: protocol.AllocationCurve


def _least_sufficient(free: npt.NDArray[np.float64], shape: frag.TaskShape) -> list[int]:
    key = np.where(free + frag.EPS >= shape.gpu_milli, free, np.inf)
    return [int(d) for d in np.argsort(key, kind="stable")[: shape.num_gpu]]


def choose(
    *,
    policy: str,
    state: frag.DeviceState,
    shape: frag.TaskShape,
    memory_mib: float,
    target: frag.TargetWorkload,
    tie_rank: npt.NDArray[np.int64],
    rng: np.random.Generator,
) -> tuple[int, list[int]] | None:
    if policy in ("fgd", "fgd-int"):
        scores = frag.fgd_scores(
            state=state, shape=shape, target=target, memory_mib=memory_mib, integer_scores=policy == "fgd-int"
        )
        node = scores.best_node(tie_rank=tie_rank)
        return None if node is None else (node, [int(d) for d in scores.devices[node]])
    feasible = np.flatnonzero(frag.feasible_nodes(state=state, shape=shape, memory_mib=memory_mib))
    if feasible.size == 0:
        return None
    if policy == "bestfit":
        left = (
            0.5 * (state.free_cpu[feasible] - shape.cpu_milli) / MAX_SPEC_CPU
            + 0.5 * (state.free_gpu[feasible].sum(axis=1) - shape.gpu_request_milli) / MAX_SPEC_GPU
        )
        tied = feasible[left == left.min()]
        node = int(tied[np.argmin(tie_rank[tied])])
    elif policy == "random":
        node = int(feasible[rng.integers(feasible.size)])
    else:
        raise ValueError(f"unknown policy {policy!r}")
    free = state.free_gpu[node]
    if shape.is_fractional and policy == "random":
        fitting = np.flatnonzero(free + frag.EPS >= shape.gpu_milli)
        return node, [int(fitting[rng.integers(fitting.size)])]
    return node, _least_sufficient(free, shape)


def run(
    *,
    nodes: Sequence[trace.TraceNode],
    pods: Sequence[trace.TracePod],
    policy: str,
    load: float,
    seed: int,
) -> LoopResult:
    state = protocol.initial_state(nodes)
    cluster_gpus = int(state.gpu_count.sum())
    workload = protocol.inflate_workload(pods=pods, cluster_gpus=cluster_gpus, load=load, seed=seed)
    target = protocol.target_from_pods(pods, models=state.models)
    rng = np.random.default_rng(seed)
    tie_rank = rng.permutation(state.node_count).astype(np.int64)
    placed = np.zeros(workload.order.size, dtype=np.bool_)
    for i, pod_index in enumerate(workload.order):
        pod = pods[int(pod_index)]
        shape = pod.shape
        choice = choose(
            policy=policy,
            state=state,
            shape=shape,
            memory_mib=pod.memory_mib,
            target=target,
            tie_rank=tie_rank,
            rng=rng,
        )
        if choice is None:
            continue
        node, devices = choice
        state = state.with_task(node=node, devices=devices, shape=shape, memory_mib=pod.memory_mib)
        placed[i] = True
    curve = protocol.allocation_curve(
        request_gpu_milli=workload.request_gpu_milli, placed=placed, cluster_gpus=cluster_gpus
    )
    metrics = protocol.replay_metrics(curve=curve, placed=placed, final_state=state, target=target)
    return LoopResult(placed=placed, final_state=state, metrics=metrics, curve=curve)
