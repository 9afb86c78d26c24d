"""The proportion plugin: fair share per queue, queue order, and the queue capacity gates.

On session open it divides the cluster among the queues level by level (`division.divide_tree`).
It then orders queues by KAI's eight steps and rejects job attempts that would break a queue
limit or put non-preemptible work over quota, at every level of the tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import msgspec
import numpy as np

from kai.core import resources
from kai.core.decisions import JobCondition
from kai.core.model import Job, Matrix
from kai.core.resources import QUEUE_RESOURCE_NAMES, Vector
from kai.core.session import NOTHING, Session, Triple
from kai.plugins.proportion import division

UNLIMITED = -1.0
NO_SHARE_DRF_MULTIPLIER = 1000.0
EPS = 1e-9
OVER_LIMIT = "OverLimit"
NON_PREEMPTIBLE_OVER_QUOTA = "NonPreemptibleOverQuota"
_Used = TypeVar("_Used", float, Vector)


def format_amount(resource: int, value: float) -> str:
    """A queue-space amount as a person reads it: GPUs, CPU cores, memory in GB/MB."""
    if value == UNLIMITED:
        return "unlimited"
    if resource == 0:
        return f"{value:g} GPU" + ("" if value == 1 else "s")
    if resource == 1:
        return f"{value / 1000:g} CPU"
    return f"{value / 1e9:g} GB" if value >= 1e9 else f"{value / 1e6:g} MB"


def allocatable_share(session: Session, queue: int) -> Vector:
    """max(deserved, fair share) capped by the limit; -1 where unlimited (`resources.allocatable_share`)."""
    q = session.snapshot.queues[queue]
    return resources.allocatable_share(q.deserved, session.fair_share[queue], q.limit)


def _drf_caps(share: Vector, total: Vector) -> Triple:
    """What DRF divides by: the allocatable share, or the cluster total where that is unlimited."""
    a, b, c = (float(total[r]) if share[r] == UNLIMITED else float(share[r]) for r in range(3))
    return (a, b, c)


def _share(used: _Used, cap: float) -> _Used:
    """One resource's dominant-share term: what is used over what the queue may have (a queue that may
    have none pays a large multiple of what it uses). `used` is a number or a vector of them."""
    return used * NO_SHARE_DRF_MULTIPLIER if cap == 0 else used / cap


def _drf(caps: Triple, allocated: Sequence[float]) -> float:
    best = 0.0
    for cap, used in zip(caps, allocated, strict=True):
        best = max(best, _share(used, cap))
    return best


def _drf_rows(caps: Triple, allocated: Triple, victims: Matrix) -> Vector:
    """`_drf` of `allocated` less each row of `victims` [S, 3]: the same terms, a column at a time."""
    best = np.zeros(len(victims))
    for r, cap in enumerate(caps):
        np.maximum(best, _share(allocated[r] - victims[:, r], cap), out=best)
    return best


def _le(left: Sequence[float], right: Triple) -> bool:
    """left <= right in every resource, where -1 in either means unlimited."""
    for a, b in zip(left, right, strict=True):
        if a == UNLIMITED:
            if b != UNLIMITED:
                return False
            continue
        if b != UNLIMITED and a > b + EPS:
            return False
    return True


QueueKey = tuple[bool, bool, int, bool, float, float]


class QueueOrder:
    """KAI's queue order (the session's `QueueOrderPolicy`); per-queue constants are computed at session open.

    Steps 1 to 6 are the `key` (smaller goes first), steps 7 and 8 the `tie`:

    1. a queue not over its fair share (in every resource) goes first;
    2. a queue that stays within its deserved quota with the job goes first;
    3. higher queue priority goes first;
    4. a queue that would use a resource with a zero allocatable share goes last;
    5. smaller dominant-resource share with the job (and without the victims) goes first;
    6. smaller dominant-resource share as it is goes first;
    7. the queue whose allocatable share is smaller (in one resource, and nowhere larger) goes first;
    8. the older queue goes first (then the name).

    The allocation order passes the job's next attempt and no victims; the victim order passes no
    job and the victims taken so far (as KAI's victim queue judges a queue by its next victim job,
    which has nothing left to allocate).
    """

    def __init__(self, session: Session) -> None:
        queues = session.snapshot.queues
        total = session.snapshot.total
        shares = [allocatable_share(session, q.index) for q in queues]
        self.allocatable: list[Triple] = [(float(a[0]), float(a[1]), float(a[2])) for a in shares]
        self.caps: list[Triple] = [_drf_caps(a, total) for a in shares]
        self.fair: list[Triple] = [(float(f[0]), float(f[1]), float(f[2])) for f in session.fair_share]
        self.deserved: list[Triple] = [
            (float(q.deserved[0]), float(q.deserved[1]), float(q.deserved[2])) for q in queues
        ]
        self.priority = [q.priority for q in queues]
        self.rank = [(q.age_rank, q.name) for q in queues]
        # keys already computed in this session: a key depends only on its arguments and the constants
        # above, and the job loops ask again for every queue at every pop while few queues changed
        self._known: dict[tuple[int, Triple, Triple, Triple], QueueKey] = {}

    def key(self, session: Session, queue: int, allocated: Triple, job: Triple, victims: Triple) -> QueueKey:
        args = (queue, allocated, job, victims)
        known = self._known.get(args)
        if known is None:
            known = self._known[args] = self._key(queue, allocated, job, victims)
        return known

    def _key(self, queue: int, allocated: Triple, job: Triple, victims: Triple) -> QueueKey:
        fair = self.fair[queue]
        over = fair[0] < allocated[0] and fair[1] < allocated[1] and fair[2] < allocated[2]
        with_job = [allocated[0] + job[0], allocated[1] + job[1], allocated[2] + job[2]]
        starved = _le(with_job, self.deserved[queue])
        penalized = any(a == 0 and j > 0 for a, j in zip(self.allocatable[queue], with_job, strict=True))
        caps = self.caps[queue]
        share = [with_job[0] - victims[0], with_job[1] - victims[1], with_job[2] - victims[2]]
        return (over, not starved, -self.priority[queue], penalized, _drf(caps, share), _drf(caps, allocated))

    def victim_keys(
        self, session: Session, queue: int, allocated: Triple, victims: Matrix
    ) -> tuple[tuple[bool, bool, int, bool], Vector, tuple[float]]:
        """`key` with no job for each row of victims: only step 5 depends on the victims."""
        head = self.key(session, queue, allocated, NOTHING, NOTHING)
        shares = _drf_rows(self.caps[queue], allocated, victims)
        return (head[0], head[1], head[2], head[3]), shares, (head[5],)

    def tie(self, session: Session, left: int, right: int) -> int:
        l_alloc, r_alloc = self.allocatable[left], self.allocatable[right]
        l_le, r_le = _le(list(l_alloc), r_alloc), _le(list(r_alloc), l_alloc)
        if l_le and not r_le:
            return -1
        if r_le and not l_le:
            return 1
        return -1 if self.rank[left] < self.rank[right] else 1


class CapacityBlock(msgspec.Struct, frozen=True, kw_only=True):
    """Which capacity gate stops a job attempt, at which queue level, with the numbers behind it.

    `bound` is the queue's limit (OverLimit) or its quota (NonPreemptibleOverQuota); `allocated`
    is what the queue holds (all work for a limit, non-preemptible work for a quota), `request`
    what the attempt adds, all in queue space for `resource` (0 gpu, 1 cpu, 2 memory).
    """

    reason: str  # OVER_LIMIT or NON_PREEMPTIBLE_OVER_QUOTA
    queue: int
    resource: int
    allocated: float
    request: float
    bound: float

    def message(self, session: Session) -> str:
        queue = session.snapshot.queues[self.queue].name
        name = QUEUE_RESOURCE_NAMES[self.resource]
        r = self.resource
        if self.reason == OVER_LIMIT:
            return (
                f"queue {queue} would exceed its {name} limit: it has "
                f"{format_amount(r, self.allocated)} allocated, "
                f"the job needs {format_amount(r, self.request)}, "
                f"the limit is {format_amount(r, self.bound)}"
            )
        return (
            f"non-preemptible job would put queue {queue} over its {name} quota: it has "
            f"{format_amount(r, self.allocated)} of non-preemptible work, the job needs "
            f"{format_amount(r, self.request)}, the quota is {format_amount(r, self.bound)}; "
            "use a preemptible priority class (such as train) to run over quota"
        )


def capacity_block(session: Session, job: Job, request: Vector) -> CapacityBlock | None:
    """The first gate the attempt breaks, walking up from the job's leaf queue; None if it passes.

    At each level: every limit, then (for a non-preemptible job) every quota. As KAI's capacity policy,
    a resource the job does not request is never checked (so a queue already over a lowered limit, or
    with a negative one, still takes jobs that do not ask for that resource).
    """
    for q in session.ancestors(job.queue):
        queue = session.snapshot.queues[q]
        for r in range(3):
            limit = queue.limit[r]
            allocated = session.queue_allocated[q, r]
            if limit != UNLIMITED and request[r] != 0 and allocated + request[r] > limit + EPS:
                return CapacityBlock(
                    reason=OVER_LIMIT,
                    queue=q,
                    resource=r,
                    allocated=float(allocated),
                    request=float(request[r]),
                    bound=float(limit),
                )
        if job.preemptible:
            continue
        for r in range(3):
            quota = queue.deserved[r]
            allocated = session.queue_allocated_np[q, r]
            if quota != UNLIMITED and request[r] != 0 and allocated + request[r] > quota + EPS:
                return CapacityBlock(
                    reason=NON_PREEMPTIBLE_OVER_QUOTA,
                    queue=q,
                    resource=r,
                    allocated=float(allocated),
                    request=float(request[r]),
                    bound=float(quota),
                )
    return None


def check_capacity(session: Session, job: Job, request: Vector) -> JobCondition | None:
    """Queue limits at every level, and non-preemptible jobs only within quota at every level."""
    block = capacity_block(session, job, request)
    if block is None:
        return None
    return JobCondition(
        podgroup=job.key,
        reason=block.reason,
        message=block.message(session),
        queue=session.snapshot.queues[block.queue].name,
    )


def compute_fair_share(session: Session) -> None:
    snap = session.snapshot
    if not snap.queues:
        return
    nodes = [
        division.QueueTreeNode(
            name=q.name,
            parent=snap.queues[q.parent].name if q.parent >= 0 else None,
            priority=q.priority,
            age_rank=q.age_rank,
            deserved=q.deserved,
            limit=q.limit,
            weight=q.weight,
            request=session.queue_request[q.index].copy(),
        )
        for q in snap.queues
    ]
    shares = division.divide_tree(total=snap.total.copy(), queues=nodes, k_value=session.config.k_value)
    for q in snap.queues:
        session.fair_share[q.index] = shares[q.name]


class ProportionPlugin:
    name = "proportion"

    def on_session_open(self, session: Session) -> None:
        compute_fair_share(session)
        session.set_queue_order(QueueOrder(session))
        session.capacity_checks.append(check_capacity)
