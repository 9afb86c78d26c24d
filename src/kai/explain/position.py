"""Where a waiting job stands in its leaf queue, and what the order is made of.

The order is the session's own job key (the priority plugin's priority and elastic state, then
creation time and uid), the one the actions pop jobs by; queues are ordered against each other by
the proportion plugin (queue priority, then fair share), whose inputs are reported as factors.
"""

from __future__ import annotations

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
    peers.sort(key=session.job_key)
    index = peers.index(job)
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
