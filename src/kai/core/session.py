"""A scheduling session: the mutable overlay one cycle works on, over an immutable snapshot.

The session copies only what changes (node idle/releasing matrices, task status and node arrays,
queue usage, shared devices) and exposes the extension points plugins fill in. Every change goes
through a `Statement` (see `kai.core.statement`) so it can be rolled back.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING, Protocol

import msgspec
import numpy as np
import numpy.typing as npt

from kai.core import gpu_devices
from kai.core.decisions import Event, Eviction, JobCondition, JobStart, Placement, StaleMark
from kai.core.model import ALIVE, BoolVector, Counts, Job, Matrix, NodeIndices, Snapshot, Task, TaskStatus
from kai.core.resources import QUEUE_RESOURCES, Vector

if TYPE_CHECKING:
    from kai.core.fit import Fit

# Extension point signatures (how several callbacks combine is documented on Session).
PredicateFn = Callable[["Session", Task], BoolVector]
# a node score: (session, task, candidate nodes) -> one score per candidate node
NodeScoreFn = Callable[["Session", Task, NodeIndices], Vector]
JobKeyFn = Callable[["Session", Job], tuple[float, ...]]
CapacityFn = Callable[["Session", Job, Vector], "JobCondition | None"]
Triple = tuple[float, float, float]  # queue space: (gpu devices, cpu millicores, memory bytes)
NOTHING: Triple = (0.0, 0.0, 0.0)


class QueueOrderPolicy(Protocol):
    """The order of queues: exactly one per session (the proportion plugin's, else oldest first).

    `key` places a queue given what it holds (`allocated`), the job it would start next (`job`,
    added) and the victims it would lose (`victims`, taken away); a smaller key goes first. Queues
    with equal keys are ordered by `tie` (negative: `left` goes first; never 0 for two queues). The
    allocation order compares sibling queues by their best pending jobs; the victim order takes the
    next victim from the queue this order puts last, judged with the victims taken from it so far.
    A key is a function of its arguments (and of what is fixed for the session): the session keeps a
    queue's allocation key while they do not change (`Session.allocation_key`).
    """

    def key(
        self, session: Session, queue: int, allocated: Triple, job: Triple, victims: Triple
    ) -> tuple[object, ...]: ...

    def tie(self, session: Session, left: int, right: int) -> int: ...

    def victim_keys(
        self, session: Session, queue: int, allocated: Triple, victims: Matrix
    ) -> tuple[tuple[object, ...], Vector, tuple[object, ...]]:
        """`key` with no job for every row of `victims` [S, 3], as (head, varying, tail): row i's key is
        `(*head, varying[i], *tail)`. The victim order uses it to rank many victims at once."""
        ...


class OldestFirst:
    """The queue order without a queue-order plugin: the oldest queue first."""

    def key(self, session: Session, queue: int, allocated: Triple, job: Triple, victims: Triple) -> tuple[object, ...]:
        return ()

    def victim_keys(
        self, session: Session, queue: int, allocated: Triple, victims: Matrix
    ) -> tuple[tuple[object, ...], Vector, tuple[object, ...]]:
        return (), np.zeros(len(victims)), ()

    def tie(self, session: Session, left: int, right: int) -> int:
        queues = session.snapshot.queues
        return -1 if (queues[left].age_rank, queues[left].name) < (queues[right].age_rank, queues[right].name) else 1


class GpuPolicy(Protocol):
    """Device-level GPU placement (gpupack, gpuspread or fragmentation): exactly one per session.

    `node_bonus` adds to the node scores of a GPU task on the candidate nodes `nodes`, one value per
    node (it sees the task's fit, including the shared devices each node would use); `devices` picks
    the shared devices on the chosen node, or returns None to keep the fit's own choice.
    """

    def node_bonus(self, session: Session, task: Task, fit: Fit, nodes: NodeIndices) -> Vector: ...

    def devices(self, session: Session, task: Task, node: int, fit: Fit) -> gpu_devices.DeviceChoice | None: ...


# Victim guards: True when `victim` is protected from `action` on behalf of `preemptor` (only the
# pods above its gang minimum may then be taken). Reclaim gates: may this job reclaim at all?
# Reclaim validators: None when a reclaim scenario is acceptable, else why not.
VictimGuardFn = Callable[["Session", str, Job, Job], bool]
ReclaimGateFn = Callable[["Session", Job, Vector], bool]
ReclaimValidatorFn = Callable[["Session", "ReclaimScenario"], "str | None"]
ReclaimVictimFilterFn = Callable[["Session", Job, Vector, int], bool]  # (reclaimer, request, victim queue)
# Reclaim loss checks: False when no scenario the validators accept could really evict (not just
# move) a victim of the queue; a necessary condition of the validators, used to end hopeless searches.
ReclaimLossCheckFn = Callable[["Session", Job, Vector, int], bool]  # (reclaimer, request, victim queue)


class ReclaimScenario(msgspec.Struct, frozen=True, kw_only=True):
    """A reclaim attempt as the validators see it, in queue space, measured before the attempt.

    `victims` maps each victim leaf queue to the charges of the victim jobs that would really be
    evicted (victims only moved elsewhere are not reclaimed). `allocated` and `allocated_np` are
    the queues' allocations before any of the scenario's evictions or placements.
    """

    reclaimer: Job
    request: Vector
    victims: dict[int, list[Vector]]
    allocated: Matrix
    allocated_np: Matrix


class SchedulerConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Scheduler settings that influence decisions (the adapter parses them from YAML)."""

    actions: tuple[str, ...] = ("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction")
    gpu_placement: str = "binpack"  # binpack | spread
    cpu_placement: str = "binpack"
    gpu_device_policy: str = "binpack"  # binpack: fullest shared device first; spread: idle first
    schedule_period: float = 1.0
    staleness_grace_period: float = 60.0  # negative: never
    queue_label_key: str = "kai.scheduler/queue"
    max_consolidation_preemptees: int = 16
    reclaimer_utilization_multiplier: float = 1.0
    k_value: float = 1.0
    queue_depth_per_action: int = 0  # 0: unlimited
    # scenarios reclaim, preempt or consolidation may simulate per cycle, by action or "default"; 0: no limit
    max_action_scenarios: dict[str, int] = msgspec.field(default_factory=dict)
    plugins: dict[str, dict[str, object]] = msgspec.field(default_factory=dict)
    eviction_mode: str = "delete"  # on a cluster: delete the pod, or "eviction" through the Eviction API


def _sibling_ranks(snapshot: Snapshot) -> list[int]:
    """Each queue's place among its siblings: in its parent's children, or among the top-level queues
    by index (the order the job loops compare queues in)."""
    ranks = [0] * len(snapshot.queues)
    top = 0
    for queue in snapshot.queues:
        if queue.parent < 0:
            ranks[queue.index] = top
            top += 1
        for place, child in enumerate(queue.children):
            ranks[child] = place
    return ranks


def _triple(row: Vector) -> Triple:
    """A queue-space vector as Python floats (one C call: `tolist`)."""
    first, second, third = row.tolist()
    return (first, second, third)


# statuses as plain ints for the int8 status arrays: numpy compares an array with a plain int several
# times faster than with an IntEnum member (whose class it probes for array hooks)
_PENDING = int(TaskStatus.PENDING)

_STATUS = operator.attrgetter("status")
_NODE = operator.attrgetter("node")
_GPU_GROUPS = operator.attrgetter("gpu_groups")
_REQUEST = operator.attrgetter("request")


class Session:
    """Mutable scheduling state for one cycle.

    Extension points and how several callbacks combine:
    * `predicates`: node masks, ANDed.
    * `node_scores`: per-node scores, summed; the highest total wins, ties to the lowest node index.
      Each is asked for the candidate nodes only (the nodes the task fits, ascending) and returns one
      score per candidate: a node's score depends on the node and the candidates, never on the others.
    * `job_keys`: sort keys, concatenated in registration order; the job's uid ends every key.
    * `capacity_checks`: the first non-None condition rejects the job attempt.
    * `queue_compare`: exactly one provider (the proportion plugin); registering a second is an error.
    * `gpu_policy`: exactly one provider (gpupack/gpuspread in node order, or fragmentation): its
      node bonus is added to the scores and it may choose the shared devices on the chosen node.
    * `packing`: the node scores and the GPU policy that pack whole GPUs: for a task asking whole
      GPUs (no shared GPU, no nominated node) their sum depends only on whether the task fits a
      node's idle resources (fitting beats not fitting by more than the rest can add) and the node's
      free GPUs (fewer is better, never equal for different whole numbers). When every registered
      score and the policy are in it, placement sends the next like pods of a gang to the node the
      last one went to while they fit its idle resources, without scoring every node again.
    * `victim_guards`: a victim is protected if any guard says so.
    * `reclaim_gates`: a job may reclaim only if every gate agrees.
    * `reclaim_validators`: a reclaim scenario is accepted only if every validator returns None.
    * `reclaim_victim_filters`: a queue's jobs are reclaim victims only if every filter agrees.
    * `reclaim_loss_checks`: a queue's victims may be lost (evicted for good) in a valid reclaim
      scenario only if every check agrees; checks never reject what the validators would accept.
    """

    def __init__(self, snapshot: Snapshot, config: SchedulerConfig) -> None:
        self.snapshot = snapshot
        self.config = config
        self.now = snapshot.now
        nodes = snapshot.nodes
        self.idle: Matrix = nodes.allocatable - nodes.used - nodes.releasing
        self.releasing: Matrix = nodes.releasing.copy()
        tasks = snapshot.tasks
        n_tasks = len(tasks)
        self.status: npt.NDArray[np.int8] = np.fromiter(map(_STATUS, tasks), dtype=np.int8, count=n_tasks)
        self.node: npt.NDArray[np.int32] = np.fromiter(map(_NODE, tasks), dtype=np.int32, count=n_tasks)
        self.gpu_groups: list[tuple[str, ...]] = list(map(_GPU_GROUPS, tasks))
        self.devices = gpu_devices.initial_devices(snapshot)
        # per node, the most room on any shared device now / once its releasing holders leave
        self.shared_room_now: Vector = np.zeros(nodes.count)
        self.shared_room_later: Vector = np.zeros(nodes.count)
        # per node, the free portions on all its shared devices (devices whose holders all leave excluded)
        self.shared_room_total: Vector = np.zeros(nodes.count)
        for node in self.devices:
            self.refresh_shared_rooms(node)
        self.min_gpu_memory = int(nodes.gpu_memory_mib.min()) if nodes.count else 100
        n_queues = len(snapshot.queues)
        self.queue_allocated: Matrix = np.zeros((n_queues, 3))
        self.queue_allocated_np: Matrix = np.zeros((n_queues, 3))
        self.queue_request: Matrix = np.zeros((n_queues, 3))
        self.queue_changes: list[int] = [0] * n_queues  # per queue, a counter bumped whenever its allocation changes
        self.fair_share: Matrix = np.zeros((n_queues, 3))
        self._paths: dict[int, npt.NDArray[np.int64]] = {}  # queue -> itself and its ancestors
        self.sibling_rank: list[int] = _sibling_ranks(snapshot)
        self._path_lists: dict[int, tuple[int, ...]] = {}  # the same as Python ints
        # per-task queue charges, per-job tasks in task order, and a per-job change counter that
        # statements bump, so per-job derived values can be cached safely
        self.task_charge: Matrix = self._queue_charges(tasks)
        self.job_order_tasks: list[npt.NDArray[np.int64]] = self._task_orders(snapshot)
        self.job_version: npt.NDArray[np.int64] = np.zeros(len(snapshot.jobs), dtype=np.int64)
        # per node, a counter statements bump whenever the node's resources or shared devices change
        self.node_version: npt.NDArray[np.int64] = np.zeros(nodes.count, dtype=np.int64)
        # every node a statement changed, in order (one entry per node_version increment): which nodes
        # changed since some point, read without comparing every node's counter (`node_changes`: how many)
        self.node_log: list[int] = []
        self._attempt_cache: dict[int, tuple[int, Vector]] = {}
        self._tasks_cache: dict[int, tuple[int, tuple[Task, ...]]] = {}  # tasks_to_allocate, by job version
        self._job_keys: dict[int, tuple[int, tuple[object, ...]]] = {}  # job_key, by job version
        self._exists: dict[int, Counts] = {}  # _existing: snapshot statuses only, so once per job
        self.simulated_attempts: dict[int, Vector] = {}  # set by the victim search while it re-places victims
        self.podset_alive: list[npt.NDArray[np.int64]] = self._open_accounts(snapshot)
        # `queue_allocated` rows as Python floats with the `queue_changes` they were read at
        self._allocated_triples: list[tuple[int, Triple] | None] = [None] * n_queues
        # extension points
        self.predicates: list[PredicateFn] = []
        self.node_scores: list[NodeScoreFn] = []
        self.job_keys: list[JobKeyFn] = []
        self.capacity_checks: list[CapacityFn] = []
        self.queue_order: QueueOrderPolicy = OldestFirst()
        self._queue_order_set = False
        # per queue, its last allocation key: ((queue_changes, job, job version), simulated attempt, key)
        self._allocation_keys: dict[int, tuple[tuple[int, int, int], Vector | None, tuple[object, ...]]] = {}
        self.gpu_policy: GpuPolicy | None = None
        self.packing: set[object] = set()
        self.victim_guards: list[VictimGuardFn] = []
        self.reclaim_gates: list[ReclaimGateFn] = []
        self.reclaim_validators: list[ReclaimValidatorFn] = []
        self.reclaim_victim_filters: list[ReclaimVictimFilterFn] = []
        self.reclaim_loss_checks: list[ReclaimLossCheckFn] = []
        # outputs, appended by committed statements and by actions
        self.placements: list[Placement] = []
        self.evictions: list[Eviction] = []
        self.conditions: dict[int, JobCondition] = {}
        self.events: list[Event] = []
        self.starts: list[JobStart] = []
        self.stale_marks: list[StaleMark] = []
        self.failed_signatures: set[tuple[object, ...]] = set()
        # placement's memory of pods that fit no node: (task shape key, node_changes when
        # found, the fit error); while it is unchanged no node changed, so a like pod fails alike
        self.fits_nowhere: dict[tuple[object, ...], tuple[int, str]] = {}
        # placement's last fit of a task shape sharing no GPU (request bytes, constraint), with the
        # length of node_log when it was computed: a like task's fit recomputes only the nodes logged since
        self.shape_fits: dict[tuple[bytes, int], tuple[Fit, int]] = {}
        # placement's last finding on whether every node's free GPUs are whole numbers, with the length
        # of node_log then: while they were, only the nodes logged since are looked at again
        self.whole_free_gpus: tuple[int, bool] | None = None

    # ----------------------------------------------------------------- extension points
    def refresh_shared_rooms(self, node: int) -> None:
        """Recompute a node's shared-device rooms after its devices changed (statements call this)."""
        now = later = 0.0
        for dev in self.devices.get(node, {}).values():
            if dev.all_releasing:
                continue  # counted as a releasing whole GPU instead
            now = max(now, dev.room_now())
            later = max(later, dev.room_later())
        self.shared_room_now[node] = now
        self.shared_room_later[node] = later
        devices = self.devices.get(node, {})
        self.shared_room_total[node] = sum(max(0.0, d.room_now()) for d in devices.values() if not d.all_releasing)

    def set_gpu_policy(self, policy: GpuPolicy) -> None:
        if self.gpu_policy is not None:
            raise RuntimeError("GPU placement has exactly one policy; a second plugin registered one")
        self.gpu_policy = policy

    def set_queue_order(self, policy: QueueOrderPolicy) -> None:
        if self._queue_order_set:
            raise RuntimeError("queue order has exactly one provider; a second plugin registered one")
        self.queue_order = policy
        self._queue_order_set = True
        self._allocation_keys.clear()

    @property
    def node_changes(self) -> int:
        """How many times statements changed a node (the sum of `node_version`): whether any node changed."""
        return len(self.node_log)

    def allocated_triple(self, queue: int) -> Triple:
        """`queue_allocated[queue]` as Python floats (kept until the row changes: `queue_changes`)."""
        changes = self.queue_changes[queue]
        known = self._allocated_triples[queue]
        if known is None or known[0] != changes:
            known = self._allocated_triples[queue] = (changes, _triple(self.queue_allocated[queue]))
        return known[1]

    def allocation_key(self, queue: int, job: Job) -> tuple[object, ...]:
        """The queue's place in the allocation order, with `job` as the job it would start next.

        Kept per queue while neither the queue's allocation (`queue_changes`) nor the job's attempt (its
        `job_version`, or the victim search's simulated attempt) changed: the queue order's key is a
        function of those (`QueueOrderPolicy`), and the job loops ask again for every queue at every pop."""
        simulated = self.simulated_attempts.get(job.index)
        stamp = (self.queue_changes[queue], job.index, int(self.job_version[job.index]))
        known = self._allocation_keys.get(queue)
        if known is not None and known[0] == stamp and known[1] is simulated:
            return known[2]
        request = _triple(self.attempt_request(job))
        key = self.queue_order.key(self, queue, self.allocated_triple(queue), request, NOTHING)
        self._allocation_keys[queue] = (stamp, simulated, key)
        return key

    def job_key(self, job: Job) -> tuple[object, ...]:
        """The job's place in its queue's job order (kept until the job changes: `job_version`)."""
        version = int(self.job_version[job.index])
        known = self._job_keys.get(job.index)
        if known is not None and known[0] == version:
            return known[1]
        key: tuple[object, ...] = ()
        for fn in self.job_keys:
            key += fn(self, job)
        key = (*key, job.creation, job.uid, job.key)
        self._job_keys[job.index] = (version, key)
        return key

    # ----------------------------------------------------------------- queue accounting
    def queue_charge(self, task: Task) -> Vector:
        """What a task costs its queue, in queue space: (gpu devices, cpu millicores, memory bytes)."""
        charge = task.request[list(QUEUE_RESOURCES)].copy()
        if task.is_shared_gpu:
            portion = task.gpu_portion or task.gpu_memory_mib / max(1, self.min_gpu_memory)
            charge[0] += portion * max(1, task.gpu_devices)
        return charge

    def _queue_charges(self, tasks: tuple[Task, ...]) -> Matrix:
        """`queue_charge` of every task as rows [tasks, 3]: the request's queue resources, and for a task
        sharing GPUs its portion (`queue_charge` itself, for those few)."""
        if not tasks:
            return np.zeros((0, 3))
        # the snapshot gives the pods that ask alike one request vector: stack each distinct one once
        rows: dict[int, int] = {}
        distinct: list[Vector] = []
        for request in map(_REQUEST, tasks):
            if id(request) not in rows:
                rows[id(request)] = len(distinct)
                distinct.append(request)
        which = np.fromiter((rows[id(r)] for r in map(_REQUEST, tasks)), dtype=np.int64, count=len(tasks))
        charges: Matrix = np.stack(distinct)[:, list(QUEUE_RESOURCES)][which]
        for task in tasks:
            if task.gpu_portion > 0 or task.gpu_memory_mib > 0:
                charges[task.index] = self.queue_charge(task)
        return charges

    def _task_orders(self, snapshot: Snapshot) -> list[npt.NDArray[np.int64]]:
        """Each job's tasks sorted by `_task_order_key`, all jobs in one sort: (job, -task priority,
        creation, name), ties keeping the job's own task order."""
        jobs = snapshot.jobs
        sizes = np.fromiter((len(job.tasks) for job in jobs), dtype=np.int64, count=len(jobs))
        flat = np.fromiter((t for job in jobs for t in job.tasks), dtype=np.int64, count=int(sizes.sum()))
        if not len(flat):
            return [np.zeros(0, dtype=np.int64) for _ in jobs]
        chosen = [snapshot.tasks[t] for t in flat.tolist()]
        order = np.lexsort(
            (
                np.array([t.name for t in chosen]),
                np.fromiter((t.creation for t in chosen), dtype=np.float64, count=len(chosen)),
                -np.fromiter((t.task_priority for t in chosen), dtype=np.int64, count=len(chosen)),
                np.repeat(np.arange(len(jobs)), sizes),
            )
        )
        return np.split(flat[order], np.cumsum(sizes)[:-1])

    def _open_accounts(self, snapshot: Snapshot) -> list[npt.NDArray[np.int64]]:
        """The queues' allocations and requests from the tasks, and each job's alive pods per podset.

        Each queue of a task's path gets its charge (allocated: alive tasks; requested: alive or
        pending ones) in the jobs' task order, one task after the other, as `_charge_queue` and
        `_add_request` add them; `np.add.at` adds repeated rows in the order given, so the float
        sums are the same."""
        jobs, tasks = snapshot.jobs, snapshot.tasks
        n_podsets = np.fromiter((len(job.podsets) for job in jobs), dtype=np.int64, count=len(jobs))
        offsets = np.concatenate(([0], np.cumsum(n_podsets)))
        flat = np.fromiter((t for job in jobs for t in job.tasks), dtype=np.int64)
        status = self.status[flat]
        alive = np.isin(status, [int(s) for s in ALIVE])
        wanted = alive | (status == TaskStatus.PENDING)
        job_of = np.fromiter((snapshot.tasks[t].job for t in flat.tolist()), dtype=np.int64, count=len(flat))
        podset_of = np.fromiter((tasks[t].podset for t in flat.tolist()), dtype=np.int64, count=len(flat))
        counts = np.bincount(offsets[job_of[alive]] + podset_of[alive], minlength=int(offsets[-1]))
        podset_alive = [counts[offsets[j] : offsets[j + 1]].copy() for j in range(len(jobs))]
        queue_of = np.fromiter((job.queue for job in jobs), dtype=np.int64, count=len(jobs))[job_of]
        preemptible = np.fromiter((job.preemptible for job in jobs), dtype=np.bool_, count=len(jobs))[job_of]
        paths = self._path_matrix()
        for target, chosen in (
            (self.queue_allocated, alive),
            (self.queue_allocated_np, alive & ~preemptible),
            (self.queue_request, wanted),
        ):
            chosen = chosen & (queue_of >= 0)
            rows = paths[queue_of[chosen]]  # [tasks, depth]: each task's path, -1 padded
            on_path = rows >= 0
            charges = np.broadcast_to(self.task_charge[flat[chosen]][:, None, :], (*rows.shape, 3))
            np.add.at(target, rows[on_path], charges[on_path])
        return podset_alive

    def _path_matrix(self) -> npt.NDArray[np.int64]:
        """Every queue's `_ancestor_path` as a row, padded with -1 to the deepest path."""
        n_queues = len(self.snapshot.queues)
        paths = [self._ancestor_path(q) for q in range(n_queues)]
        depth = max((len(p) for p in paths), default=0)
        matrix = np.full((n_queues, depth), -1, dtype=np.int64)
        for q, path in enumerate(paths):
            matrix[q, : len(path)] = path
        return matrix

    def ancestors(self, queue: int) -> list[int]:
        """The queue itself, then its parent, up to the top."""
        return list(self._ancestor_list(queue))

    def _ancestor_list(self, queue: int) -> tuple[int, ...]:
        """`_ancestor_path` as Python ints (read-only: shared by every caller)."""
        path = self._path_lists.get(queue)
        if path is None:
            path = self._path_lists[queue] = tuple(self._ancestor_path(queue).tolist())
        return path

    def _ancestor_path(self, queue: int) -> npt.NDArray[np.int64]:
        path = self._paths.get(queue)
        if path is None:
            chain = []
            cursor = queue
            while cursor >= 0:
                chain.append(cursor)
                cursor = self.snapshot.queues[cursor].parent
            path = self._paths[queue] = np.array(chain, dtype=np.int64)
        return path

    def _charge_queue(self, job: Job, charge: Vector, sign: float) -> None:
        """Add (sign +1) or remove (-1) a task's charge on its queue and every ancestor.

        Removing subtracts the charge, as adding its negation would (the same float results), and
        in place on each row's view (no product array, no write back of the row)."""
        if job.queue < 0:
            return
        change: Callable[[Vector, Vector], object] = operator.iadd if sign > 0 else operator.isub
        allocated, allocated_np, changes = self.queue_allocated, self.queue_allocated_np, self.queue_changes
        for queue in self._ancestor_list(job.queue):  # row by row: a path names each queue once
            change(allocated[queue], charge)
            changes[queue] += 1
            if not job.preemptible:
                change(allocated_np[queue], charge)

    # ----------------------------------------------------------------- task and job state
    def free(self, resource: int, nodes: NodeIndices | slice = slice(None)) -> Vector:
        """What is not allocated of a resource on each node (or on `nodes`): idle, plus what is being
        released (KAI's non-allocated)."""
        free: Vector = self.idle[nodes, resource] + np.maximum(self.releasing[nodes, resource], 0.0)
        return free

    def task(self, index: int) -> Task:
        return self.snapshot.tasks[index]

    def alive_count(self, job: Job) -> int:
        return int(self.podset_alive[job.index].sum())

    def gang_satisfied(self, job: Job) -> bool:
        """Whether the job's alive pods meet its gang (the subgroup tree's minSubGroup rule if it has one)."""
        return job.gang_satisfied_by(self.podset_alive[job.index])

    @staticmethod
    def _task_order_key(task: Task) -> tuple[int, float, str]:
        return (-task.task_priority, task.creation, task.name)

    def pending_tasks(self, job: Job) -> list[Task]:
        """Pending tasks in task order: higher task-priority label first, then creation, then name."""
        order = self.job_order_tasks[job.index]
        pending = order[self.status[order] == _PENDING]
        tasks = self.snapshot.tasks
        return [tasks[t] for t in pending.tolist()]

    def has_pending(self, job: Job) -> bool:
        order = self.job_order_tasks[job.index]
        return bool((self.status[order] == _PENDING).any())

    def attempt_request(self, job: Job) -> Vector:
        """Queue-space resources of the job's next allocation attempt (cached until the job changes).

        While the victim search re-places a victim job, its attempt is the evicted pods it gets back
        (`simulated_attempts`), as KAI counts releasing pods when it re-allocates victims virtually.
        """
        simulated = self.simulated_attempts.get(job.index)
        if simulated is not None:
            return simulated
        version = int(self.job_version[job.index])
        cached = self._attempt_cache.get(job.index)
        if cached is None or cached[0] != version:
            cached = self._attempt_cache[job.index] = (version, self.job_request(self.tasks_to_allocate(job)))
        return cached[1]

    def not_ready(self, job: Job) -> list[tuple[str, int, int]]:
        """KAI's readiness: (podset, minimum, existing pods) for each podset with fewer pods than its minimum.

        A pod exists while it is pending, placed, running or releasing. A job with such a podset (or
        fewer pods in all than its minMember) is not tried by any action: its gang could never start.
        """
        exists = self._existing(job)
        short = [
            (ps.name, ps.min_available, int(exists[i]))
            for i, ps in enumerate(job.podsets)
            if exists[i] < ps.min_available
        ]
        if job.subgroup_sets:
            # a subgroup tree is ready once enough children at every level could form their gangs
            return [] if job.set_satisfied(0, exists) else short
        if not short and int(exists.sum()) < job.min_member:
            short.append((job.podsets[0].name if len(job.podsets) == 1 else "", job.min_member, int(exists.sum())))
        return short

    def _existing(self, job: Job) -> Counts:
        """The job's existing pods per podset (read-only; from the snapshot's statuses, fixed for the session)."""
        exists = self._exists.get(job.index)
        if exists is None:
            exists = np.zeros(len(job.podsets), dtype=np.int64)
            for t in job.tasks:
                if self.snapshot.tasks[t].status <= TaskStatus.RELEASING:
                    exists[self.snapshot.tasks[t].podset] += 1
            exists.flags.writeable = False
            self._exists[job.index] = exists
        return exists

    def tasks_to_allocate(self, job: Job) -> list[Task]:
        """The tasks of the next attempt: the whole missing gang, else one more task (elastic growth).

        Nothing for a job that is not ready (see `not_ready`). Cached until the job changes (every
        statement operation on one of its tasks bumps `job_version`).
        """
        version = int(self.job_version[job.index])
        cached = self._tasks_cache.get(job.index)
        if cached is None or cached[0] != version:
            cached = self._tasks_cache[job.index] = (version, tuple(self._tasks_to_allocate(job)))
        return list(cached[1])

    def _tasks_to_allocate(self, job: Job) -> list[Task]:
        pending = self.pending_tasks(job)
        if not pending or self.not_ready(job):
            return []
        if job.subgroup_sets:
            return _TreeCollector(job, self.podset_alive[job.index], self._existing(job), pending).collect_set(0)
        if self.gang_satisfied(job):
            return pending[:1]
        alive = self.podset_alive[job.index]
        chosen: list[Task] = []
        taken: set[int] = set()
        for i, ps in enumerate(job.podsets):
            need = max(0, ps.min_available - int(alive[i]))
            for t in pending:
                if need == 0:
                    break
                if t.podset == i:
                    chosen.append(t)
                    taken.add(t.index)
                    need -= 1
        missing_total = job.min_member - int(alive.sum()) - len(chosen)
        for t in pending:
            if missing_total <= 0:
                break
            if t.index not in taken:
                chosen.append(t)
                taken.add(t.index)
                missing_total -= 1
        if len(job.podsets) > 1:  # one podset: the first pending tasks, already in task order
            chosen.sort(key=self._task_order_key)
        return chosen

    def job_request(self, tasks: list[Task]) -> Vector:
        if not tasks:
            return np.zeros(3)
        return np.asarray(self.task_charge[[t.index for t in tasks]].sum(axis=0), dtype=np.float64)

    def record_condition(self, job: Job, reason: str, message: str) -> None:
        self.conditions[job.index] = JobCondition(podgroup=job.key, reason=reason, message=message)


class _TreeCollector:
    """KAI's choice of tasks for a job with a subgroup tree (GetTasksToAllocate over a SubGroupSet).

    Per level, members are ordered unsatisfied first, then satisfied ones by their fill ratio
    (optional ones, with a zero minimum, last); ties keep the spec order. A level short of its
    `minSubGroup` collects whole gangs from as many unsatisfied members as it still needs; a
    satisfied level grows by its first member that yields anything: a short podset's whole gang,
    else one pod.
    """

    def __init__(self, job: Job, alive: Counts, exists: Counts, pending: list[Task]) -> None:
        self.job = job
        self.alive = alive
        self.exists = exists
        self.pending: dict[int, list[Task]] = {}
        for task in pending:
            self.pending.setdefault(task.podset, []).append(task)

    def _count_and_threshold(self, member: tuple[bool, int]) -> tuple[int, int]:
        is_set, i = member
        if is_set:
            return self.job.satisfied_members(i, self.alive), self.job.subgroup_sets[i].min_sub_group
        return int(self.alive[i]), self.job.podsets[i].min_available

    def _order_key(self, member: tuple[bool, int]) -> tuple[int, Fraction]:
        count, threshold = self._count_and_threshold(member)
        if count < threshold:
            return (0, Fraction(0))
        if threshold == 0:
            return (2, Fraction(count))
        return (1, Fraction(count, threshold))

    def collect_set(self, index: int) -> list[Task]:
        job = self.job
        if not job.set_satisfied(index, self.exists):
            return []
        group = job.subgroup_sets[index]
        members = sorted(group.members, key=self._order_key)  # stable: ties keep the spec order
        if not job.set_satisfied(index, self.alive):
            wanted = group.min_sub_group - job.satisfied_members(index, self.alive)
            tasks: list[Task] = []
            for member in members:
                if wanted <= 0:
                    break
                if job.member_satisfied(member, self.alive):
                    continue
                got = self._collect(member)
                if got:
                    tasks += got
                    wanted -= 1
            return tasks
        for member in members:
            got = self._collect(member)
            if got:
                return got
        return []

    def _collect(self, member: tuple[bool, int]) -> list[Task]:
        is_set, i = member
        if is_set:
            return self.collect_set(i)
        pending = self.pending.get(i, [])
        if not pending:
            return []
        short = self.job.podsets[i].min_available - int(self.alive[i])
        if short > 0:
            return pending[:short] if len(pending) >= short else []
        return pending[:1]
