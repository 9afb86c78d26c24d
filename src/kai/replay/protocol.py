"""The FGD paper's workload-inflation protocol and its placement-quality metrics, as pure functions.

Why: to compare placement policies the way Weng et al. (USENIX ATC '23) did, every policy must see
the same arrival sequence for a given seed, and the results must be summarised with the same
measures. Restated from the authors' simulator (hkust-adsl/kubernetes-scheduler-simulator:
`SortClusterPods`, `TunePodsByNodeTotalResource`, `ClusterGpuFragReport`, and the analysis scripts):

Inflation (`inflate_workload`), for a target `load` (1.3 in the paper) and a seed:
1. The trace's pods are sorted by name and shuffled with the seed.
2. GPU request of a pod = num_gpu * gpu_milli (milli-GPUs); target = load x cluster GPUs x 1000.
3. If the pods request more than the target, pods are removed uniformly at random until the total
   is within the target.
4. If they request less, pods are drawn uniformly with replacement from the (name-sorted) trace and
   appended after the shuffled originals. Drawing stops at the first pod for which
   total + gpu_milli exceeds the target. Note the authors test the per-device share gpu_milli, not
   num_gpu * gpu_milli, so the total can end up to 7 GPUs above the target (after an 8-GPU pod) and
   stays above target - 1000.
Pods only arrive: nothing departs, and creation/deletion times are not used.

The numpy Generator stream differs from Go's math/rand, so a given seed does not reproduce the
authors' exact sequence, only the protocol.

Metrics, with "allocated" meaning the GPU milli held by placed pods (a 0.5-GPU pod counts 500):
* allocation ratio curve: allocated / cluster GPU milli (%) after each arrival, against the
  cumulative GPU request of arrived pods (placed or not) / cluster GPU milli (%);
* the ratio right after arrived load first reaches 100%, and the final ratio;
* unallocated GPUs = cluster GPUs - allocated GPUs at the end;
* fragmented share of idle GPUs = sum of node fragmentation / idle GPU milli (%), with the
  fragmentation measure of `kai.plugins.fragmentation` against the target workload.

Pure, no side effects; reading the trace is `kai.replay.trace`'s job.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import msgspec
import numpy as np
import numpy.typing as npt

from kai.plugins import fragmentation
from kai.replay import trace

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

PAPER_LOAD = 1.3  # the paper inflates every trace to 130% of the cluster's GPU capacity


class InflatedWorkload(msgspec.Struct, frozen=True, kw_only=True):
    """An arrival sequence: `order[i]` is the index (into the trace's pod list) of the i-th arrival."""

    order: IntArray
    is_copy: BoolArray  # True for arrivals drawn with replacement beyond the original list
    request_gpu_milli: IntArray  # num_gpu * gpu_milli of each arrival
    target_gpu_milli: float

    @property
    def total_gpu_milli(self) -> int:
        return int(self.request_gpu_milli.sum())


def inflate_workload(
    *, pods: Sequence[trace.TracePod], cluster_gpus: int, load: float = PAPER_LOAD, seed: int
) -> InflatedWorkload:
    """The arrival sequence for one seed (see the module docstring). Deterministic given the seed."""
    if cluster_gpus <= 0:
        raise ValueError(f"cluster_gpus must be positive, got {cluster_gpus}")
    if load <= 0:
        raise ValueError(f"load must be positive, got {load}")
    if not pods:
        raise ValueError("the pod list is empty. To fix: replay a trace with at least one pod")
    rng = np.random.default_rng(seed)
    by_name = np.array(sorted(range(len(pods)), key=lambda i: (pods[i].name, i)), dtype=np.int64)
    request = np.array([p.gpu_request_milli for p in pods], dtype=np.int64)
    share = np.array([p.gpu_milli for p in pods], dtype=np.int64)
    target = load * cluster_gpus * fragmentation.MILLI

    # 1. Shuffle the name-sorted originals.
    order = by_name[rng.permutation(len(pods))]
    total = int(request[order].sum())

    # 3. Too much: remove uniformly random pods until the total fits the target.
    if total > target:
        removal = rng.permutation(order.size)
        remaining_after = total - np.cumsum(request[order[removal]])
        removed = int(np.argmax(remaining_after <= target)) + 1
        keep = np.ones(order.size, dtype=np.bool_)
        keep[removal[:removed]] = False
        order = order[keep]
        copies = np.zeros(0, dtype=np.int64)
    elif total == target:
        copies = np.zeros(0, dtype=np.int64)
    else:
        # 4. Too little: append draws with replacement until the next one would overshoot.
        if not np.any(share > 0):
            raise ValueError(
                "the pods request no GPUs, so no number of copies reaches the target load. "
                "To fix: replay a pod list that contains GPU pods"
            )
        drawn: list[IntArray] = []
        while True:
            batch = by_name[rng.integers(0, len(pods), size=max(64, int((target - total) / 500.0)))]
            before = total + np.cumsum(request[batch]) - request[batch]
            over = np.flatnonzero(before + share[batch] > target)
            if over.size:
                drawn.append(batch[: over[0]])
                total = int(before[over[0]])
                break
            drawn.append(batch)
            total = int(before[-1] + request[batch[-1]])
        copies = np.concatenate(drawn)

    sequence = np.concatenate([order, copies])
    return InflatedWorkload(
        order=_frozen(sequence),
        is_copy=_frozen(np.concatenate([np.zeros(order.size, dtype=np.bool_), np.ones(copies.size, np.bool_)])),
        request_gpu_milli=_frozen(request[sequence]),
        target_gpu_milli=float(target),
    )


def initial_state(nodes: Sequence[trace.TraceNode]) -> fragmentation.DeviceState:
    """An empty cluster: every device fully free. Models are the sorted distinct node models."""
    if not nodes:
        raise ValueError("the node list is empty. To fix: replay a trace with at least one node")
    models = tuple(sorted({n.gpu_model for n in nodes if n.gpu_model}))
    index = {name: i for i, name in enumerate(models)}
    gpu_count = np.array([n.num_gpu for n in nodes], dtype=np.int64)
    width = max(int(gpu_count.max()), 1)
    free_gpu = np.where(np.arange(width)[None, :] < gpu_count[:, None], fragmentation.MILLI, 0.0)
    return fragmentation.DeviceState(
        free_cpu=np.array([n.cpu_milli for n in nodes], dtype=np.float64),
        free_memory=np.array([n.memory_mib for n in nodes], dtype=np.float64),
        free_gpu=free_gpu,
        gpu_count=gpu_count,
        gpu_model=np.array([index.get(n.gpu_model, -1) for n in nodes], dtype=np.int64),
        models=models,
    )


def target_from_pods(
    pods: Sequence[trace.TracePod],
    *,
    models: Sequence[str],
    popularity_threshold: float = fragmentation.DEFAULT_POPULARITY_THRESHOLD,
) -> fragmentation.TargetWorkload:
    """The paper's target workload: the popular shapes of the original (uninflated) pod list."""
    distribution = fragmentation.TaskShapeDistribution.from_shapes(p.shape for p in pods)
    return distribution.target(models=models, popularity_threshold=popularity_threshold)


class AllocationCurve(msgspec.Struct, frozen=True, kw_only=True):
    """Per arrival: cumulative arrived GPU request and allocated GPU milli, as % of cluster GPUs."""

    arrived_pct: FloatArray
    allocated_pct: FloatArray

    def at(self, arrived_pct: float) -> float | None:
        """Allocation right after the first arrival at which the arrived request reaches
        `arrived_pct`; None if the sequence never gets there."""
        reached = np.flatnonzero(self.arrived_pct >= arrived_pct - 1e-9)
        return None if reached.size == 0 else float(self.allocated_pct[reached[0]])


def allocation_curve(
    *,
    request_gpu_milli: Sequence[float] | npt.NDArray[np.generic],
    placed: Sequence[bool] | BoolArray,
    cluster_gpus: int,
) -> AllocationCurve:
    """The allocation ratio as a function of arrived load; pods only arrive, so both are cumulative."""
    if cluster_gpus <= 0:
        raise ValueError(f"cluster_gpus must be positive, got {cluster_gpus}")
    request = np.asarray(request_gpu_milli, dtype=np.float64)
    placed_mask = np.asarray(placed, dtype=np.bool_)
    if request.shape != placed_mask.shape or request.ndim != 1:
        raise ValueError("request_gpu_milli and placed must be 1-D and of the same length")
    scale = 100.0 / (cluster_gpus * fragmentation.MILLI)
    return AllocationCurve(
        arrived_pct=_frozen(np.cumsum(request) * scale),
        allocated_pct=_frozen(np.cumsum(np.where(placed_mask, request, 0.0)) * scale),
    )


class ReplayMetrics(msgspec.Struct, frozen=True, kw_only=True):
    cluster_gpus: int
    arrived_pct: float  # total request of all arrivals, % of cluster GPUs
    allocation_at_full_load_pct: float | None  # right after arrived load first reaches 100%
    final_allocation_pct: float
    unallocated_gpus: float
    fragmented_idle_pct: float  # fragmented share of the idle GPU milli at the end
    arrivals: int
    unplaced: int  # arrivals that found no node


def replay_metrics(
    *,
    curve: AllocationCurve,
    placed: Sequence[bool] | BoolArray,
    final_state: fragmentation.DeviceState,
    target: fragmentation.TargetWorkload,
) -> ReplayMetrics:
    """Summarise one replay. The final state must be the one the placements produced (checked:
    its allocated GPU milli must match the curve's)."""
    cluster_gpus = int(final_state.gpu_count.sum())
    final_pct = float(curve.allocated_pct[-1]) if curve.allocated_pct.size else 0.0
    frag_milli, idle_milli = fragmentation.cluster_fragmentation(state=final_state, target=target)
    state_pct = 100.0 - 100.0 * idle_milli / (cluster_gpus * fragmentation.MILLI)
    if abs(state_pct - final_pct) > 1e-6:
        raise ValueError(
            f"the final state has {state_pct:.4f}% of GPUs allocated but the curve ends at {final_pct:.4f}%. "
            "To fix: pass the state that the recorded placements produced"
        )
    placed_mask = np.asarray(placed, dtype=np.bool_)
    return ReplayMetrics(
        cluster_gpus=cluster_gpus,
        arrived_pct=float(curve.arrived_pct[-1]) if curve.arrived_pct.size else 0.0,
        allocation_at_full_load_pct=curve.at(100.0),
        final_allocation_pct=final_pct,
        unallocated_gpus=idle_milli / fragmentation.MILLI,
        fragmented_idle_pct=100.0 * frag_milli / idle_milli if idle_milli > 0 else 0.0,
        arrivals=int(placed_mask.size),
        unplaced=int((~placed_mask).sum()),
    )


_Array = TypeVar("_Array", bound=npt.NDArray[np.generic])


def _frozen(array: _Array) -> _Array:
    array.setflags(write=False)
    return array
