"""Where a waiting job stands in its leaf queue, and what the order is made of; for a job with no
usable queue or priority class, where it would stand once its fix is made.

The order is the session's own job key (the priority plugin's priority and elastic state, then
creation time and uid), the one the actions pop jobs by; queues are ordered against each other by
the proportion plugin (queue priority, then fair share), whose inputs are reported as factors.
"""

from __future__ import annotations

import dataclasses

from kai.core.model import Job
from kai.core.session import Session
from kai.explain import analysis, model


def waiting(session: Session, job: Job) -> bool:
    """Does the job wait in its queue (pending pods, a usable queue, not started in this cycle)?"""
    return (
        job.problem is None
        and job.queue >= 0
        and session.has_pending(job)
        and analysis.phase(session, job) == model.PENDING
    )


def position(session: Session, job: Job) -> model.Position | None:
    """The job's place among the waiting jobs of its leaf queue; None if it does not wait in one."""
    if not waiting(session, job):
        return None
    peers = [j for j in session.snapshot.jobs if j.queue == job.queue and waiting(session, j)]
    return _place(session, job, peers)


def position_after(session: Session, job: Job, fix: model.Suggestion) -> model.Position | None:
    """Where a pending job that waits in no queue (its queue or its priority class is unusable) would
    stand once its fix is made: among the jobs waiting now in the leaf queue the fix leaves it in,
    in the session's order, the fix named; None if the fix leaves it with no usable queue."""
    moved = fix.fixed
    if moved is None or moved.problem is not None or moved.queue < 0:
        return None
    if analysis.phase(session, job) != model.PENDING:
        return None
    peers = [
        j for j in session.snapshot.jobs if j.queue == moved.queue and waiting(session, j) and j.index != job.index
    ]
    found = _place(session, moved, [*peers, moved])
    return dataclasses.replace(found, queue=moved.queue_name, after_fix=fix.change)


def _place(session: Session, job: Job, peers: list[Job]) -> model.Position:
    """The job's place among `peers` (itself included), in the session's job order."""
    peers.sort(key=session.job_key)
    index = next(i for i, j in enumerate(peers) if j.index == job.index)
    ahead = tuple(
        model.Ahead(
            podgroup=j.key,
            workload=j.workload,
            gpu=float(session.attempt_request(j)[0]),
            priority=j.priority,
            created=j.creation,
        )
        for j in peers[:index]
    )
    queue = session.snapshot.queues[job.queue]
    factors: dict[str, object] = {
        "queue": queue.name,
        "queuePriority": queue.priority,
        "queueFairShareGpu": float(session.fair_share[job.queue, 0]),
        "queueAllocatedGpu": float(session.queue_allocated[job.queue, 0]),
        "jobPriority": job.priority,
        "created": job.creation,
    }
    return model.Position(in_queue=index + 1, ahead=ahead, factors=factors)
