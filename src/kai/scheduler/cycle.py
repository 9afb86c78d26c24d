"""One scheduling cycle: snapshot in, decisions out.

1. Open a session over the snapshot; every plugin registers its callbacks.
2. Run the configured actions in order.
3. Close the session: collect placements, evictions, conditions and events as data, with the
   queues' and PodGroups' figures as the decisions leave them (what a cluster's Queue and PodGroup
   status show, so the simulator and a real cluster can never disagree).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from kai.actions.common import searches
from kai.actions.stalegangeviction import is_stale
from kai.api import podgroup as api_podgroup
from kai.core.decisions import CycleResult, HopelessSearches, JobFigures, QueueFigures, Triple
from kai.core.model import Matrix, Snapshot, TaskStatus
from kai.core.session import SchedulerConfig, Session
from kai.scheduler import registry
from kai.scheduler.clock_rules import next_clock_event


def open_session(snapshot: Snapshot, config: SchedulerConfig) -> Session:
    session = Session(snapshot, config)
    for factory in registry.PLUGINS:
        factory().on_session_open(session)
    return session


ActionRunner = Callable[[str, Callable[[], None]], None]


def _run_directly(name: str, run: Callable[[], None]) -> None:
    run()


def run_actions(
    snapshot: Snapshot,
    config: SchedulerConfig,
    *,
    run_action: ActionRunner = _run_directly,
    hopeless: HopelessSearches | None = None,
    opened: Callable[[Session], None] | None = None,
) -> Session:
    """Steps 1 and 2: the session after every configured action ran (what `kai.explain` reads).

    `run_action(name, run)` must call `run()` once; an adapter passes its own to time each action
    (the core itself reads no clock). `hopeless`: the failed searches of the last cycle, passed only by
    an adapter whose cluster has not changed since that cycle's snapshot; they are not searched again
    (same decisions, `kai.actions.common.searches`). `opened(session)` is called once the session is
    open, before the first action: `session.placements` only grows, one committed statement after
    another, so an adapter may read it while the actions run (`kai run` binds what allocate commits
    at once)."""
    # 1. open the session
    session = open_session(snapshot, config)
    searches.remember(session, hopeless)
    if opened is not None:
        opened(session)
    # 2. run the actions
    for name in config.actions:
        action = registry.make_action(name)
        if action is not None:
            run_action(name, functools.partial(action.execute, session))
    return session


def run_cycle(
    snapshot: Snapshot,
    config: SchedulerConfig,
    *,
    run_action: ActionRunner = _run_directly,
    hopeless: HopelessSearches | None = None,
) -> CycleResult:
    return close_session(run_actions(snapshot, config, run_action=run_action, hopeless=hopeless))


# The PodGroup annotations that are clocks of time-dependent rules: the minimum runtime since the last
# start, the preemption delay since the last eviction, the staleness of a gang. They act only for a
# waiting job or a stale gang, so a settled cycle's outcome does not depend on them, and a change of
# them alone (the echo of the scheduler's own stamps) leaves a settled cluster settled.
CLOCK_ANNOTATIONS = frozenset(
    (
        api_podgroup.LAST_START_ANNOTATION,
        api_podgroup.LAST_EVICTION_ANNOTATION,
        api_podgroup.STALE_TIMESTAMP_ANNOTATION,
    )
)


def settled(session: Session) -> bool:
    """Whether the cycle's outcome holds for as long as its snapshot does, whatever the clock says:
    no task waits for a node (so no action has a job to place, pipeline, reclaim or preempt for, and
    no waiting job has a condition to age) and no gang is stale (so the staleness clock of
    stalegangeviction is not running). An adapter whose cluster state has not changed since a settled
    cycle may skip the next cycles: they would decide nothing, as this one did."""
    if any(task.status == TaskStatus.PENDING for task in session.snapshot.tasks):
        return False
    return not any(is_stale(session, job) for job in session.snapshot.jobs)


def close_session(session: Session) -> CycleResult:
    """Step 3: decisions leave as data."""
    queues, jobs = _figures(session)
    return CycleResult(
        placements=tuple(session.placements),
        evictions=tuple(session.evictions),
        conditions=tuple(session.conditions[j] for j in sorted(session.conditions)),
        events=tuple(session.events),
        starts=tuple(session.starts),
        stale_marks=tuple(session.stale_marks),
        queues=queues,
        jobs=jobs,
        searches=searches.reports(session),
        hopeless=searches.hopeless(session, until=next_clock_event),
    )


def _triple(row: Matrix) -> Triple:
    return (float(row[0]), float(row[1]), float(row[2]))


def _figures(session: Session) -> tuple[dict[str, QueueFigures], dict[str, JobFigures]]:
    """Per-job and per-queue resources once the cycle's decisions are applied.

    Bound pods (bound before or in this cycle) are allocated; pipelined and pending pods are only
    requested; releasing and finished pods count for neither. Queue figures roll up the tree.
    """
    snapshot = session.snapshot
    n_jobs, n_queues = len(snapshot.jobs), len(snapshot.queues)
    job_of = np.fromiter((t.job for t in snapshot.tasks), dtype=np.int64, count=len(snapshot.tasks))
    bound = np.isin(session.status, (TaskStatus.ALLOCATED, TaskStatus.RUNNING))
    wanted = bound | np.isin(session.status, (TaskStatus.PENDING, TaskStatus.PIPELINED))
    job_allocated = np.zeros((n_jobs, 3))
    job_requested = np.zeros((n_jobs, 3))
    np.add.at(job_allocated, job_of[bound], session.task_charge[bound])
    np.add.at(job_requested, job_of[wanted], session.task_charge[wanted])
    preemptible = np.fromiter((j.preemptible for j in snapshot.jobs), dtype=np.bool_, count=n_jobs)
    job_allocated_np = np.where(preemptible[:, None], 0.0, job_allocated)
    leaf = np.fromiter((j.queue for j in snapshot.jobs), dtype=np.int64, count=n_jobs)
    queued = leaf >= 0
    own = np.zeros((3, n_queues, 3))
    for k, per_job in enumerate((job_allocated, job_allocated_np, job_requested)):
        np.add.at(own[k], leaf[queued], per_job[queued])
    rolled = np.zeros_like(own)
    for q in range(n_queues):
        rolled[:, session.ancestors(q)] += own[:, q][:, None, :]
    queues = {
        q.name: QueueFigures(
            fair_share=_triple(session.fair_share[q.index]),
            allocated=_triple(rolled[0, q.index]),
            allocated_non_preemptible=_triple(rolled[1, q.index]),
            requested=_triple(rolled[2, q.index]),
            quota=_triple(q.deserved),
            limit=_triple(q.limit),
        )
        for q in snapshot.queues
    }
    jobs = {
        job.key: JobFigures(
            allocated=_triple(job_allocated[job.index]),
            allocated_non_preemptible=_triple(job_allocated_np[job.index]),
            requested=_triple(job_requested[job.index]),
        )
        for job in snapshot.jobs
    }
    return queues, jobs
