"""Job order inside a queue: higher priority first, then KAI's elastic order.

The elastic part puts jobs below their gang minimum first, then jobs exactly at it, then jobs
above it (elastic growth comes last). The session appends creation time and uid to every key.
"""

from __future__ import annotations

from kai.core.model import Job
from kai.core.session import Session


def job_key(session: Session, job: Job) -> tuple[float, ...]:
    alive = session.alive_count(job)
    if alive < job.min_member:
        elastic = 0
    elif alive == job.min_member:
        elastic = 1
    else:
        elastic = 2
    return (-float(job.priority), float(elastic))


class PriorityPlugin:
    name = "priority"

    def on_session_open(self, session: Session) -> None:
        session.job_keys.append(job_key)
