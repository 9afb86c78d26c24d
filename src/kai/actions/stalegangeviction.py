"""The stalegangeviction action: a running gang that fell below its minimum is evicted whole.

A job is stale when it has active pods, none of its pods succeeded, and it is below its gang
minimum (in total or in some podset; for a subgroup tree with `minSubGroup`, when fewer of its
subgroups are satisfied than some level needs). The first cycle that sees it stale marks the PodGroup
(`kai.scheduler/stale-podgroup-timestamp`); once it has been stale for the staleness grace period
(60s by default, negative: never), all its active pods are evicted so its GPUs stop idling behind
a gang that cannot run. A job that recovers loses the mark. A PodGroup's own
`spec.stalenessGracePeriod` replaces the global period for that job (negative: never evict it).
"""

from __future__ import annotations

import numpy as np

from kai.core.decisions import StaleMark
from kai.core.model import Job, TaskStatus
from kai.core.session import Session
from kai.core.statement import Statement


def is_stale(session: Session, job: Job) -> bool:
    """Active, nothing succeeded, and the gang rule (flat minimums or the subgroup tree) is not met."""
    if session.alive_count(job) == 0 or session.gang_satisfied(job):
        return False
    return not bool(np.any(session.status[session.job_order_tasks[job.index]] == TaskStatus.SUCCEEDED))


def _seconds(value: float) -> str:
    return f"{value:g}s"


def grace_period(session: Session, job: Job) -> float:
    """The staleness grace period that applies to the job: its own, else the scheduler's."""
    if job.staleness_grace_period is not None:
        return job.staleness_grace_period
    return session.config.staleness_grace_period


class StaleGangEvictionAction:
    name = "stalegangeviction"

    def execute(self, session: Session) -> None:
        for job in session.snapshot.jobs:
            grace = grace_period(session, job)
            stale = is_stale(session, job)
            if not stale:
                if job.stale_since is not None:
                    session.stale_marks.append(StaleMark(podgroup=job.key, since=None))
                continue
            if job.stale_since is None:
                session.stale_marks.append(StaleMark(podgroup=job.key, since=session.now))
                if grace != 0:
                    continue
            since = job.stale_since if job.stale_since is not None else session.now
            if grace < 0 or session.now - since < grace:
                continue
            running = [t for t in job.tasks if session.status[t] in (TaskStatus.RUNNING, TaskStatus.ALLOCATED)]
            if not running:
                continue
            alive = session.alive_count(job)
            whose = "its own (stalenessGracePeriod)" if job.staleness_grace_period is not None else "the scheduler's"
            if job.subgroup_sets:
                root = job.subgroup_sets[0]
                satisfied = job.satisfied_members(0, session.podset_alive[job.index])
                short = (
                    f"{satisfied} of the {root.min_sub_group} top-level subgroups it needs (minSubGroup) "
                    f"at their minimum"
                )
            else:
                short = f"{alive} of the {job.min_member} pods it needs (minMember)"
            message = (
                f"evicted by stalegangeviction: gang {job.display_name} has had {short} "
                f"for {_seconds(session.now - since)}, "
                f"longer than {whose} staleness grace period of {_seconds(grace)}; its remaining pods are stopped "
                "so their resources are not held idle"
            )
            stmt = Statement(session, action=self.name)
            for t in running:
                stmt.evict(session.task(t), preemptor=None, message=message)
            stmt.commit()
            session.stale_marks.append(StaleMark(podgroup=job.key, since=None))
