"""The allocate action: start pending jobs on free resources, gangs whole, elastic jobs pod by pod.

Reads top-down: pop the best job across the queue tree; check its queue's capacity gates; open
a statement; place the attempt's tasks (the missing gang, else one more pod); commit or discard;
push an elastic job back to try one more pod later. Unschedulable jobs get a condition saying why.
A job with fewer pods than its gang needs is not ready: it is skipped with a Normal NotReady event
on its PodGroup and no condition, as KAI does.
"""

from __future__ import annotations

from kai.actions.common.job_order import JobsByQueue
from kai.actions.common.placement import place_tasks
from kai.core.decisions import Event, JobStart
from kai.core.model import Job, TaskStatus
from kai.core.session import Session
from kai.core.statement import Statement

UNSCHEDULABLE = "Unschedulable"
NOT_READY = "NotReady"


def not_ready_message(short: list[tuple[str, int, int]]) -> str:
    """KAI's NotReady event text: the podsets still waiting for pods to be created."""
    message = "Job is not ready for scheduling."
    for podset, minimum, existing in short:
        if podset in ("", "default"):
            message += f" Waiting for {minimum} pods, currently {existing} exist."
        else:
            message += f" Waiting for {minimum} pods for SubGroup {podset}, currently {existing} exist."
    return message


def _candidates(session: Session) -> list[Job]:
    jobs = []
    for job in session.snapshot.jobs:
        if not session.has_pending(job):
            continue
        if job.problem is not None:
            session.record_condition(job, job.problem.reason, job.problem.message)
            continue
        short = session.not_ready(job)
        if short:
            session.events.append(
                Event(type="Normal", reason=NOT_READY, object=f"PodGroup/{job.key}", message=not_ready_message(short))
            )
            continue
        jobs.append(job)
    return jobs


class AllocateAction:
    name = "allocate"

    def execute(self, session: Session) -> None:
        order = JobsByQueue(session, _candidates(session))
        while (job := order.pop()) is not None:
            tasks = session.tasks_to_allocate(job)
            if not tasks:
                continue
            request = session.job_request(tasks)
            rejected = next(
                (c for check in session.capacity_checks if (c := check(session, job, request)) is not None),
                None,
            )
            if rejected is not None:
                session.conditions[job.index] = rejected
                continue
            was_idle = session.alive_count(job) == 0
            stmt = Statement(session, action=self.name)
            error = place_tasks(session, stmt, job, tasks)
            if error is not None:
                stmt.discard()
                session.record_condition(job, UNSCHEDULABLE, error)
                continue
            stmt.commit()
            session.conditions.pop(job.index, None)
            if was_idle and any(session.status[t.index] == TaskStatus.ALLOCATED for t in tasks):
                session.starts.append(JobStart(podgroup=job.key))
            if session.has_pending(job):
                order.push(job)
