"""Which running pods may be evicted, in which order, and in which groups (gang rules).

Victims are preemptible jobs whose active pods are all running. A job at or below its gang
minimum loses all its pods at once; the pods of an elastic job above its minimum go one at a
time, the last in task order first. A protected job (minimum runtime) may only lose those
surplus pods. Jobs come in victim order: queue by queue in the caller's order (worst queue first), then lowest
priority, then elastic jobs above their minimum, then the newest job; after losing a surplus pod
a job is re-ranked, as KAI re-queues it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
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


class VictimPool:
    """The candidate victims of one action, per queue, sorted once in victim order.

    Keys are taken when the pool is built (queue state changes only through this action's own
    evictions, which `is_candidate` catches when a job's turn comes); a job that loses a surplus
    pod is re-ranked with its new count, as KAI re-queues it.
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        self.by_queue: dict[int, list[tuple[tuple[int, int, float, int], Job]]] = {}
        for job in session.snapshot.jobs:
            if is_candidate(session, job):
                key = (job.priority, _bucket(job, session.alive_count(job)), -job.creation, -job.index)
                self.by_queue.setdefault(job.queue, []).append((key, job))
        for entries in self.by_queue.values():
            entries.sort(key=lambda e: e[0])

    @property
    def queues(self) -> list[int]:
        return sorted(self.by_queue)

    def units(
        self,
        queues: Sequence[int],
        *,
        below_priority: int | None = None,
        exclude: int = -1,
        is_protected: Callable[[Job], bool] = lambda job: False,
    ) -> Iterator[VictimUnit]:
        """Victim units, queue by queue in the given order (lazily; see the module docstring).

        `below_priority` keeps only jobs of strictly lower priority; `exclude` is a job index to skip.
        """
        session = self.session
        for queue in queues:
            entries = self.by_queue.get(queue, [])
            requeued: list[tuple[tuple[int, int, float, int], int]] = []
            state: dict[int, tuple[list[int], npt.NDArray[np.int64]]] = {}
            jobs = session.snapshot.jobs
            i = 0
            while i < len(entries) or requeued:
                if requeued and (i >= len(entries) or requeued[0][0] < entries[i][0]):
                    job = jobs[heapq.heappop(requeued)[1]]
                else:
                    job = entries[i][1]
                    i += 1
                    if below_priority is not None and job.priority >= below_priority:
                        i = len(entries)
                        continue
                    if job.index == exclude or not is_candidate(session, job):
                        continue
                    state[job.index] = (running_tasks(session, job), session.podset_alive[job.index].copy())
                running, alive = state[job.index]
                surplus = _surplus_task(session, job, running, alive)
                if surplus is not None:
                    running.remove(surplus)
                    alive[session.snapshot.tasks[surplus].podset] -= 1
                    yield VictimUnit(job=job.index, tasks=(surplus,), whole=False)
                    if running:
                        key = (job.priority, _bucket(job, int(alive.sum())), -job.creation, -job.index)
                        heapq.heappush(requeued, (key, job.index))
                    continue
                if not running or is_protected(job):
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
