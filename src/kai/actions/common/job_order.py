"""Pops jobs in KAI's hierarchical order: best queue at each level of the tree, then best job.

At each level, sibling queues are compared (by the session's queue order, which uses each
queue's best pending job) and the winner's subtree is entered, down to a leaf queue, whose best
job (by the session's job key) is popped. A job pushed back (elastic growth) re-enters its
leaf's heap with a fresh key.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from kai.core.model import Job
from kai.core.session import Session


class JobsByQueue:
    def __init__(self, session: Session, jobs: Iterable[Job]) -> None:
        self.session = session
        self.heaps: dict[int, list[tuple[tuple[object, ...], int]]] = {}
        self.roots = [q.index for q in session.snapshot.queues if q.parent < 0]
        self._best: dict[int, int | None] = {}  # best child per queue, within one pop
        self.held: dict[int, int] = {}  # jobs in each queue's subtree: queues holding none are skipped
        for job in jobs:
            self.push(job)

    def push(self, job: Job) -> None:
        heapq.heappush(self.heaps.setdefault(job.queue, []), (self.session.job_key(job), job.index))
        for q in self.session.ancestors(job.queue):
            self.held[q] = self.held.get(q, 0) + 1

    def _best_job(self, queue: int) -> Job:
        """The job this queue's subtree would yield next (the subtree holds one)."""
        queues = self.session.snapshot.queues
        if queues[queue].is_leaf:
            return self.session.snapshot.jobs[self.heaps[queue][0][1]]
        child = self._best_child(queue)
        assert child is not None, "a queue holding a job has a child holding one"
        return self._best_job(child)

    def _pick(self, candidates: list[int]) -> int | None:
        """The first of the candidates holding a job in the session's queue order, each judged with its best job."""
        session = self.session
        held = self.held
        holding = [q for q in candidates if held.get(q)]
        if len(holding) < 2:
            return holding[0] if holding else None  # the only one: no key to compare
        best: int | None = None
        best_key: tuple[object, ...] = ()
        for q in holding:
            job = self._best_job(q)
            key = session.allocation_key(q, job)
            if best is None or key < best_key or (key == best_key and session.queue_order.tie(session, q, best) < 0):
                best, best_key = q, key
        return best

    def _best_child(self, queue: int) -> int | None:
        if queue not in self._best:
            self._best[queue] = self._pick(list(self.session.snapshot.queues[queue].children))
        return self._best[queue]

    def pop(self) -> Job | None:
        self._best.clear()  # nothing changes during a pop; everything may change between pops
        current = self._pick(self.roots)
        if current is None:
            return None
        while not self.session.snapshot.queues[current].is_leaf:
            child = self._best_child(current)
            assert child is not None, "a queue with a pending job has a child with one"
            current = child
        _, job_index = heapq.heappop(self.heaps[current])
        for q in self.session.ancestors(current):
            self.held[q] -= 1
        return self.session.snapshot.jobs[job_index]
