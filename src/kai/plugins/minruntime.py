"""Minimum runtime: a job that started recently is not preempted or reclaimed yet.

A queue's `preemptMinRuntime` and `reclaimMinRuntime` (inherited down the queue tree when unset)
protect a job until `now - lastStartTimestamp >= minRuntime`. A protected elastic job may still
lose the pods above its gang minimum. For reclaim, the runtime comes from the victim's side of
the queue tree: with `reclaimResolveMethod: lca` (the default) from the victim-side queue just
below the lowest common ancestor of the two queues, with `queue` from the victim's own queue.
"""

from __future__ import annotations

from kai.core.model import Job
from kai.core.session import Session

PREEMPT = "preempt"
RECLAIM = "reclaim"


def protected(*, now: float, last_start: float | None, min_runtime: float) -> bool:
    """Whether a job that started at `last_start` is still inside its minimum runtime."""
    if min_runtime <= 0 or last_start is None:
        return False
    return now - last_start < min_runtime


def protection_end(last_start: float | None, min_runtime: float) -> float | None:
    """When `protected` turns false for a job that started at `last_start` (None: it never protects)."""
    if min_runtime <= 0 or last_start is None:
        return None
    return last_start + min_runtime


def reclaim_runtime_queue(session: Session, *, reclaimer_queue: int, victim_queue: int, method: str) -> int:
    """The queue whose reclaimMinRuntime applies to a victim in `victim_queue`."""
    if method == "queue" or reclaimer_queue < 0:
        return victim_queue
    mine = set(session.ancestors(reclaimer_queue))
    below = victim_queue
    for q in session.ancestors(victim_queue):
        if q in mine:
            return below
        below = q
    return below


class MinRuntimePlugin:
    name = "minruntime"

    def on_session_open(self, session: Session) -> None:
        args = session.config.plugins.get(self.name, {})
        method = str(args.get("reclaimResolveMethod", "lca"))
        queues = session.snapshot.queues
        if not any(q.preempt_min_runtime > 0 or q.reclaim_min_runtime > 0 for q in queues):
            return

        def guard(s: Session, action: str, preemptor: Job, victim: Job) -> bool:
            if victim.queue < 0:
                return False
            if action == PREEMPT:
                runtime = queues[victim.queue].preempt_min_runtime
            elif action == RECLAIM:
                q = reclaim_runtime_queue(s, reclaimer_queue=preemptor.queue, victim_queue=victim.queue, method=method)
                runtime = queues[q].reclaim_min_runtime
            else:
                return False
            return protected(now=s.now, last_start=victim.last_start, min_runtime=runtime)

        session.victim_guards.append(guard)
