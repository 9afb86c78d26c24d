"""Which running pods may be evicted, in which order, and in which groups (gang rules).

Victims are preemptible jobs whose active pods are all running. A job at or below its gang
minimum loses all its pods at once; the pods of an elastic job above its minimum go one at a
time, the last in task order first. A protected job (minimum runtime) may only lose those
surplus pods. Jobs come in victim order: each unit from the queue the session's queue order,
reversed, puts first at that moment (`VictimQueueOrder`), and inside a queue lowest priority, then elastic jobs
above their minimum, then the newest job; after losing a surplus pod a job is re-ranked, as KAI
re-queues it.
"""

from __future__ import annotations

import heapq
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence

import msgspec
import numpy as np
import numpy.typing as npt

from kai.core.model import ALIVE, Job, Task, TaskStatus
from kai.core.resources import GPU, QUEUE_RESOURCE_NAMES
from kai.core.session import NOTHING, Session

ROOT = -1  # the parent of the top queues in the victim order's tree
BATCH = 64  # plans made together from this many jobs on (each pass reads every pod's state)


class VictimUnit(msgspec.Struct, frozen=True, kw_only=True):
    """Pods evicted together: one surplus pod, or everything the job still runs. (A msgspec Struct, as
    `Task`: victim plans make one per step, and a Struct is built several times faster.)"""

    job: int
    tasks: tuple[int, ...]
    whole: bool


def running_tasks(session: Session, job: Job) -> list[int]:
    """The job's running pods in task order (higher task priority, then older, first)."""
    order = session.job_order_tasks[job.index]
    running: list[int] = order[session.status[order] == TaskStatus.RUNNING].tolist()
    return running


def is_candidate(session: Session, job: Job) -> bool:
    """A possible victim: preemptible, in a queue, with running pods and no pod placed this cycle."""
    if not job.preemptible or job.queue < 0:
        return False
    running = len(running_tasks(session, job))
    return running > 0 and running == session.alive_count(job)


def with_pending(session: Session) -> npt.NDArray[np.bool_]:
    """`Session.has_pending` of every job at once [J]."""
    pending = _memo(session).task_job[session.status == TaskStatus.PENDING]
    return np.bincount(pending, minlength=len(session.snapshot.jobs)) > 0


def candidates(session: Session) -> npt.NDArray[np.bool_]:
    """`is_candidate` of every job at once [J]: its running pods counted against its alive pods."""
    return _candidates_and_alive(session)[0]


def _candidates_and_alive(session: Session) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
    """`candidates`, and every job's alive pods (`Session.alive_count`) [J]."""
    memo = _memo(session)
    jobs = len(session.snapshot.jobs)
    status = session.status
    running = np.bincount(memo.task_job[status == TaskStatus.RUNNING], minlength=jobs)
    alive = np.bincount(memo.task_job[np.isin(status, _ALIVE)], minlength=jobs)
    return memo.eligible & (running > 0) & (running == alive), alive


def protected_by_guards(session: Session, action: str, preemptor: Job, victim: Job) -> bool:
    return any(guard(session, action, preemptor, victim) for guard in session.victim_guards)


def _surplus_task(session: Session, job: Job, running: list[int], alive: npt.NDArray[np.int64]) -> int | None:
    """The last running pod (in task order) whose eviction keeps every podset and the job at its minimum.

    For a job with a subgroup tree (minSubGroup), a pod whose eviction keeps the tree satisfied.
    """
    if int(alive.sum()) <= job.min_member:
        return None
    tasks = session.snapshot.tasks
    if job.subgroup_sets:
        for t in reversed(running):
            after = alive.copy()
            after[tasks[t].podset] -= 1
            if job.gang_satisfied_by(after):
                return t
        return None
    for t in reversed(running):
        podset = tasks[t].podset
        if int(alive[podset]) > job.podsets[podset].min_available:
            return t
    return None


def _bucket(job: Job, alive_total: int) -> int:
    """Victim order of KAI's elastic buckets: above the minimum first, at it next, below it last."""
    if alive_total > job.min_member:
        return 0
    return 1 if alive_total == job.min_member else 2


_ALIVE = np.array(sorted(ALIVE), dtype=np.int8)


_RUNNING_BYTE = np.int8(TaskStatus.RUNNING).tobytes()[0]  # a pod state as one byte of a job's `state`
_RELEASING_BYTE = np.int8(TaskStatus.RELEASING).tobytes()[0]


def _tail(
    session: Session, job: Job, cached: tuple[bytes, tuple[PlanStep, ...]], state: bytes
) -> tuple[PlanStep, ...] | None:
    """The job's plan when it only lost the pods of its cached plan's first steps since (they went from
    running to releasing, nothing else changed): the rest of that plan, else None. `_plan` takes the
    pods in the same order from the state its first steps leave, so it would make the same steps."""
    before, plan = cached
    # the states as bytes, compared in Python (a job has few pods: cheaper than arrays)
    changed = [i for i, (was, now) in enumerate(zip(before, state, strict=True)) if was != now]
    if any(before[i] != _RUNNING_BYTE or state[i] != _RELEASING_BYTE for i in changed):
        return None
    order = session.job_order_tasks[job.index]
    gone = {int(order[i]) for i in changed}
    taken: set[int] = set()
    for k, step in enumerate(plan):
        if taken == gone:
            return plan[k:]
        taken.update(step.unit.tasks)
    return () if taken == gone else None


class _Memo(msgspec.Struct):
    """What every victim pool of a session shares: per task its job and request, per job whether it may
    ever be a victim (preemptible, in a queue), and the victim plans per job with the state of its pods
    they were made in."""

    task_job: npt.NDArray[np.int64]
    requests: npt.NDArray[np.float64]  # [T, R] each task's node-level request
    shared: npt.NDArray[np.bool_]  # [T] shares GPUs
    job_shared: npt.NDArray[np.bool_]  # [J] has a pod that shares GPUs
    eligible: npt.NDArray[np.bool_]
    plans: dict[int, tuple[bytes, tuple[PlanStep, ...]]]


_MEMOS: weakref.WeakKeyDictionary[Session, _Memo] = weakref.WeakKeyDictionary()


def _memo(session: Session) -> _Memo:
    memo = _MEMOS.get(session)
    if memo is None:
        snapshot = session.snapshot
        task_job = np.array([t.job for t in snapshot.tasks], dtype=np.int64)
        shared = np.array([t.is_shared_gpu for t in snapshot.tasks], dtype=np.bool_)
        memo = _MEMOS[session] = _Memo(
            task_job=task_job,
            requests=np.array([t.request for t in snapshot.tasks], dtype=np.float64).reshape(
                len(snapshot.tasks), snapshot.resources.size
            ),
            shared=shared,
            job_shared=np.bincount(task_job[shared], minlength=len(snapshot.jobs)) > 0,
            eligible=np.array([job.preemptible and job.queue >= 0 for job in snapshot.jobs], dtype=np.bool_),
            plans={},
        )
    return memo


class VictimPool:
    """The candidate victims of one action, per queue, sorted once in victim order.

    Keys are taken when the pool is built (queue state changes only through this action's own
    evictions, which `is_candidate` catches when a job's turn comes); a job that loses a surplus
    pod is re-ranked with its new count, as KAI re-queues it.
    """

    def __init__(self, session: Session, *, admit: Callable[[Job], bool] = lambda job: True) -> None:
        """`admit` keeps jobs out of the pool altogether (they never enter the victim order)."""
        self.session = session
        self.by_queue: dict[int, list[tuple[tuple[int, int, float, int], Job]]] = {}
        jobs = session.snapshot.jobs
        candidate, alive = _candidates_and_alive(session)
        chosen = np.flatnonzero(candidate)
        for j, alive_total in zip(chosen.tolist(), alive[chosen].tolist(), strict=True):
            job = jobs[j]
            if admit(job):
                key = (job.priority, _bucket(job, alive_total), -job.creation, -job.index)
                self.by_queue.setdefault(job.queue, []).append((key, job))
        for entries in self.by_queue.values():
            entries.sort(key=lambda e: e[0])

        self._plans = _memo(session).plans

    @property
    def queues(self) -> list[int]:
        return sorted(self.by_queue)

    def plan(self, job: Job) -> tuple[PlanStep, ...]:
        """The job's victim plan in the current state (empty if it is no candidate).

        A plan depends only on the states of the job's pods, so it is cached by them for the whole
        session (every action's pool reads the same cache): a job whose evictions were rolled back
        gets the same plan (the same object) again."""
        state = self.session.status[self.session.job_order_tasks[job.index]].tobytes()
        cached = self._plans.get(job.index)
        if cached is not None and cached[0] == state:
            return cached[1]
        plan = _tail(self.session, job, cached, state) if cached is not None else None
        if plan is None:
            plan = _plan(self.session, job) if is_candidate(self.session, job) else ()
        self._plans[job.index] = (state, plan)
        return plan

    def plan_all(self, jobs: Sequence[Job]) -> list[tuple[PlanStep, ...]]:
        """`plan` of each of these jobs. From `BATCH` jobs on, those not cached for their current state are
        planned together, most of them at once: a job at or below its gang minimum loses everything in
        one step (`_whole_plans`), a simple elastic job its surplus pods one by one (`_elastic_plans`)."""
        if len(jobs) < BATCH:
            return [self.plan(job) for job in jobs]
        session = self.session
        memo = _memo(session)
        candidate, alive = _candidates_and_alive(session)
        order_tasks, status, plans = session.job_order_tasks, session.status, self._plans
        whole: list[tuple[Job, bytes]] = []
        elastic: list[tuple[Job, bytes]] = []
        for job in jobs:
            j = job.index
            state = status[order_tasks[j]].tobytes()
            cached = plans.get(j)
            if cached is not None and cached[0] == state:
                continue
            if not candidate[j]:
                plans[j] = (state, ())
            elif memo.job_shared[j]:
                plans[j] = (state, _plan(session, job))
            elif alive[j] <= job.min_member:
                whole.append((job, state))
            elif _simple_elastic(job, int(alive[j])):
                elastic.append((job, state))
            else:
                plans[j] = (state, _plan(session, job))
        if whole:
            for (job, state), plan in zip(whole, _whole_plans(session, [job for job, _ in whole]), strict=True):
                plans[job.index] = (state, plan)
        if elastic:
            for (job, state), plan in zip(elastic, _elastic_plans(session, [job for job, _ in elastic]), strict=True):
                plans[job.index] = (state, plan)
        return [plans[job.index][1] for job in jobs]  # each cached for the state it is in now

    def units(
        self,
        queues: Sequence[int],
        *,
        below_priority: int | None = None,
        exclude: int = -1,
        is_protected: Callable[[Job], bool] = lambda job: False,
    ) -> Iterator[VictimUnit]:
        """Victim units (lazily), always from the queue KAI's victim order puts first at that point.

        `below_priority` keeps only jobs of strictly lower priority; `exclude` is a job index to skip.
        """
        cursors = {
            q: _Cursor(self, q, below_priority=below_priority, exclude=exclude, is_protected=is_protected)
            for q in queues
        }
        order = VictimQueueOrder(self.session, list(cursors))
        order.start(cursors)
        while (unit := order.next_unit()) is not None:
            yield unit


class PlanStep(msgspec.Struct, frozen=True, kw_only=True, eq=False):
    """One unit of a job's victim plan, what the job holds when it is taken, and its re-rank key after;
    the nodes its pods run on and what it frees on each (`frees`)."""

    unit: VictimUnit
    holds: tuple[float, float, float]
    requeue: tuple[int, int, float, int] | None  # None: nothing of the job is left after this unit
    nodes: tuple[int, ...]
    frees: npt.NDArray[np.float64]  # [nodes, R]


def frees(session: Session, unit: VictimUnit) -> tuple[list[int], npt.NDArray[np.float64]]:
    """The nodes a unit's pods run on and what it frees on each: its pods' requests, and for shared-GPU
    pods their devices (an upper bound: a device comes free only once every holder leaves)."""
    if len(unit.tasks) == 1:
        task = session.task(unit.tasks[0])
        out = task.request[None, :].astype(np.float64)
        if task.is_shared_gpu:
            out[0, GPU] += float(max(1, task.gpu_devices))
        return [int(session.node[task.index])], out
    nodes = sorted({int(session.node[t]) for t in unit.tasks})
    out = np.zeros((len(nodes), session.snapshot.resources.size))
    for t in unit.tasks:
        task = session.task(t)
        row = nodes.index(int(session.node[t]))
        out[row] += task.request
        if task.is_shared_gpu:
            out[row, GPU] += float(max(1, task.gpu_devices))
    return nodes, out


def _step(
    session: Session, unit: VictimUnit, holds: tuple[float, float, float], requeue: tuple[int, int, float, int] | None
) -> PlanStep:
    nodes, freed = frees(session, unit)
    return PlanStep(unit=unit, holds=holds, requeue=requeue, nodes=tuple(nodes), frees=freed)


def _plan(session: Session, job: Job) -> tuple[PlanStep, ...]:
    """The job's units in the order it loses them: surplus pods one at a time, then the rest at once."""
    running = running_tasks(session, job)
    alive = session.podset_alive[job.index].copy()
    charge = session.task_charge
    steps: list[PlanStep] = []
    while running:
        held = charge[running].sum(axis=0)
        holds = (float(held[0]), float(held[1]), float(held[2]))
        surplus = _surplus_task(session, job, running, alive)
        if surplus is None:
            steps.append(_step(session, VictimUnit(job=job.index, tasks=tuple(running), whole=True), holds, None))
            break
        running.remove(surplus)
        alive[session.snapshot.tasks[surplus].podset] -= 1
        key = (job.priority, _bucket(job, int(alive.sum())), -job.creation, -job.index) if running else None
        steps.append(_step(session, VictimUnit(job=job.index, tasks=(surplus,), whole=False), holds, key))
    return tuple(steps)


def _whole_plans(session: Session, jobs: Sequence[Job]) -> list[tuple[PlanStep, ...]]:
    """`_plan` of candidate jobs at or below their gang minimum, sharing no GPU: one step each, every
    running pod at once, computed for all of them together (the same sums, in the same order)."""
    tasks, owner = _running_of(session, jobs)
    return [(step,) for step in _whole_steps(session, jobs, tasks, owner)]


def _running_of(session: Session, jobs: Sequence[Job]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The jobs' running pods in task order, job after job, and each one's place in `jobs`."""
    orders = [session.job_order_tasks[job.index] for job in jobs]
    tasks = np.concatenate(orders)
    owner = np.repeat(np.arange(len(jobs), dtype=np.int64), [len(o) for o in orders])
    running = session.status[tasks] == TaskStatus.RUNNING
    return tasks[running], owner[running]


def _whole_steps(
    session: Session, jobs: Sequence[Job], tasks: npt.NDArray[np.int64], owner: npt.NDArray[np.int64]
) -> list[PlanStep]:
    """One whole step per job: its pods among `tasks` (task order, job after job; `owner`: each one's place
    in `jobs`) evicted at once, what they hold and free per node added up in task order, as `_step` does."""
    memo = _memo(session)
    # what each job holds: its pods' charges added up in task order, as `charge[running].sum(axis=0)`
    holds = np.zeros((len(jobs), 3))
    np.add.at(holds, owner, session.task_charge[tasks])
    # what each job frees per node: its pods' requests there, added up in task order
    nodes_count = session.snapshot.nodes.count
    pair = owner * nodes_count + session.node[tasks].astype(np.int64)
    pairs, row = np.unique(pair, return_inverse=True)
    frees = np.zeros((pairs.size, session.snapshot.resources.size))
    np.add.at(frees, row, memo.requests[tasks])
    frees.flags.writeable = False
    task_starts = np.searchsorted(owner, np.arange(len(jobs) + 1))
    pair_starts = np.searchsorted(pairs, np.arange(len(jobs) + 1) * nodes_count)
    task_list: list[int] = tasks.tolist()
    node_list: list[int] = (pairs % nodes_count).tolist()
    held = holds.tolist()
    steps: list[PlanStep] = []
    for k, job in enumerate(jobs):
        a, b = int(pair_starts[k]), int(pair_starts[k + 1])
        h = held[k]
        unit = VictimUnit(job=job.index, tasks=tuple(task_list[task_starts[k] : task_starts[k + 1]]), whole=True)
        steps.append(
            PlanStep(unit=unit, holds=(h[0], h[1], h[2]), requeue=None, nodes=tuple(node_list[a:b]), frees=frees[a:b])
        )
    return steps


LONGEST_ELASTIC = 64  # elastic jobs with more running pods are planned one by one


def _gang_floor(job: Job) -> int:
    """For a job with one podset and no subgroup tree: the alive pods below which `_surplus_task` finds
    no surplus pod (both the job's and the podset's minimum must stay met)."""
    return max(job.min_member, job.podsets[0].min_available)


def _simple_elastic(job: Job, alive: int) -> bool:
    """Is the job's plan one `_elastic_plans` makes: one podset, no subgroup tree, above a floor of at
    least one pod, and not too many pods to plan together."""
    if job.subgroup_sets or len(job.podsets) != 1:
        return False
    return _gang_floor(job) >= 1 and alive <= LONGEST_ELASTIC


def _elastic_plans(session: Session, jobs: Sequence[Job]) -> list[tuple[PlanStep, ...]]:
    """`_plan` of candidate jobs above their gang minimum (`_simple_elastic`, sharing no GPU), computed
    together: with one podset, the surplus pods are the last running ones in task order, one step each,
    down to the floor (`_gang_floor`); the rest goes at once. What a step holds is what the pods still
    running hold, added up in task order (a cumulative sum per job, as `charge[running].sum(axis=0)`)."""
    memo = _memo(session)
    tasks, owner = _running_of(session, jobs)
    starts = np.searchsorted(owner, np.arange(len(jobs) + 1))
    counts = np.diff(starts)
    floors = np.array([_gang_floor(job) for job in jobs], dtype=np.int64)
    # per job, its running pods' charges in task order, padded, summed cumulatively (sequentially)
    place = np.arange(tasks.size, dtype=np.int64) - starts[owner]
    padded = np.zeros((len(jobs), int(counts.max()), 3))
    padded[owner, place] = session.task_charge[tasks]
    held = np.cumsum(padded, axis=1)[owner, place].tolist()  # per running pod, what it and those before hold
    # the rest, at once: the first `floor` running pods of each job
    kept = place < floors[owner]
    finals = _whole_steps(session, jobs, tasks[kept], owner[kept])
    task_list: list[int] = tasks.tolist()
    node_list: list[int] = session.node[tasks].tolist()
    requests = memo.requests[tasks]
    requests.flags.writeable = False
    plans: list[tuple[PlanStep, ...]] = []
    for k, job in enumerate(jobs):
        start, count, floor = int(starts[k]), int(counts[k]), int(floors[k])
        steps: list[PlanStep] = []
        for alive in range(count, floor, -1):  # the surplus pods, the last running one first
            t = start + alive - 1
            h = held[t]
            steps.append(
                PlanStep(
                    unit=VictimUnit(job=job.index, tasks=(task_list[t],), whole=False),
                    holds=(h[0], h[1], h[2]),
                    requeue=(job.priority, _bucket(job, alive - 1), -job.creation, -job.index),
                    nodes=(node_list[t],),
                    frees=requests[t : t + 1],
                )
            )
        steps.append(finals[k])
        plans.append(tuple(steps))
    return plans


class _Cursor:
    """One leaf queue's victims in victim job order; `head` is the next unit, computed lazily."""

    def __init__(
        self,
        pool: VictimPool,
        queue: int,
        *,
        below_priority: int | None,
        exclude: int,
        is_protected: Callable[[Job], bool],
    ) -> None:
        self.pool = pool
        self.entries = pool.by_queue.get(queue, [])
        self.below_priority = below_priority
        self.exclude = exclude
        self.is_protected = is_protected
        self.i = 0
        self.requeued: list[tuple[tuple[int, int, float, int], int]] = []
        self.position: dict[int, tuple[tuple[PlanStep, ...], int]] = {}
        self.pops = 0
        self.popped = (0.0, 0.0, 0.0)  # what the jobs popped so far held when popped (KAI's victim list)
        self._head: PlanStep | None = None
        self._done = False

    def head(self) -> PlanStep | None:
        """The next step, or None when the queue has no more victims."""
        if self._head is None and not self._done:
            self._head = self._next()
            self._done = self._head is None
        return self._head

    def take(self) -> VictimUnit:
        head = self.head()
        assert head is not None
        self._head = None
        self.pops += 1
        p, h = self.popped, head.holds
        self.popped = (p[0] + h[0], p[1] + h[1], p[2] + h[2])
        return head.unit

    def _next(self) -> PlanStep | None:
        entries = self.entries
        while self.i < len(entries) or self.requeued:
            if self.requeued and (self.i >= len(entries) or self.requeued[0][0] < entries[self.i][0]):
                index = heapq.heappop(self.requeued)[1]
            else:
                job = entries[self.i][1]
                self.i += 1
                if self.below_priority is not None and job.priority >= self.below_priority:
                    self.i = len(entries)
                    continue
                if job.index == self.exclude:
                    continue
                plan = self.pool.plan(job)
                if not plan:
                    continue
                index = job.index
                self.position[index] = (plan, 0)
            plan, at = self.position[index]
            step = plan[at]
            self.position[index] = (plan, at + 1)
            if step.requeue is not None:
                heapq.heappush(self.requeued, (step.requeue, index))
            if step.unit.whole and self.is_protected(self.pool.session.snapshot.jobs[index]):
                continue
            return step
        return None


class VictimQueueOrder:
    """The session's queue order reversed, as KAI's victim queue applies it, level by level from the top.

    Allocations are those of the moment the search starts (KAI simulates each scenario and rolls it
    back before picking the next victim). A queue is judged with the victims picked from it so far
    plus its next one taken away, exactly as KAI's victim queue does (see `QueueOrderPolicy`). The
    queue the allocation order would put last is the next to lose a victim.
    """

    def __init__(self, session: Session, leaves: list[int]) -> None:
        self.session = session
        self.policy = session.queue_order
        self.parent: dict[int, int] = {}
        self.depth: dict[int, int] = {}
        for leaf in leaves:
            path = [int(q) for q in session.ancestors(leaf)]  # the leaf first, the top queue last
            for i, q in enumerate(path):
                self.parent[q] = path[i + 1] if i + 1 < len(path) else ROOT
                self.depth[q] = len(path) - i
        self.siblings: dict[int, int] = {}  # parent -> number of children in the order
        for q in self.parent:
            self.siblings[self.parent[q]] = self.siblings.get(self.parent[q], 0) + 1
        self.allocated: dict[int, tuple[float, float, float]] = {q: session.allocated_triple(q) for q in self.parent}
        self.keys: dict[tuple[int, int, int], tuple[object, ...]] = {}
        self.heaps: dict[int, list[_Entry]] = {}
        self.ties: dict[tuple[int, int], bool] = {}
        self.version: dict[int, int] = {}
        self.cursors: dict[int, _Cursor] = {}

    def _key(self, q: int, victims: tuple[float, float, float]) -> tuple[object, ...]:
        return self.policy.key(self.session, q, self.allocated[q], NOTHING, victims)

    def _goes_after(self, left: int, lkey: tuple[object, ...], right: int, rkey: tuple[object, ...]) -> bool:
        """Does `left` come after `right` in the (allocation) queue order?"""
        if lkey != rkey:
            return lkey > rkey
        pair = (left, right)
        after = self.ties.get(pair)
        if after is None:
            after = self.ties[pair] = self.policy.tie(self.session, left, right) > 0
        return after

    def _worst_leaf(self, q: int) -> int | None:
        """The leaf queue the victim order would take from next inside q's subtree."""
        while q not in self.cursors:
            top = self._top(q)
            if top is None:
                return None
            q = top.queue
        return q

    def _entry(self, q: int) -> _Entry | None:
        """q's current place in its parent's order: a leaf by its next victim, a parent by its worst leaf."""
        leaf = self._worst_leaf(q)
        if leaf is None:
            return None
        cursor = self.cursors[leaf]
        head = cursor.head()
        if head is None:
            return None
        key: tuple[object, ...] = ()
        if self.siblings[self.parent[q]] > 1:  # an only child needs no place in its parent's order
            cache = (q, leaf, cursor.pops)
            cached = self.keys.get(cache)
            if cached is None:
                p, h = cursor.popped, head.holds
                cached = self._key(q, (p[0] + h[0], p[1] + h[1], p[2] + h[2]))
                self.keys[cache] = cached
            key = cached
        self.version[q] = self.version.get(q, 0) + 1
        return _Entry(order=self, queue=q, key=key, version=self.version[q])

    def _top(self, parent: int) -> _Entry | None:
        heap = self.heaps.get(parent, [])
        while heap and heap[0].version != self.version.get(heap[0].queue, 0):
            heapq.heappop(heap)
        return heap[0] if heap else None

    def _refresh(self, q: int) -> None:
        if self.siblings[self.parent[q]] == 1 and q in self.version:
            # an only child keeps its (key-less) entry while it has victims left
            leaf = self._worst_leaf(q)
            if leaf is not None and self.cursors[leaf].head() is not None:
                return
        entry = self._entry(q)
        if entry is None:
            self.version[q] = self.version.get(q, 0) + 1
        else:
            heapq.heappush(self.heaps.setdefault(self.parent[q], []), entry)

    def start(self, cursors: Mapping[int, _Cursor]) -> None:
        self.cursors = dict(cursors)
        for q in sorted(self.parent, key=lambda q: (-self.depth[q], q)):
            self._refresh(q)

    def next_unit(self) -> VictimUnit | None:
        """Take the next victim unit from the queue KAI's victim order puts first, or None when all are used."""
        leaf = self._worst_leaf(ROOT)
        if leaf is None:
            return None
        unit = self.cursors[leaf].take()
        q = leaf
        while q != ROOT:
            self._refresh(q)
            q = self.parent[q]
        return unit


class _Entry:
    """A queue in its parent's heap; the heap's top is the queue the allocation order puts last."""

    __slots__ = ("key", "order", "queue", "version")

    def __init__(self, *, order: VictimQueueOrder, queue: int, key: tuple[object, ...], version: int) -> None:
        self.order = order
        self.queue = queue
        self.key = key
        self.version = version

    def __lt__(self, other: _Entry) -> bool:
        return self.order._goes_after(self.queue, self.key, other.queue, other.key)


def signature(action: str, job: Job, tasks: Sequence[Task]) -> tuple[object, ...]:
    """What decides whether an attempt can succeed: the queue, the priority, and the pods' shapes."""
    shapes: dict[tuple[object, ...], int] = {}
    for t in tasks:
        shape = (t.constraint, tuple(float(x) for x in t.request), t.gpu_portion, t.gpu_memory_mib, t.gpu_devices)
        shapes[shape] = shapes.get(shape, 0) + 1
    return (action, job.queue, job.priority, job.preemptible, tuple(sorted(shapes.items(), key=repr)))


def already_failed(session: Session, sig: tuple[object, ...]) -> bool:
    """Did an attempt with the same signature, or the same single pod shape and no more pods, fail already?"""
    if sig in session.failed_signatures:
        return True
    shapes = sig[-1]
    assert isinstance(shapes, tuple)
    if len(shapes) == 1:
        shape, count = shapes[0]
        return any((*sig[:-1], ((shape, k),)) in session.failed_signatures for k in range(1, count))
    return False


class DepthCap:
    """`queueDepthPerAction`: at most this many jobs tried per queue in one action (0: no cap)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.tried: dict[int, int] = {}

    def allow(self, queue: int) -> bool:
        if self.cap <= 0:
            return True
        count = self.tried.get(queue, 0)
        if count >= self.cap:
            return False
        self.tried[queue] = count + 1
        return True


def amount(resource: int, value: float) -> str:
    """A queue-space amount as a person reads it: `8 GPUs`, `4 CPU`, `16 GB`."""
    if resource == 0:
        return f"{value:g} GPU" + ("" if abs(value - 1) < 1e-9 else "s")
    if resource == 1:
        return f"{value / 1000:g} CPU"
    return f"{value / 1e9:g} GB" if value >= 1e9 else f"{value / 1e6:g} MB"


def main_resource(request: npt.NDArray[np.float64]) -> int:
    """The resource a message talks about: GPUs if the job asks for any, else CPU, else memory."""
    for r in range(len(QUEUE_RESOURCE_NAMES)):
        if request[r] > 0:
            return r
    return 0
