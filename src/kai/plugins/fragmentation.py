"""GPU fragmentation and the Fragmentation Gradient Descent (FGD) placement score, over plain arrays.

Why: with GPU sharing, a node can have idle GPU capacity that the tasks people actually submit
cannot use (half a GPU left where everyone asks for a whole one, GPUs left where the CPU is gone).
Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient
Descent" (USENIX ATC '23) measure that waste against a *target workload* and place each task where
it grows the expected waste the least. This module restates their definitions (as implemented in
the authors' simulator, hkust-adsl/kubernetes-scheduler-simulator, `pkg/utils/frag.go` and the FGD
score plugin) as vectorized numpy, so one task is scored on every node at once.

Units are the paper's: CPU in millicores, GPU in milli-GPUs (1000 = one whole device; a KAI
gpu-fraction portion p is p * 1000). Memory only takes part in the fit check, never in fragmentation.

Definitions:

* A task shape is (cpu, number of GPUs g, per-GPU share m, allowed GPU models); m is 0 for CPU-only
  tasks, 1000 for whole-GPU tasks, below 1000 only with g = 1 in the trace.
* The target workload is a popularity distribution p over shapes: the most frequent shapes that
  together cover a popularity threshold (the authors' experiments use 95%) of the observed tasks,
  renormalised to sum to 1. Shapes are ranked by count, ties by (cpu, m, g, models), larger first.
* For one node and one shape s, the node's idle GPU milli (free milli summed over its devices)
  counts as fragmented:
  1. all of it when s needs no GPU (such a task can never use it);
  2. all of it when the node's GPU model is not among the models s allows;
  3. all of it when s does not fit: fewer than g devices with at least m free, or too little CPU;
  4. otherwise only the free milli on devices with less than m free.
* Node fragmentation F(node) = sum over s of p_s * frag_s(node): the idle GPU milli a task drawn
  from the target workload could not use. Equivalently F = idle - sum_s p_s * usable_s, where
  usable_s is the free milli on devices with at least m_s free when cases 1-3 do not apply.
* The FGD score of placing a task on a node is F(node after) - F(node before), lower is better.
  Inside the node a fractional task (g = 1, m < 1000) tries every device with room and keeps the
  one with the smallest increase (ties: lowest device index); other GPU tasks take the g devices
  with the least sufficient free share (ties: lowest index), which for whole GPUs means the
  lowest-indexed idle devices, as in the authors' simulator.
* The authors' plugin compares integer scores int(100 * sigmoid(-increase / 1000)), so increases
  within about 40 milli tie (`integer_scores=True` reproduces that). Their runs then appear to
  break node ties by a fixed seeded node order (the simulator renames nodes with a seeded random
  prefix). On the openb default trace at load 1.3 that variant allocated 95.4-95.6% of GPUs against
  94.4-94.7% for exact increases (tests/replay/test_replay_experiment.py).

Node and device state (`DeviceState`): free CPU per node, free memory per node, free GPU milli per
device in an array of shape [nodes, max devices per node] padded with zeros (a padding slot and a
fully used device behave the same everywhere), the device count per node and the GPU model per node
as an index into a model vocabulary (-1 = no GPU).

Everything here is pure, no side effects; the caller applies decisions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import msgspec
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

MILLI = 1000.0  # milli-GPUs in one whole device
EPS = 1e-6  # tolerance (in milli) for "has at least this much free"; fractions are floats
DEFAULT_POPULARITY_THRESHOLD = 0.95  # the authors' experiment setting (podPopularityThreshold: 95)


class TaskShape(msgspec.Struct, frozen=True, kw_only=True):
    """What a task asks for, as the fragmentation measure sees it.

    `gpu_models` is normalised to a sorted tuple without duplicates; empty means any model.
    """

    cpu_milli: float
    num_gpu: int
    gpu_milli: float
    gpu_models: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.cpu_milli < 0:
            raise ValueError(f"cpu_milli must be >= 0, got {self.cpu_milli}")
        if self.num_gpu < 0:
            raise ValueError(f"num_gpu must be >= 0, got {self.num_gpu}")
        if not 0 <= self.gpu_milli <= MILLI:
            raise ValueError(f"gpu_milli must be within [0, 1000], got {self.gpu_milli}")
        if (self.num_gpu == 0) != (self.gpu_milli == 0):
            raise ValueError(
                f"num_gpu={self.num_gpu} with gpu_milli={self.gpu_milli}: "
                "a CPU-only task has both 0, a GPU task both positive"
            )
        if any(not model for model in self.gpu_models):
            raise ValueError(f"gpu_models must not contain empty names, got {self.gpu_models!r}")
        msgspec.structs.force_setattr(self, "gpu_models", tuple(sorted(set(self.gpu_models))))

    @property
    def needs_gpu(self) -> bool:
        return self.num_gpu > 0

    @property
    def is_fractional(self) -> bool:
        """One device, shared: the FGD device search applies."""
        return self.num_gpu == 1 and self.gpu_milli < MILLI

    @property
    def gpu_request_milli(self) -> float:
        """Total GPU request, num_gpu * gpu_milli (the authors' TotalMilliGpu)."""
        return self.num_gpu * self.gpu_milli

    def rank_key(self) -> tuple[float, float, int, tuple[str, ...]]:
        """The authors' tie-break among equally popular shapes: cpu, share, count, models."""
        return (self.cpu_milli, self.gpu_milli, self.num_gpu, self.gpu_models)


class TargetWorkload(msgspec.Struct, frozen=True, kw_only=True):
    """A truncated, renormalised shape distribution, laid out for fast scoring.

    Build it with `target_workload` or `TaskShapeDistribution.target`. The layout groups GPU shapes
    that share (per-GPU share, GPU count, allowed models): within a group shapes differ only by
    CPU, so the probability mass that still fits is a step function of the node's free CPU, kept
    in `group_cpu_table`. Model columns are `models` plus one trailing column that stands for
    nodes without a GPU model and for models outside the vocabulary.
    """

    shapes: tuple[TaskShape, ...]
    probability: FloatArray  # [S], sums to 1
    models: tuple[str, ...]
    levels: FloatArray  # [U] distinct positive per-GPU shares, ascending
    cpu_levels: FloatArray  # [R] distinct CPU requests of GPU shapes, ascending
    group_level: IntArray  # [K] index into levels
    group_gpus: IntArray  # [K] GPU count of the group
    group_model_ok: BoolArray  # [len(models) + 1, K] which model columns the group accepts
    group_cpu_table: FloatArray  # [R + 1, K] row r: mass of the group with cpu <= cpu_levels[r - 1]


def target_workload(
    *, shapes: Sequence[TaskShape], probability: Sequence[float] | FloatArray, models: Sequence[str]
) -> TargetWorkload:
    """Lay out a shape distribution for scoring. Probabilities are renormalised to sum to 1.

    CPU-only shapes keep their probability (they count every idle GPU as fragmented) but form no
    group: they never make GPU capacity usable.
    """
    if not shapes:
        raise ValueError("a target workload needs at least one task shape. To fix: observe some tasks first")
    if len(set(shapes)) != len(shapes):
        raise ValueError("task shapes of a target workload must be distinct")
    prob = np.asarray(probability, dtype=np.float64)
    if prob.shape != (len(shapes),) or np.any(prob < 0) or not prob.sum() > 0:
        raise ValueError("probability must be one non-negative weight per shape with a positive sum")
    if len(set(models)) != len(models) or any(not name for name in models):
        raise ValueError(f"models must be distinct non-empty names, got {tuple(models)!r}")
    prob = prob / prob.sum()
    model_tuple = tuple(models)
    gpu_shapes = [(i, shape) for i, shape in enumerate(shapes) if shape.needs_gpu]
    levels = np.array(sorted({shape.gpu_milli for _, shape in gpu_shapes}), dtype=np.float64)
    cpu_levels = np.array(sorted({shape.cpu_milli for _, shape in gpu_shapes}), dtype=np.float64)
    group_keys = sorted({(shape.gpu_milli, shape.num_gpu, shape.gpu_models) for _, shape in gpu_shapes})
    group_of = {key: k for k, key in enumerate(group_keys)}
    group_model_ok = np.zeros((len(model_tuple) + 1, len(group_keys)), dtype=np.bool_)
    for k, (_, _, allowed) in enumerate(group_keys):
        group_model_ok[:, k] = task_model_mask(
            shape=TaskShape(cpu_milli=0, num_gpu=1, gpu_milli=1, gpu_models=allowed), models=model_tuple
        )
    # Mass of each group by CPU rank, then cumulated: row r holds shapes with rank < r.
    by_rank = np.zeros((cpu_levels.size + 1, len(group_keys)), dtype=np.float64)
    for i, shape in gpu_shapes:
        rank = int(np.searchsorted(cpu_levels, shape.cpu_milli))
        by_rank[rank + 1, group_of[(shape.gpu_milli, shape.num_gpu, shape.gpu_models)]] += prob[i]
    return TargetWorkload(
        shapes=tuple(shapes),
        probability=_frozen(prob),
        models=model_tuple,
        levels=_frozen(levels),
        cpu_levels=_frozen(cpu_levels),
        group_level=_frozen(np.searchsorted(levels, [key[0] for key in group_keys]).astype(np.int64)),
        group_gpus=_frozen(np.array([key[1] for key in group_keys], dtype=np.int64)),
        group_model_ok=_frozen(group_model_ok),
        group_cpu_table=_frozen(np.cumsum(by_rank, axis=0)),
    )


class TaskShapeDistribution(msgspec.Struct, frozen=True, kw_only=True):
    """Observed task shapes with their (weighted) counts; immutable, updated by `observe`.

    `counts` is kept in rank order: count descending, then `TaskShape.rank_key` descending.
    """

    counts: tuple[tuple[TaskShape, float], ...] = ()

    @classmethod
    def from_shapes(cls, shapes: Iterable[TaskShape]) -> TaskShapeDistribution:
        return cls().observe(shapes)

    def observe(self, shapes: Iterable[TaskShape], *, weight: float = 1.0) -> TaskShapeDistribution:
        """A new distribution with each given shape counted `weight` more times."""
        if weight <= 0:
            raise ValueError(f"weight must be positive, got {weight}")
        merged = dict(self.counts)
        for shape in shapes:
            merged[shape] = merged.get(shape, 0.0) + weight
        ranked = sorted(merged.items(), key=lambda item: (item[1], item[0].rank_key()), reverse=True)
        return TaskShapeDistribution(counts=tuple(ranked))

    @property
    def total(self) -> float:
        return float(sum(count for _, count in self.counts))

    def popularity(self) -> tuple[tuple[TaskShape, float], ...]:
        """Every observed shape with its share of all observations, most popular first."""
        total = self.total
        return tuple((shape, count / total) for shape, count in self.counts)

    def target(
        self, *, models: Sequence[str], popularity_threshold: float = DEFAULT_POPULARITY_THRESHOLD
    ) -> TargetWorkload:
        """The most popular shapes covering `popularity_threshold` of observations, renormalised.

        Shapes are added in rank order until their cumulative count reaches the threshold times the
        total (the authors' rule with an increase step of one shape).
        """
        if not 0 < popularity_threshold <= 1:
            raise ValueError(f"popularity_threshold must be within (0, 1], got {popularity_threshold}")
        if not self.counts:
            raise ValueError("no task shapes observed. To fix: observe some tasks first")
        wanted = popularity_threshold * self.total
        kept: list[tuple[TaskShape, float]] = []
        covered = 0.0
        for shape, count in self.counts:
            if covered >= wanted:
                break
            kept.append((shape, count))
            covered += count
        return target_workload(
            shapes=[shape for shape, _ in kept], probability=[count for _, count in kept], models=models
        )


# a dataclass, not a msgspec Struct: `unchecked` makes one without `__init__`, which a Struct refuses
@dataclass(frozen=True, kw_only=True, slots=True)
class DeviceState:
    """Free resources of a cluster, one row per node; see the module docstring for the layout.

    The arrays are copied and made read-only on construction; `with_task` returns a new state.
    """

    free_cpu: FloatArray  # [N] millicores
    free_memory: FloatArray  # [N] MiB, fit check only
    free_gpu: FloatArray  # [N, D] milli-GPU per device, zero in padding slots
    gpu_count: IntArray  # [N] devices per node
    gpu_model: IntArray  # [N] index into models, -1 = no GPU model
    models: tuple[str, ...]

    def __post_init__(self) -> None:
        for name, dtype in (
            ("free_cpu", np.float64),
            ("free_memory", np.float64),
            ("free_gpu", np.float64),
            ("gpu_count", np.int64),
            ("gpu_model", np.int64),
        ):
            object.__setattr__(self, name, _frozen(np.array(getattr(self, name), dtype=dtype)))
        n = self.free_cpu.shape[0]
        if self.free_cpu.shape != (n,) or self.free_memory.shape != (n,):
            raise ValueError("free_cpu and free_memory must be 1-D arrays of the same length")
        if self.free_gpu.ndim != 2 or self.free_gpu.shape[0] != n:
            raise ValueError(f"free_gpu must have shape [{n}, max devices], got {self.free_gpu.shape}")
        if self.gpu_count.shape != (n,) or self.gpu_model.shape != (n,):
            raise ValueError("gpu_count and gpu_model must have one entry per node")
        if np.any(self.gpu_count < 0) or np.any(self.gpu_count > self.free_gpu.shape[1]):
            raise ValueError("gpu_count must be within [0, free_gpu.shape[1]]")
        if np.any(self.gpu_model < -1) or np.any(self.gpu_model >= len(self.models)):
            raise ValueError("gpu_model must be -1 or an index into models")
        if np.any(self.free_gpu < 0) or np.any(self.free_gpu > MILLI + EPS):
            raise ValueError("free_gpu entries must be within [0, 1000]")
        padding = np.arange(self.free_gpu.shape[1])[None, :] >= self.gpu_count[:, None]
        if np.any(self.free_gpu[padding] != 0):
            raise ValueError("free_gpu must be 0 in padding slots (device index >= gpu_count)")

    @classmethod
    def unchecked(
        cls,
        *,
        free_cpu: FloatArray,
        free_memory: FloatArray,
        free_gpu: FloatArray,
        gpu_count: IntArray,
        gpu_model: IntArray,
        models: tuple[str, ...],
    ) -> DeviceState:
        """A state from arrays the caller keeps consistent itself (copied and frozen, not validated; an
        array that is frozen already and owns its data is taken as it is: nothing can change it)."""
        state = object.__new__(cls)
        for name, value, dtype in (
            ("free_cpu", free_cpu, np.float64),
            ("free_memory", free_memory, np.float64),
            ("free_gpu", free_gpu, np.float64),
            ("gpu_count", gpu_count, np.int64),
            ("gpu_model", gpu_model, np.int64),
        ):
            kept = value.dtype == dtype and not value.flags.writeable and value.flags.owndata
            object.__setattr__(state, name, value if kept else _frozen(np.array(value, dtype=dtype)))
        object.__setattr__(state, "models", models)
        return state

    @property
    def node_count(self) -> int:
        return int(self.free_cpu.shape[0])

    @property
    def max_devices(self) -> int:
        return int(self.free_gpu.shape[1])

    def model_column(self) -> IntArray:
        """Per node, the column of `TargetWorkload.model_ok` (and of a task's model mask) to read."""
        return np.where(self.gpu_model < 0, len(self.models), self.gpu_model)

    def with_task(
        self, *, node: int, devices: Sequence[int] | IntArray, shape: TaskShape, memory_mib: float = 0.0
    ) -> DeviceState:
        """The state after placing a task of `shape` on `node`, taking `gpu_milli` on each device."""
        chosen = [int(d) for d in devices]
        if len(chosen) != shape.num_gpu or len(set(chosen)) != len(chosen):
            raise ValueError(f"need {shape.num_gpu} distinct devices, got {chosen}")
        if not 0 <= node < self.node_count:
            raise ValueError(f"node index {node} out of range")
        if self.free_cpu[node] + EPS < shape.cpu_milli or self.free_memory[node] + EPS < memory_mib:
            raise ValueError(f"node {node} has too little free CPU or memory for {shape}")
        free_gpu = self.free_gpu.copy()
        for d in chosen:
            if not 0 <= d < self.gpu_count[node] or free_gpu[node, d] + EPS < shape.gpu_milli:
                raise ValueError(f"device {d} of node {node} cannot hold {shape.gpu_milli} milli")
            free_gpu[node, d] = max(free_gpu[node, d] - shape.gpu_milli, 0.0)
        free_cpu = self.free_cpu.copy()
        free_cpu[node] = max(free_cpu[node] - shape.cpu_milli, 0.0)
        free_memory = self.free_memory.copy()
        free_memory[node] = max(free_memory[node] - memory_mib, 0.0)
        return DeviceState(
            free_cpu=free_cpu,
            free_memory=free_memory,
            free_gpu=free_gpu,
            gpu_count=self.gpu_count,
            gpu_model=self.gpu_model,
            models=self.models,
        )


def task_model_mask(*, shape: TaskShape, models: Sequence[str]) -> BoolArray:
    """Which model columns (vocabulary plus the trailing no/unknown-model column) the task accepts."""
    if not shape.gpu_models:
        return np.ones(len(models) + 1, dtype=np.bool_)
    allowed = set(shape.gpu_models)
    return np.array([name in allowed for name in models] + [False], dtype=np.bool_)


def feasible_nodes(
    *, state: DeviceState, shape: TaskShape, memory_mib: float = 0.0, rows: IntArray | None = None
) -> BoolArray:
    """Nodes the task fits on: CPU, memory, GPU model, and `num_gpu` devices with `gpu_milli` free.

    With `rows`, only those nodes are looked at (the others read as not fitting)."""
    if rows is not None:
        out = np.zeros(state.node_count, dtype=np.bool_)
        out[rows] = _fits(state, shape, memory_mib, rows)
        return out
    return _fits(state, shape, memory_mib, slice(None))


def _fits(state: DeviceState, shape: TaskShape, memory_mib: float, rows: IntArray | slice) -> BoolArray:
    ok: BoolArray = (state.free_cpu[rows] + EPS >= shape.cpu_milli) & (state.free_memory[rows] + EPS >= memory_mib)
    if not shape.needs_gpu:
        return ok
    ok &= task_model_mask(shape=shape, models=state.models)[state.model_column()[rows]]
    roomy = (state.free_gpu[rows] + EPS >= shape.gpu_milli).sum(axis=1)
    ok &= roomy >= shape.num_gpu
    return ok


def node_fragmentation(*, state: DeviceState, target: TargetWorkload) -> FloatArray:
    """F(node) for every node, in milli-GPU (see the module docstring)."""
    _check_models(state, target)
    count, above = _level_stats(state.free_gpu, target.levels)
    usable = _usable(target, state.free_cpu, count, above, state.model_column())
    frag: FloatArray = state.free_gpu.sum(axis=1) - usable
    return frag


def fragmentation_of_node(
    *, free_cpu: float, free_gpu: Sequence[float], gpu_model: str, target: TargetWorkload
) -> float:
    """F of a single node given its free CPU, per-device free milli and model name ("" = none)."""
    models = target.models
    state = DeviceState(
        free_cpu=np.array([free_cpu]),
        free_memory=np.zeros(1),
        free_gpu=np.array(list(free_gpu), dtype=np.float64).reshape(1, len(free_gpu)),
        gpu_count=np.array([len(free_gpu)]),
        gpu_model=np.array([models.index(gpu_model) if gpu_model in models else -1]),
        models=models,
    )
    return float(node_fragmentation(state=state, target=target)[0])


class FgdScores(msgspec.Struct, frozen=True, kw_only=True):
    """FGD evaluation of one task on every node.

    `delta[n]` is F(after) - F(before) in milli-GPU for the devices in `devices[n]`, rounded to
    1e-6 milli so that mathematically equal outcomes compare equal (+inf and -1 where the task does
    not fit). With `integer_scores` the evaluation follows the authors' plugin, which compares
    integer scores int(100 * sigmoid(-delta / 1000)): devices inside a node and nodes whose
    increases differ by less than about 40 milli then tie.
    """

    feasible: BoolArray  # [N]
    delta: FloatArray  # [N]
    devices: IntArray  # [N, num_gpu]
    integer_scores: bool

    def scores(self) -> FloatArray:
        """Node scores in [0, 100], higher is better; -inf where the task does not fit."""
        score = score_from_delta(delta=np.where(self.feasible, self.delta, 0.0), integer=self.integer_scores)
        ranked: FloatArray = np.where(self.feasible, score, -np.inf)
        return ranked

    def best_node(self, *, tie_rank: IntArray | None = None) -> int | None:
        """The feasible node with the best score (exact: the smallest increase); ties go to the
        lowest `tie_rank` (default: the node index). None when the task fits nowhere."""
        candidates = np.flatnonzero(self.feasible)
        if candidates.size == 0:
            return None
        key = self.scores()[candidates] if self.integer_scores else -self.delta[candidates]
        tied = candidates[key == key.max()]
        if tie_rank is None:
            return int(tied[0])
        return int(tied[np.argmin(tie_rank[tied])])


class NodeBase(msgspec.Struct, frozen=True, kw_only=True):
    """Per node, what `fgd_scores` starts from: free milli-GPU, per-level device counts and free sums,
    and the node's fragmentation F. Rows depend on their own node only, so a caller that keeps the
    state between tasks recomputes just the rows of nodes that changed (`node_base(rows=...)`)."""

    idle: FloatArray  # [N]
    count: IntArray  # [N, L]
    above: FloatArray  # [N, L]
    before: FloatArray  # [N]


def node_base(*, state: DeviceState, target: TargetWorkload, rows: IntArray | None = None) -> NodeBase:
    """`NodeBase` of the given rows (default: every node) of the state."""
    free_gpu = state.free_gpu if rows is None else state.free_gpu[rows]
    free_cpu = state.free_cpu if rows is None else state.free_cpu[rows]
    model_col = state.model_column() if rows is None else state.model_column()[rows]
    idle = free_gpu.sum(axis=1)
    count, above = _level_stats(free_gpu, target.levels)
    before = idle - _usable(target, free_cpu, count, above, model_col)
    return NodeBase(idle=idle, count=count, above=above, before=before)


def fgd_scores(
    *,
    state: DeviceState,
    shape: TaskShape,
    target: TargetWorkload,
    memory_mib: float = 0.0,
    integer_scores: bool = False,
    base: NodeBase | None = None,
    rows: IntArray | None = None,
) -> FgdScores:
    """Score placing one task on every node by the increase of fragmentation it causes.

    `integer_scores` selects the authors' integer comparison (see `FgdScores`). Pure, no side
    effects. The base state costs feasible nodes x devices (or nothing when the caller passes the
    state's `NodeBase`, kept up to date row by row); each candidate placement then costs
    O(distinct shares + shape groups) through incremental updates of the per-share device counts
    and free sums. Every node is evaluated on its own, so with `rows` only those nodes are (the
    others read as infeasible): a caller that remembers a shape's scores redoes the changed nodes.
    """
    _check_models(state, target)
    n_nodes, n_dev = state.free_gpu.shape
    feasible = feasible_nodes(state=state, shape=shape, memory_mib=memory_mib, rows=rows)
    delta = np.full(n_nodes, np.inf)
    devices = np.full((n_nodes, shape.num_gpu), -1, dtype=np.int64)
    nodes = np.flatnonzero(feasible)
    if nodes.size == 0:
        return FgdScores(
            feasible=_frozen(feasible),
            delta=_frozen(delta),
            devices=_frozen(devices),
            integer_scores=integer_scores,
        )

    free_gpu = state.free_gpu[nodes]
    free_cpu = state.free_cpu[nodes]
    model_col = state.model_column()[nodes]
    if base is None:
        start = node_base(state=state, target=target, rows=nodes)
    else:
        start = NodeBase(
            idle=base.idle[nodes], count=base.count[nodes], above=base.above[nodes], before=base.before[nodes]
        )
    idle, count, above, before = start.idle, start.count, start.above, start.before
    cpu_after = free_cpu - shape.cpu_milli
    levels = target.levels

    if not shape.needs_gpu:
        # 1. CPU-only task: only the node's free CPU changes.
        after = idle - _usable(target, cpu_after, count, above, model_col)
        delta[nodes] = after - before
    elif shape.is_fractional:
        # 2. Fractional task: every device with room is a candidate. Devices with equal free
        #    shares on one node give equal outcomes, so only the first of them is evaluated.
        m = shape.gpu_milli
        candidate = (free_gpu + EPS >= m) & ~_repeats_earlier_device(free_gpu)
        row, dev = np.nonzero(candidate)
        f_before = free_gpu[row, dev]
        f_after = np.maximum(f_before - m, 0.0)
        ge_before = f_before[:, None] + EPS >= levels[None, :]
        ge_after = f_after[:, None] + EPS >= levels[None, :]
        count_c = count[row] - ge_before + ge_after
        above_c = above[row] - f_before[:, None] * ge_before + f_after[:, None] * ge_after
        after_c = (idle[row] - m) - _usable(target, cpu_after[row], count_c, above_c, model_col[row])
        table = np.full((nodes.size, n_dev), np.inf)
        table[row, dev] = _rounded(after_c - before[row])
        # First best: the lowest device index among ties (non-candidates stay at +inf).
        key = -score_from_delta(delta=table, integer=True) if integer_scores else table
        key = np.where(np.isinf(table), np.inf, key)
        best_dev = np.argmin(key, axis=1)
        delta[nodes] = table[np.arange(nodes.size), best_dev]
        devices[nodes, 0] = best_dev
    else:
        # 3. Whole GPUs (or one share on several devices): the num_gpu devices with the least
        #    sufficient free share, lowest index first among equals.
        m, g = shape.gpu_milli, shape.num_gpu
        key = np.where(free_gpu + EPS >= m, free_gpu, np.inf)
        chosen = np.argsort(key, axis=1, kind="stable")[:, :g]
        f_before = np.take_along_axis(free_gpu, chosen, axis=1)  # [F, g]
        f_after = np.maximum(f_before - m, 0.0)
        ge_before = f_before[:, :, None] + EPS >= levels[None, None, :]
        ge_after = f_after[:, :, None] + EPS >= levels[None, None, :]
        count_a = count - ge_before.sum(axis=1) + ge_after.sum(axis=1)
        above_a = above - (f_before[:, :, None] * ge_before).sum(axis=1) + (f_after[:, :, None] * ge_after).sum(axis=1)
        after = (idle - g * m) - _usable(target, cpu_after, count_a, above_a, model_col)
        delta[nodes] = after - before
        devices[nodes] = chosen
    delta[nodes] = _rounded(delta[nodes])
    return FgdScores(
        feasible=_frozen(feasible),
        delta=_frozen(delta),
        devices=_frozen(devices),
        integer_scores=integer_scores,
    )


def score_from_delta(*, delta: FloatArray, integer: bool = False) -> FloatArray:
    """Map increases to the authors' 0-100 node score, higher is better: 100 * sigmoid(-delta / 1000),
    truncated to an integer when `integer` (as their plugin does). +inf maps to 0."""
    with np.errstate(over="ignore"):
        score: FloatArray = 100.0 / (1.0 + np.exp(np.asarray(delta, dtype=np.float64) / MILLI))
    return np.floor(score) if integer else score


def cluster_fragmentation(*, state: DeviceState, target: TargetWorkload) -> tuple[float, float]:
    """(fragmented milli, idle milli) summed over the cluster."""
    frag = node_fragmentation(state=state, target=target)
    return float(frag.sum()), float(state.free_gpu.sum())


def _level_stats(free_gpu: FloatArray, levels: FloatArray) -> tuple[IntArray, FloatArray]:
    """Per row and share level u: how many devices have at least u free, and their free sum.

    Each device is binned by how many levels it reaches; suffix sums over the bins give both.
    """
    rows, n_levels = free_gpu.shape[0], levels.size
    reached = np.searchsorted(levels, free_gpu + EPS, side="right")  # levels <= free, per device
    bins = (np.arange(rows)[:, None] * (n_levels + 1) + reached).ravel()
    size = rows * (n_levels + 1)
    hist = np.bincount(bins, minlength=size).reshape(rows, n_levels + 1)
    mass = np.bincount(bins, weights=free_gpu.ravel(), minlength=size).reshape(rows, n_levels + 1)
    count = np.cumsum(hist[:, ::-1], axis=1)[:, ::-1][:, 1:]
    above = np.cumsum(mass[:, ::-1], axis=1)[:, ::-1][:, 1:]
    return count.astype(np.int64), above.astype(np.float64)


def _usable(
    target: TargetWorkload, free_cpu: FloatArray, count: IntArray, above: FloatArray, model_col: IntArray
) -> FloatArray:
    """Per row, sum_s p_s * usable_s: free milli a task of shape s could use (0 if it cannot fit)."""
    cpu_rank = np.searchsorted(target.cpu_levels, free_cpu + EPS, side="right")
    mass = target.group_cpu_table[cpu_rank]  # [C, K] probability of the group's shapes that fit CPU
    fits = target.group_model_ok[model_col] & (count[:, target.group_level] >= target.group_gpus[None, :])
    usable: FloatArray = np.einsum("ck,ck->c", np.where(fits, mass, 0.0), above[:, target.group_level])
    return usable


def _repeats_earlier_device(free_gpu: FloatArray) -> BoolArray:
    """[rows, D]: True where a lower-indexed device of the same row has exactly the same free share."""
    by_device = np.ascontiguousarray(free_gpu.T)
    repeats = np.zeros(by_device.shape, dtype=np.bool_)
    for d in range(1, by_device.shape[0]):
        repeats[d] = (by_device[:d] == by_device[d]).any(axis=0)
    return np.ascontiguousarray(repeats.T)


def _rounded(values: FloatArray) -> FloatArray:
    rounded: FloatArray = np.round(values, 6)
    return rounded


def _check_models(state: DeviceState, target: TargetWorkload) -> None:
    if state.models != target.models:
        raise ValueError(
            f"the target workload was laid out for models {target.models!r} but the state has "
            f"{state.models!r}. To fix: build the target with models=state.models"
        )


_Array = TypeVar("_Array", bound=npt.NDArray[np.generic])


def _frozen(array: _Array) -> _Array:
    array.setflags(write=False)
    return array
