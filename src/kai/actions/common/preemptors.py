"""The loop preempt, reclaim and consolidation share: which pending jobs try, in which order, how often.

Jobs come in KAI's hierarchical queue order. A job is skipped when its queue already had
`queueDepthPerAction` jobs tried in this action, or when an attempt with the same scheduling
signature (or the same pod shape with fewer pods) already failed in this cycle, or when the same
search failed in an earlier cycle on the same cluster (`kai.actions.common.searches`). A job whose
attempt succeeds loses its condition, and is tried again for its next pod if it is elastic. The
action stops when its scenario budget runs out.

A job inside its preemption delay window (`PodGroup.spec.preemptionDelay`, counted from the later
of its creation and the last time the scheduler evicted it) may not trigger evictions: it is left
out of every action that evicts for it, and gets the `PreemptionDelayNotElapsed` condition. It still
allocates into free capacity, and it can still be a victim.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from kai.actions.common import searches
from kai.actions.common.job_order import JobsByQueue
from kai.actions.common.victims import DepthCap, already_failed, signature, with_pending
from kai.api.fields import format_timestamp
from kai.api.podgroup import format_duration
from kai.core.decisions import JobStart
from kai.core.model import Job, Task, TaskStatus
from kai.core.session import Session

Attempt = Callable[[Job, Sequence[Task]], bool]

PREEMPTION_DELAY_NOT_ELAPSED = "PreemptionDelayNotElapsed"


def within_preemption_delay(job: Job, now: float) -> bool:
    """Is `now` still inside the job's preemption delay window?"""
    end = job.preemption_delay_end
    return end is not None and now < end


def preemption_delay_message(job: Job) -> str:
    end = job.preemption_delay_end
    assert end is not None
    return (
        f"Workload is within its preemption delay window ({format_duration(job.preemption_delay)}) "
        f"and may not trigger evictions before {format_timestamp(math.floor(end))}"
    )


def pending_jobs(session: Session, *, preemptible_only: bool = False) -> list[Job]:
    """Jobs that may take resources from others: pending pods, a valid queue, allowed to preempt.

    Jobs inside their preemption delay window are left out and get the PreemptionDelayNotElapsed
    condition (one per job, however many actions ask).
    """
    out = []
    jobs = session.snapshot.jobs
    for j in np.flatnonzero(with_pending(session)).tolist():
        job = jobs[j]
        if job.problem is not None or job.queue < 0 or not job.can_preempt:
            continue
        if preemptible_only and not job.preemptible:
            continue
        if within_preemption_delay(job, session.now):
            if not session.not_ready(job):
                session.record_condition(job, PREEMPTION_DELAY_NOT_ELAPSED, preemption_delay_message(job))
            continue
        out.append(job)
    return out


def run(session: Session, *, action: str, jobs: Sequence[Job], attempt: Attempt) -> None:
    """Try the jobs in order until none is left or the action's scenario budget runs out (`searches`)."""
    order = JobsByQueue(session, jobs)
    depth = DepthCap(session.config.queue_depth_per_action)
    searches.begin(session, action)
    while (job := order.pop()) is not None:
        tasks = session.tasks_to_allocate(job)
        if not tasks or not depth.allow(job.queue):
            continue
        sig = signature(action, job, tasks)
        if already_failed(session, sig):
            continue
        key = (action, job.key, sig)
        cost = searches.remembered_cost(session, key)
        if cost is not None and searches.affordable(session, action, cost):
            # the same search failed in an earlier cycle on this very cluster: it would fail again
            searches.failed(session, key, remembered=cost)
            session.failed_signatures.add(sig)
            continue
        was_idle = session.alive_count(job) == 0
        searches.start_attempt(session, action)
        try:
            found = attempt(job, tasks)
        except searches.BudgetExhausted:
            left = 1
            while order.pop() is not None:
                left += 1
            searches.exhausted(session, action, left=left)
            return
        if not found:
            searches.failed(session, key)
            session.failed_signatures.add(sig)
            continue
        searches.solved(session, action)
        session.conditions.pop(job.index, None)
        if was_idle and any(session.status[t.index] == TaskStatus.ALLOCATED for t in tasks):
            session.starts.append(JobStart(podgroup=job.key))
        if session.has_pending(job):
            order.push(job)
