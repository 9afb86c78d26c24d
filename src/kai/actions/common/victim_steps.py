"""The victim order as arrays: each queue's victims kept in order across attempts, merged in blocks.

`VictimPool.units` walks the victim order one unit at a time, re-ranking queues after every unit.
When the victim queues compete at one level of the queue tree (they share a parent) and no victim
guard protects anyone, the same order can be produced far more cheaply:

* A queue's own sequence of victim steps (its jobs in victim job order, elastic jobs losing their
  surplus pods one at a time and re-ranked, as `_Cursor` yields them) depends only on that queue's
  jobs. It is kept per queue for the whole action and updated only where a job's plan changed, in
  place: a removed step stays, dead, and an added one takes a dead step's place where its key goes
  (`QueueSteps`), so an update costs what changed, not what the queue holds.
* A queue's key after losing the victims before a step and the step itself only goes down from step
  to step (each step takes more away, and the queue order ranks a queue with less allocated
  earlier). Merging such sequences by always taking from the queue the order puts last is the
  same as sorting all steps by (key, queue tie order) in descending order, so the key of every
  step is computed at once (`QueueOrderPolicy.victim_keys`) and the sequences are merged in blocks:
  the next B steps of the merge are always among the next B steps of each queue.

* Any subset of the steps comes in the same relative order (a sort restricted to a subset), so the
  search need not walk every step: `OrderedVictims.relevant` walks only the steps that can make room
  for its preemptor, and the steps on the nodes where they do (see there). On a busy cluster most
  steps (CPU-only pods before a GPU job, say) can never make room, and the walk no longer grows with
  their number. It reads the queues' steps as one set of arrays (`Combined`, a step's id being its
  queue's offset plus its place), so each round is a few array operations whatever the number of
  queues; those arrays are kept across the action's searches and patched where a queue changed.
* The steps are kept for the whole session: the next action (preempt after reclaim) takes them over,
  re-keying only the jobs its own pool ranks differently (`QueueSteps.adopt`).

Both give exactly the order `VictimPool.units` gives; the victim search reads either.
"""

from __future__ import annotations

import bisect
import functools
import weakref
from collections.abc import Iterator, Sequence
from typing import Literal

import msgspec
import numpy as np
import numpy.typing as npt

from kai.actions.common.victims import PlanStep, VictimPool, VictimUnit
from kai.core.model import BoolVector, Job
from kai.core.session import Session

FIRST_BLOCK = 32
FEW_NODES = 8  # a resource some reachable node is short of is watched per node below 1 node in 8
LARGEST_BLOCK = 1024

Keys = tuple[tuple[object, ...], npt.NDArray[np.float64], tuple[object, ...]]
StepKey = tuple[float, ...]  # sorts as the victim order: the first step has the smallest key
Needs = list[tuple[int, float]]  # (resource, the least amount a preemptor pod asks for)
EPS = 1e-9


class StepBlock(msgspec.Struct, frozen=True, kw_only=True):
    """Consecutive victim steps: their units, and per (step, node) row the step, the node and what the
    step frees there (its pods' requests; a shared-GPU pod's devices, an upper bound)."""

    units: list[VictimUnit]
    keys: list[StepKey]  # each step's place in the victim order (`OrderedVictims.key`)
    row_step: npt.NDArray[np.int64]  # ascending
    row_node: npt.NDArray[np.int64]
    row_frees: npt.NDArray[np.float64]  # [rows, R]

    def after(self, at: int) -> StepBlock:
        """The steps from `at` on."""
        rows = self.row_step >= at
        return StepBlock(
            units=self.units[at:],
            keys=self.keys[at:],
            row_step=self.row_step[rows] - at,
            row_node=self.row_node[rows],
            row_frees=self.row_frees[rows],
        )


class QueueSteps:
    """One leaf queue's victim steps in the queue's own victim order, kept in step with the pool.

    Steps are arrays in order (units, what the job holds, rows per step and the rows' nodes and frees);
    a sync applies the changed jobs' removals and insertions in one pass. Removed steps (evicted jobs,
    jobs that lost the head of their plan) stay in place, dead (`alive`): holding nothing, their rows
    on no node (`nowhere`), freeing nothing, so that no array is rebuilt and every other step keeps its
    place. An added step takes the place of a dead step where its key goes, if there is one with room
    for its rows (a job re-ranked after losing pods mostly takes the place of its own removed steps);
    otherwise the arrays are rebuilt, without the dead steps. Each step keeps the rows it was built
    with (`reserved`), of which it uses the first `nrows`; the others are on no node and free nothing.
    """

    def __init__(self, pool: VictimPool, queue: int) -> None:
        self._pool = weakref.ref(pool)  # not the session's: the session keeps these steps
        self.queue = queue
        entries = pool.by_queue.get(queue, [])
        self.entry_key = {job.index: key for key, job in entries}
        self.jobs = [job for _, job in entries]
        self.position = {job.index: i for i, job in enumerate(self.jobs)}
        self.job_ids = np.array([job.index for job in self.jobs], dtype=np.int64)
        self.seen = np.full(len(self.jobs), -1, dtype=np.int64)  # job versions the steps were built at
        self.plans: dict[int, tuple[PlanStep, ...]] = {}  # the plans the steps were built from
        self.keys_of: dict[int, list[tuple[object, ...]]] = {}
        self.keys: list[tuple[object, ...]] = []  # sorted, the dead steps' too
        self.place: dict[tuple[object, ...], int] = {}  # each live step's place by its key
        self.priority: list[int] = []
        resources = pool.session.snapshot.resources.size
        self.units = np.empty(0, dtype=object)
        self.holds = np.zeros((0, 3), order="F")  # by column: see `victim_keys`
        self.nrows = np.zeros(0, dtype=np.int64)
        self.reserved = np.zeros(0, dtype=np.int64)  # each step's rows, its nrows first
        self.row_node = np.zeros(0, dtype=np.int64)
        self.row_frees = np.zeros((0, resources))
        self.alive = np.zeros(0, dtype=np.bool_)  # not removed since the arrays were last rebuilt
        self.nowhere = pool.session.snapshot.nodes.count  # the node of a dead step's rows
        self._starts: npt.NDArray[np.int64] | None = None
        self._keys: tuple[tuple[float, float, float], Keys, npt.NDArray[np.float64]] | None = None
        self._row_step: npt.NDArray[np.int64] | None = None  # derived from the steps, dropped when they change
        self._freeing: dict[tuple[int, ...], BoolVector] = {}
        self.version = 0  # bumped whenever the steps change (`Combined` patches a queue's segment by it)
        self.rebuilt = 0  # the version at which the arrays were last rebuilt
        self.patched: list[tuple[int, npt.NDArray[np.int64]]] = []  # since: (version, the places it changed)
        self.keys_version = 0  # bumped whenever the victim keys are computed again

    @property
    def pool(self) -> VictimPool:
        """The pool of the action these steps serve (set by `adopt` for each action)."""
        pool = self._pool()
        assert pool is not None, "victim steps are used only while their action's pool lives"
        return pool

    def serves(self, pool: VictimPool) -> bool:
        return self._pool() is pool

    @property
    def row_start(self) -> npt.NDArray[np.int64]:
        """[S + 1]: where each step's rows start."""
        if self._starts is None:
            self._starts = np.concatenate([[0], np.cumsum(self.reserved)]).astype(np.int64)
        return self._starts

    def _rebuilt(self) -> None:
        """The arrays were rebuilt: every derived array is made again when next read."""
        self._starts = self._keys = self._row_step = None
        self.version += 1
        self.rebuilt = self.version
        self.patched = []
        self._freeing = {}

    @property
    def row_step(self) -> npt.NDArray[np.int64]:
        """[rows]: each row's step."""
        if self._row_step is None:
            self._row_step = np.repeat(np.arange(len(self.nrows), dtype=np.int64), self.reserved)
        return self._row_step

    def freeing(self, resources: tuple[int, ...]) -> BoolVector:
        """[steps]: frees some amount of one of these resources on some node."""
        known = self._freeing.get(resources)
        if known is None:
            known = self._freeing[resources] = np.zeros(len(self.nrows), dtype=np.bool_)
            known[self.row_step[np.any(self.row_frees[:, list(resources)] > 0.0, axis=1)]] = True
            known &= self.alive
        return known

    def step_rows(self, steps: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The rows of these steps, a step's rows together: (each row's place in `steps`, the row)."""
        counts = self.nrows[steps]
        total = int(counts.sum())
        place = np.repeat(np.arange(len(steps), dtype=np.int64), counts)
        return place, _ranges(self.row_start[steps], counts, total)

    def adopt(self, pool: VictimPool) -> bool:
        """Serve a later action's pool (built when that action started): jobs whose entry in the pool
        changed are re-keyed at the next sync. False when the pool has a job these steps never had
        (the steps must then be built again)."""
        entries = pool.by_queue.get(self.queue, [])
        if any(job.index not in self.position for _, job in entries):
            return False
        for key, job in entries:
            if self.entry_key[job.index] != key:
                self.entry_key[job.index] = key
                self.plans.pop(job.index, None)  # its steps are keyed again, even with the same plan
                self.seen[self.position[job.index]] = -1
        self._pool = weakref.ref(pool)
        return True

    def sync(self) -> None:
        """Bring the steps of jobs whose version changed up to date (a job rolled back keeps its steps)."""
        current = self.pool.session.job_version[self.job_ids]
        changed = np.flatnonzero(current != self.seen)
        if not changed.size:
            return
        self.seen[changed] = current[changed]
        jobs = [self.jobs[i] for i in changed.tolist()]
        removed: list[tuple[object, ...]] = []
        added: list[tuple[tuple[object, ...], PlanStep, Job]] = []
        for job, plan in zip(jobs, self.pool.plan_all(jobs), strict=True):
            old = self.plans.get(job.index)
            if old is plan:
                continue  # rolled back to the state the steps were built from
            self.plans[job.index] = plan
            old_keys = self.keys_of.pop(job.index, [])
            lost = _lost_head(old, plan)
            keys: list[tuple[object, ...]] = []
            kept: set[tuple[object, ...]] = set()  # old keys of steps that stay where they are
            for s, step in enumerate(plan):
                # the first step by the job's entry in the pool, the next ones by the key the job is
                # re-ranked with after each (the cursor's merge of entries and re-queued jobs)
                rank = self.entry_key[job.index] if s == 0 else plan[s - 1].requeue
                assert rank is not None
                if lost is not None and old_keys[lost + s][:-1] == rank:
                    # the same step as before, ranked the same: it keeps its key and its place (only
                    # the step number differs, which orders the job's own steps alike)
                    keys.append(old_keys[lost + s])
                    kept.add(keys[-1])
                    continue
                keys.append((*rank, s))
                added.append((keys[-1], step, job))
            removed += [key for key in old_keys if key not in kept]
            if keys:
                self.keys_of[job.index] = keys
        if removed:
            self._drop(removed)
        if added:
            self._insert(sorted(added, key=lambda a: a[0]))

    def _drop(self, removed: list[tuple[object, ...]]) -> None:
        """Take out the steps keyed `removed`: they stay in place, dead (see the class docstring), so each
        array changes only at their places."""
        gone = sorted(self.place.pop(k) for k in removed)
        starts, masks = self.row_start, list(self._freeing.values())
        for at in gone:  # a few steps: one at a time, cheaper than arrays of their places
            self.alive[at], self.holds[at] = False, 0.0
            start = int(starts[at])
            self.row_node[start : start + int(self.nrows[at])] = self.nowhere
            for mask in masks:
                mask[at] = False
        self._patched(np.array(gone, dtype=np.int64))

    def _patched(self, places: npt.NDArray[np.int64]) -> None:
        """These places changed in place: the keys are computed again, `Combined` rewrites just them."""
        self._keys = None
        self.version += 1
        self.patched.append((self.version, places))

    def _insert(self, added: list[tuple[tuple[object, ...], PlanStep, Job]]) -> None:
        """Put in the `added` steps (sorted by key): each in the place of a dead step where its key goes
        (keeping every key in order), while there is one with room for its rows; the rest by a rebuild."""
        places: list[int] = []
        for k, (key, step, job) in enumerate(added):
            at = self._free_place(key, len(step.nodes))
            if at is None:
                self._update(added[k:])  # the steps placed so far are kept like any other
                return
            self._fill(at, key, step, job)
            places.append(at)
        self._patched(np.array(places, dtype=np.int64))

    def _free_place(self, key: tuple[object, ...], rows: int) -> int | None:
        """A dead step's place that `key` can take with every key staying in order (the place where
        bisection puts it, or the one before), with room for this many rows; None if neither is."""
        at = bisect.bisect_left(self.keys, key)  # keys[at - 1] < key <= keys[at]
        for place in (at, at - 1):
            if 0 <= place < len(self.keys) and not self.alive[place] and self.reserved[place] >= rows:
                return place
        return None

    def _fill(self, at: int, key: tuple[object, ...], step: PlanStep, job: Job) -> None:
        """Write a step into a dead step's place: its first rows hold the step's, the others none."""
        self.keys[at], self.priority[at] = key, job.priority
        self.units[at], self.holds[at], self.alive[at] = step.unit, step.holds, True
        self.place[key] = at
        start, count, room = int(self.row_start[at]), len(step.nodes), int(self.reserved[at])
        self.nrows[at] = count
        self.row_node[start : start + count], self.row_node[start + count : start + room] = step.nodes, self.nowhere
        self.row_frees[start : start + count], self.row_frees[start + count : start + room] = step.frees, 0.0
        for resources, mask in self._freeing.items():
            mask[at] = bool(np.any(step.frees[:, list(resources)] > 0.0))

    def _update(self, added: list[tuple[tuple[object, ...], PlanStep, Job]]) -> None:
        """Take out the dead steps and put in the `added` ones (sorted by key) where their keys go, each
        array rebuilt once: an added step goes before the kept step its key comes before."""
        old = len(self.keys)
        kept = np.flatnonzero(self.alive)
        kept_keys = [self.keys[i] for i in kept.tolist()]
        at = [bisect.bisect_left(kept_keys, key) for key, _, _ in added]  # among the kept steps
        # where each step goes: a kept step after the added steps that go before it (`at` ascends), an
        # added step after the kept steps before it and the added steps before it
        before = np.asarray(at, dtype=np.int64)
        new = np.arange(len(added), dtype=np.int64)
        src = np.empty(kept.size + new.size, dtype=np.int64)
        src[np.arange(kept.size) + np.searchsorted(before, np.arange(kept.size), side="right")] = kept
        src[before + new] = old + new
        order = src.tolist()
        keys = [*self.keys, *(key for key, _, _ in added)]
        priority = [*self.priority, *(job.priority for _, _, job in added)]
        self.keys = [keys[i] for i in order]
        self.priority = [priority[i] for i in order]
        units = np.empty(len(added), dtype=object)
        nodes: list[int] = []
        for k, (_, step, _) in enumerate(added):
            units[k] = step.unit
            nodes += step.nodes
        resources = self.row_frees.shape[1]
        frees = np.concatenate([step.frees for _, step, _ in added]) if added else np.zeros((0, resources))
        holds = np.array([step.holds for _, step, _ in added], dtype=np.float64).reshape(len(added), 3)
        nrows = np.array([len(step.nodes) for _, step, _ in added], dtype=np.int64)
        rows = self.row_node.size
        starts = np.concatenate([self.row_start[:-1], rows + np.cumsum(nrows) - nrows])[src]
        self.units = np.concatenate([self.units, units])[src]
        self.holds = np.asfortranarray(np.concatenate([self.holds, holds])[src])  # by column: see `victim_keys`
        self.nrows = np.concatenate([self.nrows, nrows])[src]
        row_src = _ranges(starts, self.nrows, int(self.nrows.sum()))
        self.row_node = np.concatenate([self.row_node, np.asarray(nodes, dtype=np.int64)])[row_src]
        self.row_frees = np.concatenate([self.row_frees, frees])[row_src]
        self.alive = np.ones(len(self.keys), dtype=np.bool_)
        self.place = {key: at for at, key in enumerate(self.keys)}
        self.reserved = self.nrows.copy()
        self._rebuilt()

    def victim_keys(self) -> tuple[Keys, npt.NDArray[np.float64]]:
        """The queue's key at every step (`QueueOrderPolicy.victim_keys`): what the queue holds now,
        less what the steps before it and the step itself take; recomputed only when either changed.
        With the varying part negated (ascending from step to step). The holdings are kept column by
        column: the running sums and the policy's per-resource terms then read each resource's values
        one after another (the same sums in the same order, a third less time than row by row)."""
        session = self.pool.session
        allocated = session.allocated_triple(self.queue)
        if self._keys is None or self._keys[0] != allocated:
            # per step, what it and the steps before it hold, summed in order (as the cursor adds them up)
            victims = np.cumsum(self.holds, axis=0)
            head, varying, tail = session.queue_order.victim_keys(session, self.queue, allocated, victims)
            values = np.asarray(varying, dtype=np.float64)
            self._keys = (allocated, (head, values, tail), -values)
            self.keys_version += 1
        return self._keys[1], self._keys[2]

    def usable(self, below_priority: int | None) -> int:
        """How many of the steps an action may take: all, or those of jobs below a priority (a prefix)."""
        if below_priority is None:
            return len(self.keys)
        return bisect.bisect_left(self.priority, below_priority)


class OrderedVictims:
    """The victim steps of one search, in the victim order, block by block (see the module docstring)."""

    def __init__(
        self,
        session: Session,
        queues: Sequence[QueueSteps],
        *,
        below_priority: int | None,
        ties: Sequence[int],
        combined: Combined | None = None,
    ) -> None:
        """`ties`: each queue's place in the tie order (`tie_order`); `combined`: these queues' steps as
        one set of arrays kept from earlier searches (brought up to date when the walk reads it)."""
        self.session = session
        self.queues = list(queues)
        self.every_step = below_priority is None
        self.limit = [q.usable(below_priority) for q in self.queues]
        keyed = [q.victim_keys() for q in self.queues]
        keys = [k for k, _ in keyed]
        self.varying = [varying for _, varying, _ in keys]
        self.descending = [negated[:limit] for (_, negated), limit in zip(keyed, self.limit, strict=True)]
        self.head_rank = np.asarray(_dense_ranks([head for head, _, _ in keys]), dtype=np.int64)
        self.tail_rank = np.asarray(_dense_ranks([tail for _, _, tail in keys]), dtype=np.int64)
        self.tie_rank = np.asarray(ties, dtype=np.int64)
        # per queue (head, tail, tie) ranks as Python numbers, for the reads of one queue at a time
        self.ranks = list(zip(self.head_rank.tolist(), self.tail_rank.tolist(), self.tie_rank.tolist(), strict=True))
        self._combined = combined
        self._fresh = False

    def key(self, q: int, p: int) -> StepKey:
        """Step p of queue q's place in the victim order (descending head, varying, tail, tie; then p)."""
        return (
            -float(self.head_rank[q]),
            -float(self.varying[q][p]),
            -float(self.tail_rank[q]),
            -float(self.tie_rank[q]),
            float(p),
        )

    def keys(self, queue_of: npt.NDArray[np.int64], index: npt.NDArray[np.int64]) -> list[StepKey]:
        """`key` of each of these steps."""
        varying = np.empty(index.size)
        for q in np.unique(queue_of).tolist():
            chosen = queue_of == q
            varying[chosen] = self.varying[q][index[chosen]]
        return list(
            zip(
                (-self.head_rank[queue_of]).astype(np.float64).tolist(),
                (-varying).tolist(),
                (-self.tail_rank[queue_of]).astype(np.float64).tolist(),
                (-self.tie_rank[queue_of]).astype(np.float64).tolist(),
                index.astype(np.float64).tolist(),
                strict=True,
            )
        )

    def merge(
        self, picks: Sequence[npt.NDArray[np.int64]], size: int | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Some steps of each queue (ascending) in the victim order, the first `size` if given: (queue, step)."""
        parts = [(q, pos) for q, pos in enumerate(picks) if pos.size]
        if not parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        queue_of = np.concatenate([np.full(pos.size, q, dtype=np.int64) for q, pos in parts])
        index = np.concatenate([pos for _, pos in parts])
        if len(parts) > 1:
            varying = np.concatenate([self.varying[q][pos] for q, pos in parts])
            # descending by (head, varying, tail, tie); a queue's own steps keep their order
            order = np.lexsort(
                (index, -self.tie_rank[queue_of], -self.tail_rank[queue_of], -varying, -self.head_rank[queue_of])
            )
            queue_of, index = queue_of[order], index[order]
        if size is not None:
            queue_of, index = queue_of[:size], index[:size]
        return queue_of, index

    def through(self, q: int, p: int) -> list[int]:
        """Per queue, how many of its usable steps come before step p of queue q, or are that step."""
        ranks = self.ranks  # read one queue at a time: Python numbers
        head, after = ranks[q][0], ranks[q][1:]
        negated = -float(self.varying[q][p])
        out = []
        for k, limit in enumerate(self.limit):
            if k == q:
                out.append(p + 1)
            elif ranks[k][0] != head:
                out.append(limit if ranks[k][0] > head else 0)
            else:
                # a queue's varying keys only go down from step to step
                side: Literal["left", "right"] = "right" if ranks[k][1:] > after else "left"
                out.append(int(self.descending[k].searchsorted(negated, side=side)))
        return out

    def block(
        self, queue_of: npt.NDArray[np.int64], index: npt.NDArray[np.int64], only: BoolVector | None = None
    ) -> StepBlock:
        """These steps, in this order, as a block; with `only`, the rows on other nodes are left out."""
        units = np.empty(index.size, dtype=object)
        row_step, row_node, row_frees = [], [], []
        for q in np.unique(queue_of).tolist():
            chosen = np.flatnonzero(queue_of == q)
            steps = self.queues[q]
            units[chosen] = steps.units[index[chosen]]
            place, rows = steps.step_rows(index[chosen])
            row_step.append(chosen[place])
            row_node.append(steps.row_node[rows])
            row_frees.append(steps.row_frees[rows])
        resources = self.session.snapshot.resources.size
        step = np.concatenate(row_step) if row_step else np.zeros(0, dtype=np.int64)
        node = np.concatenate(row_node) if row_node else np.zeros(0, dtype=np.int64)
        frees = np.concatenate(row_frees) if row_frees else np.zeros((0, resources))
        order = np.argsort(step, kind="stable")
        if only is not None:
            order = order[only[node[order]]]
        return StepBlock(
            units=list(units),
            keys=self.keys(queue_of, index),
            row_step=step[order],
            row_node=node[order],
            row_frees=frees[order],
        )

    def blocks(self) -> Iterator[StepBlock]:
        """Every step in the victim order: first the queue the allocation order puts last, and so on."""
        count = len(self.queues)
        live = [np.flatnonzero(q.alive[:limit]) for q, limit in zip(self.queues, self.limit, strict=True)]
        at = [0] * count  # per queue, how many of its live steps were taken
        size = FIRST_BLOCK
        while True:
            picks = [live[q][at[q] : at[q] + size] for q in range(count)]
            queue_of, index = self.merge(picks, size)
            if not index.size:
                return
            for q in range(count):
                at[q] += int(np.count_nonzero(queue_of == q))
            yield self.block(queue_of, index)
            size = min(LARGEST_BLOCK, size * 2)

    def relevant(
        self, *, reachable: BoolVector, room: npt.NDArray[np.float64], needs: Needs
    ) -> Iterator[tuple[bool, StepBlock]]:
        """The steps that can matter to a preemptor, in the victim order, as (catch-up?, block) pairs.

        `reachable`: the nodes the preemptor may use; `room`: what each node has free [n, R]; `needs`:
        per resource all the preemptor's pods ask for, the least any asks. A node short of one of them
        holds no preemptor pod, and only steps that free some of a resource a node is short of (the
        candidates) can end that, so candidates are walked alone, in the victim order, a growing block
        at a time, adding up what they free per node. A node joins the walk once they would leave it
        short of nothing (open nodes join at once). Each round yields, in the victim order, the steps
        up to the last candidate with a pod on a joined node, with only those nodes' rows: first
        (catch-up) the steps already behind the walk on the nodes that just joined, which leave them
        short still (they had not joined), then the new steps. A node that has not joined is short at
        every step up to the walk's last candidate, so no step there could make room on it.
        """
        every = self.combined()
        count = len(self.queues)
        have = room.copy()  # what each node has once the candidates behind the walk are gone
        fine = reachable.copy()
        # per resource short somewhere, the nodes short of it: where few are, the steps on them are the
        # candidates for it, else the steps that free some of it anywhere (both hold every candidate)
        widely: list[int] = []
        few: list[npt.NDArray[np.int64]] = []
        for r, need in needs:
            lacking = reachable & (room[:, r] + EPS < need)
            fine &= ~lacking
            nodes = np.flatnonzero(lacking)
            if nodes.size * FEW_NODES > reachable.size:
                widely.append(r)
            elif nodes.size:
                few.append(nodes)
        few.append(np.flatnonzero(fine))  # every step on an open node is a candidate
        watched = np.concatenate(few)  # a node may be in twice (short of two resources)
        # the candidates (usable steps on watched nodes or freeing a widely short resource), ascending:
        # a step's id is its queue's offset plus its place in the queue
        limit = np.asarray(self.limit, dtype=np.int64)
        usable = every.valid if self.every_step else every.place < limit[every.queue_of]
        wanted = every.freeing(tuple(widely)) if widely else np.zeros(every.size, dtype=np.bool_)
        if watched.size:
            wanted = wanted | every.on(watched)
        candidates = np.flatnonzero(wanted & usable)
        ends = np.searchsorted(candidates, every.offset[1:])
        cut = np.zeros(count, dtype=np.int64)  # per queue, the steps behind the walk
        joined = np.zeros(reachable.size, dtype=np.bool_)
        on_joined = np.zeros(0, dtype=np.int64)  # the steps on joined nodes (ids, ascending)
        size = FIRST_BLOCK
        while True:
            # each queue's next `size` candidates; the first `size` of them in the victim order
            starts = np.searchsorted(candidates, every.offset[:-1] + cut)
            taken = np.minimum(ends - starts, size)
            window = candidates[_ranges(starts, taken, int(taken.sum()))]
            chosen = self._in_order(every, window)[:size]
            if chosen.size:
                last = int(chosen[-1])
                frontier = np.asarray(self.through(int(every.queue_of[last]), int(every.place[last])), dtype=np.int64)
                # what they free, added up queue by queue and step by step (as the walk takes them)
                rows = every.step_rows(np.sort(chosen))[1]
                np.add.at(have, every.row_node[rows], every.frees(rows))
            else:
                frontier = limit
            ready = reachable & ~joined
            for r, need in needs:
                ready &= have[:, r] + EPS >= need
            fresh = np.flatnonzero(ready)
            if fresh.size:
                on_fresh = np.flatnonzero(every.on(fresh))
                joined[fresh] = True
                if cut.any():
                    old = on_fresh[every.place[on_fresh] < cut[every.queue_of[on_fresh]]]
                    if old.size:
                        yield True, self._block_of(every, self._in_order(every, old), ready)
                on_joined = np.union1d(on_joined, on_fresh) if on_joined.size else on_fresh
            place, queue = every.place[on_joined], every.queue_of[on_joined]
            new = on_joined[(place >= cut[queue]) & (place < frontier[queue])]
            if new.size:
                yield False, self._block_of(every, self._in_order(every, new), joined)
            cut = frontier
            if not chosen.size:
                return
            size = min(LARGEST_BLOCK, size * 2)

    def combined(self) -> Combined:
        """The queues' steps as one set of arrays, brought up to date once per search."""
        if self._combined is None:
            self._combined = Combined(self.queues, nodes=self.session.snapshot.nodes.count)
        elif not self._fresh:
            self._combined.refresh()
        self._fresh = True
        return self._combined

    def _in_order(self, every: Combined, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """These steps (ids) in the victim order: descending by (head, varying, tail, tie), then place."""
        if not ids.size:
            return ids
        queue = every.queue_of[ids]
        order = np.lexsort(
            (
                every.place[ids],
                -self.tie_rank[queue],
                -self.tail_rank[queue],
                -every.varying[ids],
                -self.head_rank[queue],
            )
        )
        ordered: npt.NDArray[np.int64] = ids[order]
        return ordered

    def _block_of(self, every: Combined, ids: npt.NDArray[np.int64], only: BoolVector) -> StepBlock:
        """These steps (ids, in this order) as a block, with only their rows on the `only` nodes."""
        place, rows = every.step_rows(ids)
        keep = only[every.row_node[rows]]
        queue = every.queue_of[ids]
        keys: list[StepKey] = list(
            zip(
                (-self.head_rank[queue]).astype(np.float64).tolist(),
                (-every.varying[ids]).tolist(),
                (-self.tail_rank[queue]).astype(np.float64).tolist(),
                (-self.tie_rank[queue]).astype(np.float64).tolist(),
                every.place[ids].astype(np.float64).tolist(),
                strict=True,
            )
        )
        return StepBlock(
            units=every.units(ids),
            keys=keys,
            row_step=place[keep],
            row_node=every.row_node[rows[keep]],
            row_frees=every.frees(rows[keep]),
        )


class Combined:
    """The steps of one set of queues as one set of arrays, kept across the searches of an action: each
    queue owns a segment of the step arrays and one of the row arrays, with room to spare, and only the
    segments of queues whose steps or keys changed since are written again (`refresh`). A step's id is
    its queue's offset plus its place in the queue (so ids ascend by queue, then place), and a row's id
    its queue's row offset plus its place among the queue's rows; the spare ids of a segment are never
    valid (`valid`), and the spare rows, like a dead step's, lie on no node (node number `nodes`).
    Besides what every round reads of every step (keys, nodes), the units and freed amounts are kept
    here too, so a round reads those of the steps it takes with one index whatever their queues."""

    def __init__(self, queues: Sequence[QueueSteps], *, nodes: int) -> None:
        self.queues = list(queues)
        self.nodes = nodes
        # each queue's room (steps, rows): what it has now and a quarter more to grow into
        self.room = [(_roomy(len(q.keys)), _roomy(q.row_node.size)) for q in queues]
        self.offset = _segments([steps for steps, _ in self.room])
        self.row_offset = _segments([rows for _, rows in self.room])
        self.size = int(self.offset[-1])
        self.queue_of = np.repeat(np.arange(len(queues), dtype=np.int64), np.diff(self.offset))
        self.place = np.arange(self.size, dtype=np.int64) - self.offset[self.queue_of]
        self.valid = np.zeros(self.size, dtype=np.bool_)  # a step of its queue (not a spare id)
        self.varying = np.zeros(self.size)
        # per step, how many rows it has and where they start among all rows (a queue's rows in its
        # segment, each step's rows together and in step order); per row, its node and its step
        self.nrows = np.zeros(self.size, dtype=np.int64)
        self.row_start = np.zeros(self.size, dtype=np.int64)
        self.row_node = np.full(int(self.row_offset[-1]), nodes, dtype=np.int64)  # `nodes`: on no node
        self.row_step = np.zeros(int(self.row_offset[-1]), dtype=np.int64)
        # what the walk reads only for the steps a round takes, kept too: one read instead of one per queue
        self.unit = np.empty(self.size, dtype=object)
        self.row_frees = np.zeros((int(self.row_offset[-1]), queues[0].row_frees.shape[1] if queues else 0))
        self._freeing: dict[tuple[int, ...], BoolVector] = {}
        # per segment, the queue's version and keys_version it was written at, and how many of the queue's
        # patches it holds
        self._seen: list[tuple[int, int, int]] = [(-1, -1, 0)] * len(queues)
        self.refresh()

    def fits(self, queues: Sequence[QueueSteps]) -> bool:
        """Can these queues' steps (the same queue objects) be written into the segments?"""
        if len(queues) != len(self.queues) or any(a is not b for a, b in zip(queues, self.queues, strict=True)):
            return False
        room = zip(queues, self.room, strict=True)
        return all(len(q.keys) <= steps and q.row_node.size <= rows for q, (steps, rows) in room)

    def refresh(self) -> None:
        """Bring up to date the segments of the queues whose steps or keys changed since they were written:
        only the steps the queue changed in place, where it was not rebuilt since (`QueueSteps.patched`)."""
        for k, q in enumerate(self.queues):
            version, keys_version, consumed = self._seen[k]
            if version != q.version:
                if version >= q.rebuilt:  # the patches from `consumed` on are those made since
                    for _, places in q.patched[consumed:]:
                        self._patch(k, q, places)  # a place patched twice is copied twice, the same
                else:
                    self._write_steps(k, q)
            if version != q.version or keys_version != q.keys_version:
                a = int(self.offset[k])
                self.varying[a : a + len(q.keys)] = q.victim_keys()[0][1][: len(q.keys)]
            self._seen[k] = (q.version, q.keys_version, len(q.patched))

    def _write_steps(self, k: int, q: QueueSteps) -> None:
        """Queue k's segments from its steps (the spare ids invalid, the spare rows nowhere)."""
        a, b, n = int(self.offset[k]), int(self.offset[k + 1]), len(q.keys)
        ra, rb, rows = int(self.row_offset[k]), int(self.row_offset[k + 1]), q.row_node.size
        self.valid[a : a + n], self.valid[a + n : b] = q.alive, False
        self.nrows[a : a + n], self.nrows[a + n : b] = q.nrows, 0
        self.row_start[a : a + n] = ra + q.row_start[:-1]
        self.row_node[ra : ra + rows], self.row_node[ra + rows : rb] = q.row_node, self.nodes
        self.row_step[ra : ra + rows] = a + q.row_step
        self.unit[a : a + n] = q.units
        self.row_frees[ra : ra + rows] = q.row_frees
        for resources, mask in self._freeing.items():
            mask[a : a + n], mask[a + n : b] = q.freeing(resources), False

    def _patch(self, k: int, q: QueueSteps, places: npt.NDArray[np.int64]) -> None:
        """Queue k changed these steps in place (removed or written anew): copy them and their rows."""
        a, ra = int(self.offset[k]), int(self.row_offset[k])
        masks = [(mask, q.freeing(resources)) for resources, mask in self._freeing.items()]
        starts = q.row_start
        for at in places.tolist():  # a few steps: one at a time, cheaper than arrays of their places
            self.valid[a + at], self.unit[a + at], self.nrows[a + at] = q.alive[at], q.units[at], q.nrows[at]
            start, end = int(starts[at]), int(starts[at + 1])
            self.row_node[ra + start : ra + end] = q.row_node[start:end]
            self.row_frees[ra + start : ra + end] = q.row_frees[start:end]
            for mask, theirs in masks:
                mask[a + at] = theirs[at]

    def freeing(self, resources: tuple[int, ...]) -> BoolVector:
        """[steps]: frees some amount of one of these resources on some node (kept, patched per segment)."""
        known = self._freeing.get(resources)
        if known is None:
            known = self._freeing[resources] = np.zeros(self.size, dtype=np.bool_)
            for k, q in enumerate(self.queues):
                a = int(self.offset[k])
                known[a : a + len(q.keys)] = q.freeing(resources)
        return known

    def on(self, nodes: npt.NDArray[np.int64]) -> BoolVector:
        """[steps]: has a pod on one of these nodes."""
        flag = np.zeros(self.nodes + 1, dtype=np.bool_)  # the last: no node (spare and dead rows)
        flag[nodes] = True
        out = np.zeros(self.size, dtype=np.bool_)
        out[self.row_step[flag[self.row_node]]] = True
        return out

    def step_rows(self, ids: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The rows of these steps, a step's rows together: (each row's place in `ids`, the row)."""
        counts = self.nrows[ids]
        total = int(counts.sum())
        place = np.repeat(np.arange(ids.size, dtype=np.int64), counts)
        return place, _ranges(self.row_start[ids], counts, total)

    def frees(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """What these rows free [rows, R]."""
        return self.row_frees[rows]

    def units(self, ids: npt.NDArray[np.int64]) -> list[VictimUnit]:
        """The units of these steps, in this order."""
        units: list[VictimUnit] = self.unit[ids].tolist()
        return units


def _lost_head(old: tuple[PlanStep, ...] | None, plan: tuple[PlanStep, ...]) -> int | None:
    """How many steps a job's plan lost from its head when the rest are its old steps (the same units,
    holdings and re-rank keys: a job that lost its first surplus pods), else None."""
    if old is None or len(plan) > len(old):
        return None
    lost = len(old) - len(plan)
    for new, before in zip(plan, old[lost:], strict=True):
        if new.unit != before.unit or new.holds != before.holds or new.requeue != before.requeue:
            return None
    return lost


def _ranges(starts: npt.NDArray[np.int64], counts: npt.NDArray[np.int64], total: int) -> npt.NDArray[np.int64]:
    """The integer ranges [start, start + count) one after another."""
    # each range's start, less where its first element falls among all, plus each element's place
    shift = starts - (np.cumsum(counts) - counts)
    return np.repeat(shift, counts) + np.arange(total, dtype=np.int64)


def _roomy(count: int) -> int:
    """The size of a segment for `count` steps (or rows): room for a quarter more, at least 16 more."""
    return count + count // 4 + 16


def _segments(sizes: Sequence[int]) -> npt.NDArray[np.int64]:
    """Where segments of these sizes start one after another, and the end [len + 1]."""
    return np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)


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


_SHARED: weakref.WeakKeyDictionary[Session, dict[int, QueueSteps]] = weakref.WeakKeyDictionary()


def _shared(session: Session) -> dict[int, QueueSteps]:
    """The session's victim steps per queue, kept from one action to the next."""
    steps = _SHARED.get(session)
    if steps is None:
        steps = _SHARED[session] = {}
    return steps


class VictimSteps:
    """An action's victim steps per queue, kept across its attempts and handed on to the session's next
    action, which re-keys the jobs its own pool ranks differently (see the module docstring)."""

    def __init__(self, pool: VictimPool) -> None:
        self.pool = pool
        self.by_queue = _shared(pool.session)  # every action of the session keeps the same steps
        self.ties: dict[tuple[int, ...], dict[int, int] | None] = {}  # tie orders are session constants
        self.combined: dict[tuple[int, ...], Combined] = {}  # per set of queues, kept across searches
        # the job versions last looked at, and the queues with a job changed since whose steps have not
        # caught up (all at first: the steps may come from an earlier action, or be new)
        self.versions = pool.session.job_version.copy()
        self.job_queue = np.array([job.queue for job in pool.session.snapshot.jobs], dtype=np.int64)
        self.stale: set[int] = set(pool.queues)

    def _note_changes(self) -> None:
        """Mark stale the queues with a job whose version moved since the last look: one comparison over
        every job per search instead of one per queue (most queues have no job changed between two)."""
        current = self.pool.session.job_version
        changed = np.flatnonzero(current != self.versions)
        if changed.size:
            self.versions[changed] = current[changed]
            self.stale.update(self.job_queue[changed].tolist())

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
        self._note_changes()
        steps = []
        for q in queues:
            known = self.by_queue.get(q)
            if known is None or not known.serves(self.pool):
                self.stale.add(q)
                if known is not None and not known.adopt(self.pool):
                    known = None
            if known is None:
                known = self.by_queue[q] = QueueSteps(self.pool, q)
            if q in self.stale:
                known.sync()
                self.stale.discard(q)
            steps.append(known)
        combined = self.combined.get(key)
        if combined is None or not combined.fits(steps):
            combined = self.combined[key] = Combined(steps, nodes=session.snapshot.nodes.count)
        return OrderedVictims(
            session, steps, below_priority=below_priority, ties=[rank[q] for q in queues], combined=combined
        )
