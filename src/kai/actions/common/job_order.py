"""Pops jobs in KAI's hierarchical order: best queue at each level of the tree, then best job.

At each level, sibling queues are compared (by the session's queue order, which uses each
queue's best pending job) and the winner's subtree is entered, down to a leaf queue, whose best
job (by the session's job key) is popped. A job pushed back (elastic growth) re-enters its
leaf's heap with a fresh key.

Only the queues whose subtree still holds a job are compared: each level keeps its holding children
in the tree's order as jobs come and go, so a pop looks at those alone (a simulation of the victim
search orders a preemptor and a few victim jobs among many queues, and builds one of these each time).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable

from kai.core.model import Job
from kai.core.session import Session

ROOTS = -1  # the parent of the top-level queues


class JobsByQueue:
    def __init__(self, session: Session, jobs: Iterable[Job]) -> None:
        self.session = session
        self.heaps: dict[int, list[tuple[tuple[object, ...], int]]] = {}
        self._best: dict[int, int | None] = {}  # best child per queue, within one pop
        self.held: dict[int, int] = {}  # jobs in each queue's subtree
        # per queue (ROOTS for the top level), its children holding a job, in the tree's order
        self.holding: dict[int, list[int]] = {}
        for job in jobs:
            self.push(job)

    def push(self, job: Job) -> None:
        session = self.session
        heapq.heappush(self.heaps.setdefault(job.queue, []), (session.job_key(job), job.index))
        held = self.held
        for q in session.ancestors(job.queue):
            count = held.get(q, 0)
            held[q] = count + 1
            if not count:
                parent = session.snapshot.queues[q].parent
                bisect.insort(self.holding.setdefault(parent, []), q, key=session.sibling_rank.__getitem__)

    def _best_job(self, queue: int) -> Job:
        """The job this queue's subtree would yield next (the subtree holds one)."""
        queues = self.session.snapshot.queues
        if queues[queue].is_leaf:
            return self.session.snapshot.jobs[self.heaps[queue][0][1]]
        child = self._best_child(queue)
        assert child is not None, "a queue holding a job has a child holding one"
        return self._best_job(child)

    def _pick(self, parent: int) -> int | None:
        """The first of the parent's children holding a job in the session's queue order, each judged with
        its best job."""
        holding = self.holding.get(parent)
        if not holding:
            return None
        if len(holding) == 1:
            return holding[0]  # the only one: no key to compare
        session = self.session
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
            self._best[queue] = self._pick(queue)
        return self._best[queue]

    def pop(self) -> Job | None:
        self._best.clear()  # nothing changes during a pop; everything may change between pops
        current = self._pick(ROOTS)
        if current is None:
            return None
        queues = self.session.snapshot.queues
        while not queues[current].is_leaf:
            child = self._best_child(current)
            assert child is not None, "a queue with a pending job has a child with one"
            current = child
        _, job_index = heapq.heappop(self.heaps[current])
        held = self.held
        for q in self.session.ancestors(current):
            held[q] -= 1
            if not held[q]:
                self.holding[queues[q].parent].remove(q)
        return self.session.snapshot.jobs[job_index]
