"""Which running pods may be evicted, in which order, and in which groups (gang rules).

Victims are preemptible jobs whose active pods are all running. A job at or below its gang
minimum loses all its pods at once; the pods of an elastic job above its minimum go one at a
time, the last in task order first. A protected job (minimum runtime) may only lose those
surplus pods. Jobs come in victim order: the caller's queue rank (worst queue first), then lowest
priority, then elastic jobs above their minimum, then the newest job; after losing a surplus pod
a job is re-ranked, as KAI re-queues it.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kai.core.model import Job, Task, TaskStatus
from kai.core.resources import QUEUE_RESOURCE_NAMES
from kai.core.session import Session


@dataclass(frozen=True, kw_only=True, slots=True)
class VictimUnit:
    """Pods evicted together: one surplus pod, or everything the job still runs."""

    job: int
    tasks: tuple[int, ...]
    whole: bool


def running_tasks(session: Session, job: Job) -> list[int]:
    """The job's running pods in task order (higher task priority, then older, first)."""
    order = session.job_order_tasks[job.index]
    return [int(t) for t in order[session.status[order] == TaskStatus.RUNNING]]


def is_candidate(session: Session, job: Job) -> bool:
    """A possible victim: preemptible, in a queue, with running pods and no pod placed this cycle."""
    if not job.preemptible or job.queue < 0:
        return False
    running = len(running_tasks(session, job))
    return running > 0 and running == session.alive_count(job)


def protected_by_guards(session: Session, action: str, preemptor: Job, victim: Job) -> bool:
    return any(guard(session, action, preemptor, victim) for guard in session.victim_guards)


def _surplus_task(
    session: Session, job: Job, running: list[int], alive: npt.NDArray[np.int64]
) -> int | None:
    """The last running pod (in task order) whose eviction keeps every podset and the job at its minimum."""
    if int(alive.sum()) <= job.min_member:
        return None
    tasks = session.snapshot.tasks
    for t in reversed(running):
        podset = tasks[t].podset
        if int(alive[podset]) > job.podsets[podset].min_available:
            return t
    return None


def _bucket(job: Job, alive_total: int) -> int:
    """Victim order of KAI's elastic buckets: above the minimum first, at it next, below it last."""
    if alive_total > job.min_member:
        return 0
    return 1 if alive_total == job.min_member else 2


def victim_units(
    session: Session,
    jobs: Sequence[Job],
    *,
    queue_rank: Mapping[int, int],
    protected: frozenset[int] = frozenset(),
) -> Iterator[VictimUnit]:
    """Victim units in victim order, lazily (see the module docstring). `protected` holds job indices.

    Jobs are checked with `is_candidate` only when their turn comes, so a search that stops early
    never looks at the rest.
    """
    state: dict[int, tuple[list[int], npt.NDArray[np.int64]]] = {}
    heap: list[tuple[int, int, int, float, int]] = []
    for job in jobs:
        bucket = _bucket(job, session.alive_count(job))
        heapq.heappush(heap, (queue_rank.get(job.queue, 0), job.priority, bucket, -job.creation, -job.index))
    jobs_by_index = {job.index: job for job in jobs}
    while heap:
        job = jobs_by_index[-heapq.heappop(heap)[-1]]
        if job.index not in state:
            if not is_candidate(session, job):
                continue
            state[job.index] = (running_tasks(session, job), session.podset_alive[job.index].copy())
        running, alive = state[job.index]
        surplus = _surplus_task(session, job, running, alive)
        if surplus is not None:
            running.remove(surplus)
            alive[session.snapshot.tasks[surplus].podset] -= 1
            yield VictimUnit(job=job.index, tasks=(surplus,), whole=False)
            if running:
                key = (queue_rank.get(job.queue, 0), job.priority, _bucket(job, int(alive.sum())), -job.creation)
                heapq.heappush(heap, (*key, -job.index))
            continue
        if job.index in protected or not running:
            continue
        tasks = tuple(running)
        running.clear()
        yield VictimUnit(job=job.index, tasks=tasks, whole=True)


def signature(action: str, job: Job, tasks: Sequence[Task]) -> tuple[object, ...]:
    """What decides whether an attempt can succeed: the queue, the priority, and the pods' shapes."""
    shapes: dict[tuple[object, ...], int] = {}
    for t in tasks:
        shape = (t.constraint, tuple(float(x) for x in t.request), t.gpu_portion, t.gpu_memory_mib, t.gpu_devices)
        shapes[shape] = shapes.get(shape, 0) + 1
    return (action, job.queue, job.priority, job.preemptible, tuple(sorted(shapes.items(), key=repr)))


def already_failed(session: Session, sig: tuple[object, ...]) -> bool:
    """Did an attempt with the same signature, or the same single pod shape and no more pods, fail already?"""
    if sig in session.failed_signatures:
        return True
    shapes = sig[-1]
    assert isinstance(shapes, tuple)
    if len(shapes) == 1:
        shape, count = shapes[0]
        return any((*sig[:-1], ((shape, k),)) in session.failed_signatures for k in range(1, count))
    return False


class DepthCap:
    """`queueDepthPerAction`: at most this many jobs tried per queue in one action (0: no cap)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.tried: dict[int, int] = {}

    def allow(self, queue: int) -> bool:
        if self.cap <= 0:
            return True
        count = self.tried.get(queue, 0)
        if count >= self.cap:
            return False
        self.tried[queue] = count + 1
        return True


def amount(resource: int, value: float) -> str:
    """A queue-space amount as a person reads it: `8 GPUs`, `4 CPU`, `16 GB`."""
    if resource == 0:
        return f"{value:g} GPU" + ("" if abs(value - 1) < 1e-9 else "s")
    if resource == 1:
        return f"{value / 1000:g} CPU"
    return f"{value / 1e9:g} GB" if value >= 1e9 else f"{value / 1e6:g} MB"


def main_resource(request: npt.NDArray[np.float64]) -> int:
    """The resource a message talks about: GPUs if the job asks for any, else CPU, else memory."""
    for r in range(len(QUEUE_RESOURCE_NAMES)):
        if request[r] > 0:
            return r
    return 0
