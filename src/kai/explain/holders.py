"""Who holds the room a waiting job needs, and who would free it first.

The suggestion "needs 4 GPUs freed in team-a: job x (8 GPUs) is first in line to end" names a
running job that holds enough by itself: the one known to end first (the adapter's `pod_end`: the
simulator knows durations), or the first in KAI's victim order (`VictimPool`, the order reclaim and
preempt take victims in). Every waiting job asks this of the same cycle, so what it rests on is
made once per context (`Context.remembered`) as arrays over the running pods, and each job's
question is a few array operations however many jobs run.
"""

from __future__ import annotations

import msgspec
import numpy as np
import numpy.typing as npt

from kai.actions.common import victims
from kai.core.model import BoolVector, Job, TaskStatus
from kai.explain import analysis, changes

MAX_VICTIM_UNITS = 64  # how far the victim order is read for a job that frees enough by itself
EPS = 1e-9


class Running(msgspec.Struct):
    """The running pods of the jobs that can end cleanly (`changes.ends_cleanly`), as arrays."""

    job: npt.NDArray[np.int64]  # per pod: its job
    node: npt.NDArray[np.int64]  # per pod: its node
    charge: npt.NDArray[np.float64]  # per pod: what it holds in queue space [P, 3]
    keys: list[str]  # per pod: namespace/name
    job_queue: npt.NDArray[np.int64]  # per job: its leaf queue (-1: none)
    job_preemptible: npt.NDArray[np.bool_]  # per job
    _ends: dict[int, float | None] = msgspec.field(default_factory=dict)
    _victim_order: list[int] | None = None


def running(ctx: analysis.Context) -> Running:
    """The running pods of the cycle (in the snapshot and still after its actions), made once."""
    return ctx.remembered("holders.running", lambda: _running(ctx))


def _running(ctx: analysis.Context) -> Running:
    snap, status = ctx.snapshot, ctx.session.status
    pods = [
        t
        for t in snap.tasks
        if t.status == TaskStatus.RUNNING and t.node >= 0 and status[t.index] == TaskStatus.RUNNING
    ]
    clean = {j for j in {t.job for t in pods} if changes.ends_cleanly(snap, snap.jobs[j])}
    pods = [t for t in pods if t.job in clean]
    index = np.array([t.index for t in pods], dtype=np.int64)
    return Running(
        job=np.array([t.job for t in pods], dtype=np.int64),
        node=np.array([t.node for t in pods], dtype=np.int64),
        charge=ctx.session.task_charge[index] if len(index) else np.zeros((0, 3)),
        keys=[t.key for t in pods],
        job_queue=np.array([j.queue for j in snap.jobs], dtype=np.int64),
        job_preemptible=np.array([j.preemptible for j in snap.jobs], dtype=np.bool_),
    )


def holding(
    ctx: analysis.Context,
    waiting: Job,
    resource: int,
    *,
    nodes: BoolVector | None = None,
    queues: set[int] | None = None,
) -> dict[int, float]:
    """What each other job holds of a resource (queue space), by job index: on the given nodes, or in
    the given leaf queues."""
    run = running(ctx)
    keep = run.job != waiting.index
    if nodes is not None:
        keep &= nodes[run.node]
    if queues is not None:
        keep &= np.isin(run.job_queue[run.job], np.array(sorted(queues), dtype=np.int64))
    held = np.bincount(run.job[keep], weights=run.charge[keep, resource], minlength=len(ctx.snapshot.jobs))
    return {int(j): float(held[j]) for j in np.flatnonzero(held > EPS)}


def non_preemptible(ctx: analysis.Context, jobs: dict[int, float]) -> dict[int, float]:
    """Those of the jobs that are not preemptible."""
    run = running(ctx)
    return {j: held for j, held in jobs.items() if not run.job_preemptible[j]}


def end_of(ctx: analysis.Context, job: int) -> float | None:
    """When every running pod of the job has ended by itself, if the adapter knows (else None)."""
    run = running(ctx)
    if job not in run._ends:
        times = [ctx.facts.pod_end(run.keys[i]) for i in np.flatnonzero(run.job == job).tolist()]
        run._ends[job] = max(t for t in times if t is not None) if times and None not in times else None
    return run._ends[job]


def first_to_end(ctx: analysis.Context, jobs: dict[int, float]) -> int | None:
    """Of these jobs, the one known to end first (then the one holding least, then by name)."""
    snap = ctx.snapshot
    ending = []
    for j, held in jobs.items():
        end = end_of(ctx, j)
        if end is not None:
            ending.append((end, held, snap.jobs[j].key, j))
    return min(ending)[3] if ending else None


def first_victim(ctx: analysis.Context, jobs: dict[int, float], *, but: int | None) -> int | None:
    """Of these jobs, the first in KAI's victim order (read `MAX_VICTIM_UNITS` units far), but `but`."""
    run = running(ctx)
    if run._victim_order is None:
        run._victim_order = _victim_order(ctx)
    return next((j for j in run._victim_order if j in jobs and j != but), None)


def _victim_order(ctx: analysis.Context) -> list[int]:
    pool = victims.VictimPool(ctx.session)
    order: list[int] = []
    for n, unit in enumerate(pool.units(pool.queues)):
        if n >= MAX_VICTIM_UNITS:
            break
        if unit.job not in order:
            order.append(unit.job)
    return order
