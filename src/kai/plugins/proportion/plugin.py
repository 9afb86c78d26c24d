"""The proportion plugin: fair share per queue, queue order, and the queue capacity gates.

On session open it divides the cluster among the queues level by level (`division.divide_tree`).
It then orders queues by KAI's eight steps and rejects job attempts that would break a queue
limit or put non-preemptible work over quota, at every level of the tree.
"""

from __future__ import annotations

import numpy as np

from kai.core.decisions import JobCondition
from kai.core.model import Job
from kai.core.resources import QUEUE_RESOURCE_NAMES, Vector
from kai.core.session import Session
from kai.plugins.proportion import division

UNLIMITED = -1.0
NO_SHARE_DRF_MULTIPLIER = 1000.0
EPS = 1e-9
OVER_LIMIT = "OverLimit"
NON_PREEMPTIBLE_OVER_QUOTA = "NonPreemptibleOverQuota"


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
    """max(deserved, fair share) capped by the limit; -1 where unlimited."""
    q = session.snapshot.queues[queue]
    fair = session.fair_share[queue]
    out = np.where(q.deserved == UNLIMITED, UNLIMITED, np.maximum(q.deserved, fair))
    return np.where(q.limit == UNLIMITED, out, np.where(out == UNLIMITED, q.limit, np.minimum(out, q.limit)))


def _less_equal(left: Vector, right: Vector) -> bool:
    """left <= right in every resource, where -1 in either means unlimited."""
    for a, b in zip(left, right, strict=True):
        if a == UNLIMITED:
            if b != UNLIMITED:
                return False
            continue
        if b != UNLIMITED and a > b + EPS:
            return False
    return True


def dominant_share(session: Session, queue: int, allocated: Vector) -> float:
    share = allocatable_share(session, queue)
    total = session.snapshot.total
    best = 0.0
    for r in range(3):
        cap = total[r] if share[r] == UNLIMITED else share[r]
        value = allocated[r] * NO_SHARE_DRF_MULTIPLIER if cap == 0 else allocated[r] / cap
        best = max(best, value)
    return best


def compare_queues(session: Session, left: int, right: int, left_job: Job, right_job: Job) -> int:
    """KAI's queue order; negative when `left` goes first. Steps:

    1. a queue not over its fair share (in every resource) goes first;
    2. a queue that stays within its deserved quota with the job goes first;
    3. higher queue priority goes first;
    4. a queue that would use a resource with a zero allocatable share goes last;
    5. smaller dominant-resource share with the job goes first;
    6. smaller dominant-resource share without it goes first;
    7. the queue whose allocatable share is smaller (in one resource, and nowhere larger) goes first;
    8. the older queue goes first (then the name).
    """
    queues = session.snapshot.queues
    la, ra = session.queue_allocated[left], session.queue_allocated[right]
    lf, rf = session.fair_share[left], session.fair_share[right]
    l_over = bool(np.all(lf < la))
    r_over = bool(np.all(rf < ra))
    if l_over != r_over:
        return 1 if l_over else -1
    lj = la + session.attempt_request(left_job)
    rj = ra + session.attempt_request(right_job)
    l_starved = _less_equal(lj, queues[left].deserved)
    r_starved = _less_equal(rj, queues[right].deserved)
    if l_starved != r_starved:
        return -1 if l_starved else 1
    if queues[left].priority != queues[right].priority:
        return -1 if queues[left].priority > queues[right].priority else 1
    l_alloc, r_alloc = allocatable_share(session, left), allocatable_share(session, right)
    l_pen = bool(np.any((l_alloc == 0) & (lj > 0)))
    r_pen = bool(np.any((r_alloc == 0) & (rj > 0)))
    if l_pen != r_pen:
        return 1 if l_pen else -1
    for l_value, r_value in (
        (dominant_share(session, left, lj), dominant_share(session, right, rj)),
        (dominant_share(session, left, la), dominant_share(session, right, ra)),
    ):
        if l_value != r_value:
            return -1 if l_value < r_value else 1
    l_le, r_le = _less_equal(l_alloc, r_alloc), _less_equal(r_alloc, l_alloc)
    if l_le and not r_le:
        return -1
    if r_le and not l_le:
        return 1
    return (
        -1 if (queues[left].age_rank, queues[left].name) < (queues[right].age_rank, queues[right].name) else 1
    )


def check_capacity(session: Session, job: Job, request: Vector) -> JobCondition | None:
    """Queue limits at every level, and non-preemptible jobs only within quota at every level."""
    for q in session.ancestors(job.queue):
        queue = session.snapshot.queues[q]
        for r in range(3):
            limit = queue.limit[r]
            allocated = session.queue_allocated[q, r]
            if limit != UNLIMITED and allocated + request[r] > limit + EPS:
                name = QUEUE_RESOURCE_NAMES[r]
                return JobCondition(
                    podgroup=job.key,
                    reason=OVER_LIMIT,
                    message=(
                        f"queue {queue.name} would exceed its {name} limit: it has "
                        f"{format_amount(r, allocated)} allocated, "
                        f"the job needs {format_amount(r, request[r])}, "
                        f"the limit is {format_amount(r, limit)}"
                    ),
                )
        if job.preemptible:
            continue
        for r in range(3):
            quota = queue.deserved[r]
            allocated = session.queue_allocated_np[q, r]
            if quota != UNLIMITED and allocated + request[r] > quota + EPS:
                name = QUEUE_RESOURCE_NAMES[r]
                return JobCondition(
                    podgroup=job.key,
                    reason=NON_PREEMPTIBLE_OVER_QUOTA,
                    message=(
                        f"non-preemptible job would put queue {queue.name} over its {name} quota: it has "
                        f"{format_amount(r, allocated)} of non-preemptible work, the job needs "
                        f"{format_amount(r, request[r])}, the quota is {format_amount(r, quota)}; "
                        "use a preemptible priority class (such as train) to run over quota"
                    ),
                )
    return None


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
        session.set_queue_compare(compare_queues)
        session.capacity_checks.append(check_capacity)
