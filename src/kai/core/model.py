"""The snapshot's model: tasks (pods), jobs (pod groups), queues and nodes, frozen for one cycle.

A snapshot is immutable. Everything a session changes lives in the session's own arrays
(`kai.core.session`), so the snapshot can be shared, compared before and after an action, and
rebuilt incrementally by the adapter.

Records here and across kai's layers below the adapters are msgspec Structs rather than dataclasses:
a Struct class costs 0.01 ms to create at import, a dataclass 0.3 ms (it `exec`s generated methods),
and `kai sim` imports over a hundred of them. A record left a dataclass says why.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import msgspec
import numpy as np
import numpy.typing as npt

from kai.api.node import Taint
from kai.api.pod import NodeSelectorTerm, Toleration
from kai.core.resources import ResourceIndex, Vector

Matrix = npt.NDArray[np.float64]
BoolVector = npt.NDArray[np.bool_]
NodeIndices = npt.NDArray[np.int64]  # node indices, ascending (nodes sorted by name)


class TaskStatus(enum.IntEnum):
    """Pod states the scheduler distinguishes (KAI's pod_status, reduced to what decisions need)."""

    PENDING = 0  # waiting for a node
    ALLOCATED = 1  # placed on idle resources in this cycle; a bind follows
    PIPELINED = 2  # placed on resources still being released; binds in a later cycle
    RUNNING = 3  # bound to a node (running or starting)
    RELEASING = 4  # evicted; holds its resources until its grace period ends
    SUCCEEDED = 5
    FAILED = 6

    def __str__(self) -> str:
        return self.name.capitalize()


# Statuses that count toward a gang's minimum (a releasing pod is on its way out).
ALIVE = frozenset({TaskStatus.ALLOCATED, TaskStatus.PIPELINED, TaskStatus.RUNNING})


class Constraint(msgspec.Struct, frozen=True, kw_only=True):
    """A pod's node constraints; tasks with equal constraints share one cached node mask."""

    node_selector: tuple[tuple[str, str], ...] = ()
    affinity_terms: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()


class Task(msgspec.Struct, frozen=True, gc=False):
    """A pod as the cycle sees it. A msgspec Struct rather than a frozen dataclass: a snapshot holds one per
    pod, and a Struct is built several times faster (`msgspec.structs.replace` changes a copy). Not tracked
    by the garbage collector (`gc=False`): its fields (numbers, strings, a request vector) never lead back
    to it, so the collector has nothing to find in the 50,000 of a large cycle. Its fields may be given in
    order: the snapshot builder does, as eighteen keywords cost 0.5 us more per pod to match (25 ms on a
    50,000-pod snapshot); anywhere else, name them."""

    index: int
    namespace: str
    name: str
    job: int
    podset: int  # index into the job's podsets
    request: Vector  # node-level request (a fractional pod's GPU share is not here, see gpu_portion)
    gpu_portion: float  # portion of each shared device (0 for pods that do not share GPUs)
    gpu_devices: int  # number of shared devices (multi-device fractions)
    gpu_memory_mib: int  # when the share was asked as memory; converted per node
    status: TaskStatus
    node: int  # -1 when not on a node
    nominated_node: int  # -1 when none
    gpu_groups: tuple[str, ...]
    task_priority: int  # kai.scheduler/task-priority label; higher first
    creation: float
    start_time: float | None
    constraint: int  # index into Snapshot.constraints
    grace_seconds: float

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def is_shared_gpu(self) -> bool:
        return self.gpu_portion > 0 or self.gpu_memory_mib > 0


class PodSet(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    min_available: int
    tasks: tuple[int, ...]


class SubGroupSet(msgspec.Struct, frozen=True, kw_only=True):
    """A level of a PodGroup's subgroup tree (index 0: the PodGroup itself) and its `minSubGroup` rule.

    The set is satisfied when at least `min_sub_group` of its direct members are: a podset member
    when it has its `min_available` pods, a set member by this same rule.
    """

    name: str
    min_sub_group: int
    members: tuple[tuple[bool, int], ...]  # (is a set, index into Job.subgroup_sets or Job.podsets), spec order


Counts = npt.NDArray[np.int64]


class JobProblem(msgspec.Struct, frozen=True, kw_only=True):
    """Why a job cannot be considered at all (e.g. its queue does not exist)."""

    reason: str
    message: str


class Job(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    namespace: str
    name: str
    uid: str
    queue: int  # leaf queue index, -1 when the queue is missing or not a leaf
    queue_name: str
    priority: int
    priority_class_name: str
    preemptible: bool
    can_preempt: bool  # False for a PriorityClass with preemptionPolicy: Never
    min_member: int
    podsets: tuple[PodSet, ...]
    tasks: tuple[int, ...]
    creation: float
    last_start: float | None
    stale_since: float | None
    problem: JobProblem | None = None
    preemption_delay: float = 0.0  # seconds a pending job waits before it may trigger evictions
    last_eviction: float | None = None  # when the scheduler last evicted pods of this job
    staleness_grace_period: float | None = None  # None: the scheduler's global grace period
    safe_to_consolidate: bool = True  # False: consolidation never moves this job
    # the subgroup tree when some level sets minSubGroup; empty: every podset and min_member must be met
    subgroup_sets: tuple[SubGroupSet, ...] = ()
    workload: str = ""  # `Kind/name` of the workload as its user named it (see api.podgroup.workload_of)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def display_name(self) -> str:
        """How messages name the job: the user's workload name (`build-pod`), not the PodGroup's."""
        return self.workload.split("/", 1)[1] if "/" in self.workload else self.name

    def gang_satisfied_by(self, counts: Counts) -> bool:
        """Whether per-podset pod counts meet the gang: the subgroup tree's rule, else the flat one."""
        if not self.subgroup_sets:
            if int(counts.sum()) < self.min_member:
                return False
            return all(int(counts[i]) >= ps.min_available for i, ps in enumerate(self.podsets))
        return self.set_satisfied(0, counts)

    def set_satisfied(self, index: int, counts: Counts) -> bool:
        group = self.subgroup_sets[index]
        return self.satisfied_members(index, counts) >= group.min_sub_group

    def satisfied_members(self, index: int, counts: Counts) -> int:
        """How many direct members of subgroup set `index` the counts satisfy."""
        return sum(1 for member in self.subgroup_sets[index].members if self.member_satisfied(member, counts))

    def member_satisfied(self, member: tuple[bool, int], counts: Counts) -> bool:
        is_set, i = member
        if is_set:
            return self.set_satisfied(i, counts)
        return int(counts[i]) >= self.podsets[i].min_available

    @property
    def preemption_delay_end(self) -> float | None:
        """When the job may first trigger evictions: max(creation, last eviction) + delay; None without a delay."""
        if self.preemption_delay <= 0:
            return None
        anchor = self.creation
        if self.last_eviction is not None and self.last_eviction > anchor:
            anchor = self.last_eviction
        return anchor + self.preemption_delay


class Queue(msgspec.Struct, frozen=True, kw_only=True):
    """A queue; vectors are in queue space (gpu devices, cpu millicores, memory bytes); -1 = unlimited."""

    index: int
    name: str
    parent: int  # -1 for a top-level queue
    children: tuple[int, ...]
    priority: int
    age_rank: int  # 0 = oldest
    deserved: Vector
    limit: Vector
    weight: Vector
    preempt_min_runtime: float
    reclaim_min_runtime: float

    @property
    def is_leaf(self) -> bool:
        return not self.children


class SharedGpu(msgspec.Struct, frozen=True, kw_only=True):
    """One shared device (GPU group) on a node at snapshot time."""

    group: str
    node: int
    portion_used: float  # by alive or releasing tasks
    portion_releasing: float
    tasks: tuple[int, ...]


class Nodes(msgspec.Struct, frozen=True, kw_only=True):
    names: tuple[str, ...]
    allocatable: Matrix  # [N, R]
    used: Matrix  # [N, R] held by running and allocated pods, foreign pods included
    releasing: Matrix  # [N, R] held by releasing pods
    schedulable: BoolVector  # ready and not cordoned
    labels: tuple[Mapping[str, str], ...]
    taints: tuple[tuple[Taint, ...], ...]
    gpu_memory_mib: npt.NDArray[np.int64]

    @property
    def count(self) -> int:
        return len(self.names)


class Snapshot(msgspec.Struct, frozen=True, kw_only=True):
    """Everything one scheduling cycle may read. `now` is seconds since the epoch, supplied by the caller."""

    now: float
    resources: ResourceIndex
    nodes: Nodes
    tasks: tuple[Task, ...]
    jobs: tuple[Job, ...]
    queues: tuple[Queue, ...]
    constraints: tuple[Constraint, ...]
    constraint_masks: tuple[BoolVector, ...]  # per constraint: nodes whose labels/taints admit it
    shared_gpus: tuple[SharedGpu, ...]
    total: Vector  # queue space: cluster resources the queues divide (foreign usage removed)
    queue_by_name: Mapping[str, int] = msgspec.field(default_factory=dict)
