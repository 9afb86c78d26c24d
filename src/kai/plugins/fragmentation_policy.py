"""The `fragmentation` GPU placement policy: Fragmentation Gradient Descent inside the scheduler.

Selected with `placementStrategy: {gpu: fragmentation}`. For each GPU task it scores every
candidate node by how much placing the task there increases the cluster's expected GPU
fragmentation, measured against the distribution of task shapes in the snapshot (the pods the
cluster sees, running and pending), and picks the devices inside the node the same way
(Weng et al., USENIX ATC 2023; the math is in `kai.plugins.fragmentation`).

The per-device free-GPU matrix is kept incrementally: a node's row is rebuilt only when the
node's idle or releasing resources changed since the last task (every placement or eviction
changes at least its pod count). Scores are the authors' integer 0..100 node scores scaled into
the placement range 0..9, so they combine with the other node scores as bin-pack would.
"""

from __future__ import annotations

import hashlib

import msgspec
import numpy as np
import numpy.typing as npt

from kai.api.node import GPU_PRODUCT_LABEL
from kai.core import gpu_devices
from kai.core.fit import Fit
from kai.core.model import NodeIndices, Task
from kai.core.resources import CPU, GPU, MEMORY, Vector
from kai.core.scores import MAX_PLACEMENT
from kai.core.session import Session
from kai.plugins import fragmentation

MIB = float(2**20)
TIE_RANGE = 0.05  # below one FGD score step (9 / 100)
POLICY = "fragmentation"


def task_models(session: Session, task: Task) -> tuple[str, ...]:
    """GPU models a task may use, from a node selector or required affinity on the product label."""
    constraint = session.snapshot.constraints[task.constraint]
    for key, value in constraint.node_selector:
        if key == GPU_PRODUCT_LABEL:
            return (value,)
    models: set[str] = set()
    for term in constraint.affinity_terms:
        for expr in term.expressions:
            if expr.key == GPU_PRODUCT_LABEL and expr.operator == "In":
                models.update(expr.values)
    return tuple(sorted(models))


def task_shape(session: Session, task: Task) -> fragmentation.TaskShape:
    cpu = float(task.request[CPU])
    models = task_models(session, task)
    if task.is_shared_gpu:
        portion = task.gpu_portion or task.gpu_memory_mib / max(1, session.min_gpu_memory)
        return fragmentation.TaskShape(
            cpu_milli=cpu,
            num_gpu=max(1, task.gpu_devices),
            gpu_milli=round(portion * fragmentation.MILLI),
            gpu_models=models,
        )
    whole = round(float(task.request[GPU]))
    return fragmentation.TaskShape(
        cpu_milli=cpu, num_gpu=whole, gpu_milli=int(fragmentation.MILLI) if whole else 0, gpu_models=models
    )


def task_shapes(session: Session) -> list[fragmentation.TaskShape]:
    """`task_shape` of every task of the snapshot, by task index (computed once per distinct input)."""
    known: dict[tuple[object, ...], fragmentation.TaskShape] = {}
    out = []
    for task in session.snapshot.tasks:
        key = (
            float(task.request[CPU]),
            float(task.request[GPU]),
            task.is_shared_gpu,
            task.gpu_portion,
            task.gpu_memory_mib,
            task.gpu_devices,
            task.constraint,
        )
        shape = known.get(key)
        if shape is None:
            shape = known[key] = task_shape(session, task)
        out.append(shape)
    return out


def tie_ranks(names: tuple[str, ...]) -> Vector:
    """A fixed tie-breaker among nodes with equal FGD scores, smaller than one score step (0.09).

    The authors' integer scores tie often; breaking ties by node name would pile equal choices onto
    the first nodes of the alphabet (often one GPU model), so nodes are ranked by a hash of their
    name instead: deterministic, but unrelated to naming. On the Alibaba trace this is worth about
    0.3 points of GPU allocation over name order.
    """
    if not names:
        return np.zeros(0)
    digests = [hashlib.sha1(name.encode()).hexdigest()[:12] for name in names]
    order = np.argsort(np.argsort(np.array(digests), kind="stable"), kind="stable")
    return TIE_RANGE * (1.0 - order / len(names))


class FragmentationState:
    """Device-level view of the session for the FGD math, rebuilt per node when the node changes."""

    def __init__(self, session: Session) -> None:
        snap = session.snapshot
        nodes = snap.nodes
        self.session = session
        self.models = tuple(sorted({labels.get(GPU_PRODUCT_LABEL, "") for labels in nodes.labels} - {""}))
        model_index = {m: i for i, m in enumerate(self.models)}
        self.gpu_count = np.rint(nodes.allocatable[:, GPU]).astype(np.int64)
        self.gpu_model = np.array(
            [model_index.get(labels.get(GPU_PRODUCT_LABEL, ""), -1) for labels in nodes.labels],
            dtype=np.int64,
        )
        for fixed in (self.gpu_count, self.gpu_model):
            fixed.setflags(write=False)  # never change: every DeviceState shares them
        width = max(1, int(self.gpu_count.max()) if nodes.count else 1)
        self.free_gpu = np.zeros((nodes.count, width))
        self.layout: list[list[str | None]] = [[] for _ in range(nodes.count)]  # row slot -> group (None: whole)
        self._seen = np.full(nodes.count, -1, dtype=np.int64)  # node versions the rows were built at
        self.shapes = task_shapes(session)  # by task index
        distribution = fragmentation.TaskShapeDistribution.from_shapes(self.shapes)
        self.target = distribution.target(models=self.models) if self.shapes else None
        self._state: fragmentation.DeviceState | None = None
        self._base: fragmentation.NodeBase | None = None

    def _rebuild(self, node: int) -> None:
        s = self.session
        row = np.zeros(self.free_gpu.shape[1])
        layout: list[str | None] = []
        whole = max(0, int(np.floor(s.idle[node, GPU] + gpu_devices.EPS)))
        for _ in range(min(whole, row.size)):
            row[len(layout)] = fragmentation.MILLI
            layout.append(None)
        for group in sorted(s.devices.get(node, {})):
            dev = s.devices[node][group]
            if dev.all_releasing or len(layout) >= row.size:
                continue
            row[len(layout)] = max(0.0, dev.room_now()) * fragmentation.MILLI
            layout.append(group)
        self.free_gpu[node] = row
        self.layout[node] = layout

    def refresh(self) -> npt.NDArray[np.int64]:
        """Rebuild the rows of nodes a statement changed since they were built; returns those nodes."""
        versions = self.session.node_version
        changed = np.flatnonzero(versions != self._seen)
        for node in changed:
            self._rebuild(int(node))
        self._seen[changed] = versions[changed]
        return changed

    def state(self) -> fragmentation.DeviceState:
        """The device state of the session now (rebuilt only when some node changed)."""
        self.current()
        assert self._state is not None
        return self._state

    def current(self) -> tuple[fragmentation.DeviceState, fragmentation.NodeBase | None]:
        """The device state and, with a target workload, each node's FGD base (rows of changed nodes redone)."""
        changed = self.refresh()
        if self._state is None or changed.size:
            s = self.session
            free_cpu = np.maximum(s.idle[:, CPU], 0.0)
            free_memory = np.maximum(s.idle[:, MEMORY], 0.0) / MIB
            for fresh in (free_cpu, free_memory):
                fresh.setflags(write=False)  # new arrays no one else holds: the state takes them as they are
            self._state = fragmentation.DeviceState.unchecked(
                free_cpu=free_cpu,
                free_memory=free_memory,
                free_gpu=self.free_gpu,
                gpu_count=self.gpu_count,
                gpu_model=self.gpu_model,
                models=self.models,
            )
            if self.target is not None:
                if self._base is None:
                    self._base = fragmentation.node_base(state=self._state, target=self.target)
                else:
                    rows = fragmentation.node_base(state=self._state, target=self.target, rows=changed)
                    for name in ("idle", "count", "above", "before"):
                        getattr(self._base, name)[changed] = getattr(rows, name)
        return self._state, self._base


class _Remembered(msgspec.Struct, kw_only=True):
    """A task shape's FGD evaluation, node by node, and the node versions each row was computed at."""

    versions: npt.NDArray[np.int64]
    feasible: npt.NDArray[np.bool_]
    delta: Vector
    devices: npt.NDArray[np.int64]
    scaled: Vector  # the node score in the placement range (`_scaled`), 0 where infeasible


def _scaled(feasible: npt.NDArray[np.bool_], delta: Vector) -> Vector:
    """FGD's integer node scores (0..100) of the evaluated nodes scaled into the placement range
    0..9; 0 where infeasible (node by node: any subset of nodes may be passed)."""
    fgd = fragmentation.FgdScores(
        feasible=feasible, delta=delta, devices=np.zeros((0, 0), np.int64), integer_scores=True
    )
    return np.where(feasible, np.clip(fgd.scores(), 0.0, 100.0) * MAX_PLACEMENT / 100.0, 0.0)


class FragmentationPlugin:
    """Registers the FGD node score and device choice when the GPU placement policy is `fragmentation`.

    A shape's evaluation is remembered: the next task of the same shape re-evaluates only the nodes
    a statement changed since (every node is scored on its own, so the result is the same).
    """

    name = "fragmentation"
    REMEMBERED_SHAPES = 512

    def __init__(self) -> None:
        self.view: FragmentationState | None = None
        self.tie_rank: Vector = np.zeros(0)
        self._last: tuple[int, npt.NDArray[np.int64]] | None = None  # task index -> devices per node
        self._remembered: dict[tuple[fragmentation.TaskShape, float], _Remembered] = {}

    def on_session_open(self, session: Session) -> None:
        if session.config.gpu_placement != POLICY:
            return
        self.view = FragmentationState(session)
        self.tie_rank = tie_ranks(session.snapshot.nodes.names)
        session.set_gpu_policy(self)

    def node_bonus(self, session: Session, task: Task, fit: Fit, nodes: NodeIndices) -> Vector:
        """FGD's node score for a GPU task on the candidate nodes, scaled into the placement range 0..9."""
        assert self.view is not None
        if self.view.target is None:
            return np.zeros(len(nodes))
        known = self._evaluate(session, self.view.shapes[task.index], float(task.request[MEMORY]) / MIB)
        self._last = (task.index, known.devices)
        return known.scaled[nodes] + self.tie_rank[nodes]

    def _evaluate(self, session: Session, shape: fragmentation.TaskShape, memory_mib: float) -> _Remembered:
        """FGD's evaluation of the shape on every node: the remembered rows, the changed nodes redone.
        Every value is computed node by node, so redoing some rows gives what redoing all would."""
        assert self.view is not None and self.view.target is not None
        state, base = self.view.current()
        versions = session.node_version
        key = (shape, memory_mib)
        known = self._remembered.pop(key, None)
        if known is None:
            fgd = fragmentation.fgd_scores(
                state=state, shape=shape, target=self.view.target, memory_mib=memory_mib, integer_scores=True, base=base
            )
            known = _Remembered(
                versions=versions.copy(),
                feasible=fgd.feasible.copy(),
                delta=fgd.delta.copy(),
                devices=fgd.devices.copy(),
                scaled=_scaled(fgd.feasible, fgd.delta),
            )
        else:
            stale = np.flatnonzero(versions != known.versions)
            if stale.size:
                part = fragmentation.fgd_scores(
                    state=state,
                    shape=shape,
                    target=self.view.target,
                    memory_mib=memory_mib,
                    integer_scores=True,
                    base=base,
                    rows=stale,
                )
                known.feasible[stale] = part.feasible[stale]
                known.delta[stale] = part.delta[stale]
                known.devices[stale] = part.devices[stale]
                known.scaled[stale] = _scaled(known.feasible[stale], known.delta[stale])
                known.versions[stale] = versions[stale]
        self._remembered[key] = known  # most recently used last
        if len(self._remembered) > self.REMEMBERED_SHAPES:
            del self._remembered[next(iter(self._remembered))]
        return known

    def devices(self, session: Session, task: Task, node: int, fit: Fit) -> gpu_devices.DeviceChoice | None:
        """The devices FGD picked on the chosen node, if they are still valid; None defers to gpupack."""
        if self.view is None or self._last is None or self._last[0] != task.index or not task.is_shared_gpu:
            return None
        picked = [int(d) for d in self._last[1][node] if d >= 0]
        layout = self.view.layout[node]
        portion = gpu_devices.task_portion(task, int(session.snapshot.nodes.gpu_memory_mib[node]))
        existing: list[str] = []
        new = 0
        for slot in picked:
            if slot >= len(layout):
                return None
            group = layout[slot]
            if group is None:
                new += 1
                continue
            dev = session.devices.get(node, {}).get(group)
            if dev is None or dev.room_now() + gpu_devices.EPS < portion:
                return None
            existing.append(group)
        if new > session.idle[node, GPU] + gpu_devices.EPS or len(existing) + new != max(1, task.gpu_devices):
            return None
        return gpu_devices.DeviceChoice(existing=tuple(existing), new_devices=new, pipelined=False)
