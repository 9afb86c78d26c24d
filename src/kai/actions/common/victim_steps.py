"""The victim order as arrays: each queue's victims kept in order across attempts, merged in blocks.

`VictimPool.units` walks the victim order one unit at a time, re-ranking queues after every unit.
When the victim queues compete at one level of the queue tree (they share a parent) and no victim
guard protects anyone, the same order can be produced far more cheaply:

* A queue's own sequence of victim steps (its jobs in victim job order, elastic jobs losing their
  surplus pods one at a time and re-ranked, as `_Cursor` yields them) depends only on that queue's
  jobs. It is kept per queue for the whole action and updated only where a job's plan changed.
* A queue's key after losing the victims before a step and the step itself only goes down from step
  to step (each step takes more away, and the queue order ranks a queue with less allocated
  earlier). Merging such sequences by always taking from the queue the order puts last is the
  same as sorting all steps by (key, queue tie order) in descending order, so the key of every
  step is computed at once (`QueueOrderPolicy.victim_keys`) and the sequences are merged in blocks:
  the next B steps of the merge are always among the next B steps of each queue.

Both give exactly the order `VictimPool.units` gives; the victim search reads either.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kai.actions.common.victims import PlanStep, VictimPool, VictimUnit
from kai.core.model import Job
from kai.core.resources import GPU
from kai.core.session import Session

FIRST_BLOCK = 32
LARGEST_BLOCK = 1024

Keys = tuple[tuple[object, ...], npt.NDArray[np.float64], tuple[object, ...]]


@dataclass(frozen=True, kw_only=True, slots=True)
class StepBlock:
    """Consecutive victim steps: their units, and per (step, node) row the step, the node and what the
    step frees there (its pods' requests; a shared-GPU pod's devices, an upper bound)."""

    units: list[VictimUnit]
    row_step: npt.NDArray[np.int64]  # ascending
    row_node: npt.NDArray[np.int64]
    row_frees: npt.NDArray[np.float64]  # [rows, R]

    def after(self, at: int) -> StepBlock:
        """The steps from `at` on."""
        rows = self.row_step >= at
        return StepBlock(
            units=self.units[at:],
            row_step=self.row_step[rows] - at,
            row_node=self.row_node[rows],
            row_frees=self.row_frees[rows],
        )


class QueueSteps:
    """One leaf queue's victim steps in the queue's own victim order, kept in step with the pool.

    Steps are arrays in order (units, what the job holds, rows per step and the rows' nodes and frees);
    a sync applies the changed jobs' removals and insertions in one pass.
    """

    def __init__(self, pool: VictimPool, queue: int) -> None:
        self.pool = pool
        self.queue = queue
        entries = pool.by_queue.get(queue, [])
        self.entry_key = {job.index: key for key, job in entries}
        self.jobs = [job for _, job in entries]
        self.job_ids = np.array([job.index for job in self.jobs], dtype=np.int64)
        self.seen = np.full(len(self.jobs), -1, dtype=np.int64)  # job versions the steps were built at
        self.plans: dict[int, tuple[PlanStep, ...]] = {}  # the plans the steps were built from
        self.keys_of: dict[int, list[tuple[object, ...]]] = {}
        self.keys: list[tuple[object, ...]] = []
        self.priority: list[int] = []
        resources = pool.session.snapshot.resources.size
        self.units = np.empty(0, dtype=object)
        self.holds = np.zeros((0, 3))
        self.nrows = np.zeros(0, dtype=np.int64)
        self.row_node = np.zeros(0, dtype=np.int64)
        self.row_frees = np.zeros((0, resources))
        self._starts: npt.NDArray[np.int64] | None = None
        self._keys: tuple[tuple[float, float, float], Keys] | None = None

    @property
    def row_start(self) -> npt.NDArray[np.int64]:
        """[S + 1]: where each step's rows start."""
        if self._starts is None:
            self._starts = np.concatenate([[0], np.cumsum(self.nrows)]).astype(np.int64)
        return self._starts

    def sync(self) -> None:
        """Bring the steps of jobs whose version changed up to date (a job rolled back keeps its steps)."""
        current = self.pool.session.job_version[self.job_ids]
        changed = np.flatnonzero(current != self.seen)
        if not changed.size:
            return
        self.seen[changed] = current[changed]
        removed: list[tuple[object, ...]] = []
        added: list[tuple[tuple[object, ...], PlanStep, Job]] = []
        for i in changed:
            job = self.jobs[int(i)]
            plan = self.pool.plan(job)
            if self.plans.get(job.index) is plan:
                continue  # rolled back to the state the steps were built from
            self.plans[job.index] = plan
            removed += self.keys_of.pop(job.index, [])
            keys: list[tuple[object, ...]] = []
            for s, step in enumerate(plan):
                # the first step by the job's entry in the pool, the next ones by the key the job is
                # re-ranked with after each (the cursor's merge of entries and re-queued jobs)
                rank = self.entry_key[job.index] if s == 0 else plan[s - 1].requeue
                assert rank is not None
                keys.append((*rank, s))
                added.append((keys[-1], step, job))
            if keys:
                self.keys_of[job.index] = keys
        if removed:
            self._remove(removed)
        if added:
            self._add(sorted(added, key=lambda a: a[0]))

    def _remove(self, keys: list[tuple[object, ...]]) -> None:
        at = sorted(bisect.bisect_left(self.keys, k) for k in keys)
        starts = self.row_start
        keep_rows = np.ones(self.row_node.size, dtype=np.bool_)
        for p in at:
            keep_rows[starts[p] : starts[p + 1]] = False
        for p in reversed(at):
            del self.keys[p], self.priority[p]
        self.units = np.delete(self.units, at)
        self.holds = np.delete(self.holds, at, axis=0)
        self.nrows = np.delete(self.nrows, at)
        self.row_node, self.row_frees = self.row_node[keep_rows], self.row_frees[keep_rows]
        self._starts = self._keys = None

    def _add(self, added: list[tuple[tuple[object, ...], PlanStep, Job]]) -> None:
        session = self.pool.session
        at = [bisect.bisect_left(self.keys, key) for key, _, _ in added]  # in the arrays as they are
        starts = self.row_start
        units = np.empty(len(added), dtype=object)
        nrows, row_at, nodes, frees = [], [], [], []
        for k, (_, step, _) in enumerate(added):
            units[k] = step.unit
            step_nodes, step_frees = _frees(session, step.unit)
            nrows.append(len(step_nodes))
            row_at += [int(starts[at[k]])] * len(step_nodes)
            nodes += step_nodes
            frees.append(step_frees)
        self.units = np.insert(self.units, at, units)
        self.holds = np.insert(self.holds, at, [step.holds for _, step, _ in added], axis=0)
        self.nrows = np.insert(self.nrows, at, nrows)
        self.row_node = np.insert(self.row_node, row_at, nodes)
        self.row_frees = np.insert(self.row_frees, row_at, np.concatenate(frees), axis=0)
        for k in reversed(range(len(added))):
            key, _, job = added[k]
            self.keys.insert(at[k], key)
            self.priority.insert(at[k], job.priority)
        self._starts = self._keys = None

    def victim_keys(self) -> Keys:
        """The queue's key at every step (`QueueOrderPolicy.victim_keys`): what the queue holds now,
        less what the steps before it and the step itself take; recomputed only when either changed."""
        session = self.pool.session
        allocated = session.allocated_triple(self.queue)
        if self._keys is None or self._keys[0] != allocated:
            victims = _exclusive_cumsum(self.holds) + self.holds
            head, varying, tail = session.queue_order.victim_keys(session, self.queue, allocated, victims)
            self._keys = (allocated, (head, np.asarray(varying, dtype=np.float64), tail))
        return self._keys[1]

    def usable(self, below_priority: int | None) -> int:
        """How many of the steps an action may take: all, or those of jobs below a priority (a prefix)."""
        if below_priority is None:
            return len(self.keys)
        return bisect.bisect_left(self.priority, below_priority)

    def rows(self, lo: int, hi: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """The rows of steps lo..hi-1: each row's step (counted from lo), node and frees."""
        starts = self.row_start
        a, b = int(starts[lo]), int(starts[hi])
        step = np.repeat(np.arange(hi - lo, dtype=np.int64), self.nrows[lo:hi])
        return step, self.row_node[a:b], self.row_frees[a:b]


def _frees(session: Session, unit: VictimUnit) -> tuple[list[int], npt.NDArray[np.float64]]:
    """The nodes a unit's pods run on and what it frees on each: its pods' requests, and for shared-GPU
    pods their devices (an upper bound: a device comes free only once every holder leaves)."""
    nodes = sorted({int(session.node[t]) for t in unit.tasks})
    frees = np.zeros((len(nodes), session.snapshot.resources.size))
    for t in unit.tasks:
        task = session.task(t)
        row = nodes.index(int(session.node[t]))
        frees[row] += task.request
        if task.is_shared_gpu:
            frees[row, GPU] += float(max(1, task.gpu_devices))
    return nodes, frees


class OrderedVictims:
    """The victim steps of one search, in the victim order, block by block (see the module docstring)."""

    def __init__(
        self, session: Session, queues: Sequence[QueueSteps], *, below_priority: int | None, ties: Sequence[int]
    ) -> None:
        """`ties`: each queue's place in the tie order (`tie_order`)."""
        self.session = session
        self.queues = list(queues)
        self.limit = [q.usable(below_priority) for q in self.queues]
        keys = [q.victim_keys() for q in self.queues]
        self.varying = [varying for _, varying, _ in keys]
        self.head_rank = np.asarray(_dense_ranks([head for head, _, _ in keys]), dtype=np.int64)
        self.tail_rank = np.asarray(_dense_ranks([tail for _, _, tail in keys]), dtype=np.int64)
        self.tie_rank = np.asarray(ties, dtype=np.int64)

    def blocks(self) -> Iterator[StepBlock]:
        """Steps in the victim order: first the queue the allocation order puts last, and so on."""
        count = len(self.queues)
        at = [0] * count
        size = FIRST_BLOCK
        while True:
            windows = [(q, at[q], min(self.limit[q], at[q] + size)) for q in range(count) if at[q] < self.limit[q]]
            if not windows:
                return
            parts = [self.queues[q].rows(lo, hi) for q, lo, hi in windows]
            offsets = np.cumsum([0] + [hi - lo for _, lo, hi in windows])
            row_step = np.concatenate([part[0] + offsets[k] for k, part in enumerate(parts)])
            row_node = np.concatenate([part[1] for part in parts])
            row_frees = np.concatenate([part[2] for part in parts])
            units = np.concatenate([self.queues[q].units[lo:hi] for q, lo, hi in windows])
            if len(windows) == 1:
                q, _, hi = windows[0]
                at[q] = hi
                yield StepBlock(units=list(units), row_step=row_step, row_node=row_node, row_frees=row_frees)
            else:
                queue_of = np.concatenate([np.full(hi - lo, q, dtype=np.int64) for q, lo, hi in windows])
                index = np.concatenate([np.arange(lo, hi, dtype=np.int64) for _, lo, hi in windows])
                varying = np.concatenate([self.varying[q][lo:hi] for q, lo, hi in windows])
                # descending by (head, varying, tail, tie); a queue's own steps keep their order
                order = np.lexsort(
                    (index, -self.tie_rank[queue_of], -self.tail_rank[queue_of], -varying, -self.head_rank[queue_of])
                )[:size]
                chosen_queue, chosen = queue_of[order], index[order]
                for q, _, _ in windows:
                    taken = chosen[chosen_queue == q]
                    if taken.size:
                        at[q] = int(taken[-1]) + 1
                place = np.full(len(units), -1, dtype=np.int64)
                place[order] = np.arange(order.size)
                row_place = place[row_step]
                rows = np.flatnonzero(row_place >= 0)
                rows = rows[np.argsort(row_place[rows], kind="stable")]
                yield StepBlock(
                    units=list(units[order]),
                    row_step=row_place[rows],
                    row_node=row_node[rows],
                    row_frees=row_frees[rows],
                )
            size = min(LARGEST_BLOCK, size * 2)


def _exclusive_cumsum(holds: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Per step, what the steps before it held (summed in order, as the cursor adds them up)."""
    out = np.zeros_like(holds)
    if len(holds) > 1:
        out[1:] = np.cumsum(holds[:-1], axis=0)
    return out


def _dense_ranks(values: Sequence[tuple[object, ...]]) -> list[int]:
    ordered = sorted(set(values))
    position = {v: i for i, v in enumerate(ordered)}
    return [position[v] for v in values]


def tie_order(session: Session, queues: tuple[int, ...]) -> tuple[int, ...]:
    """The queues in the tie order (the first goes first in the allocation order); raises if that order
    is not a total order over these queues (the merge relies on it)."""
    policy = session.queue_order

    def compare(left: int, right: int) -> int:
        return policy.tie(session, left, right)

    ordered = sorted(queues, key=functools.cmp_to_key(compare))
    for i, left in enumerate(ordered):
        for right in ordered[i + 1 :]:
            if policy.tie(session, left, right) >= 0:
                raise ValueError("the queue tie order is not total over these queues")
    return tuple(ordered)


class VictimSteps:
    """One action's victim steps per queue, kept across its attempts (see the module docstring)."""

    def __init__(self, pool: VictimPool) -> None:
        self.pool = pool
        self.by_queue: dict[int, QueueSteps] = {}
        self.ties: dict[tuple[int, ...], dict[int, int] | None] = {}  # tie orders are session constants

    def ordered(self, queues: Sequence[int], *, below_priority: int | None = None) -> OrderedVictims | None:
        """The victims of these leaf queues in the victim order, or None where the order must be walked
        unit by unit (`VictimPool.units`): victim guards protect jobs (whole units are then skipped
        per preemptor), the queues compete at more than one level, or their tie order is not total."""
        session = self.pool.session
        if session.victim_guards or len({session.snapshot.queues[q].parent for q in queues}) > 1:
            return None
        key = tuple(queues)
        if key not in self.ties:
            try:
                self.ties[key] = {q: i for i, q in enumerate(tie_order(session, key))}
            except ValueError:
                self.ties[key] = None
        rank = self.ties[key]
        if rank is None:
            return None
        steps = []
        for q in queues:
            known = self.by_queue.get(q)
            if known is None:
                known = self.by_queue[q] = QueueSteps(self.pool, q)
            known.sync()
            steps.append(known)
        return OrderedVictims(session, steps, below_priority=below_priority, ties=[rank[q] for q in queues])
