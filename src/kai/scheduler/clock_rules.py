"""When the clock could next change a cycle's decisions on an unchanged cluster.

Three rules read the clock: a job's minimum runtime protects it as a victim until `lastStart +
minRuntime` (`kai.plugins.minruntime`), a pending job may not trigger evictions before the end of its
preemption delay (`kai.actions.common.preemptors`), and a stale gang is evicted once its grace
period has passed (`kai.actions.stalegangeviction`). Until the first of those moments, a cycle on the
same cluster decides what the last one did, so the searches that failed then would fail again
(`kai.core.decisions.HopelessSearches`).
"""

from __future__ import annotations

import math

from kai.actions.stalegangeviction import grace_period
from kai.core.session import Session
from kai.plugins.minruntime import protection_end

# a rule compares `now - start` with a duration; the moment it flips is taken this much earlier,
# so that float rounding can never put it after the true one
MARGIN = 1e-3


def next_clock_event(session: Session) -> float:
    """The first moment after the session's clock at which a clock rule could change an outcome (a
    lower bound: every queue's minimum runtimes are taken for every job); inf when there is none."""
    snapshot = session.snapshot
    now = session.now
    runtimes = sorted({r for q in snapshot.queues for r in (q.preempt_min_runtime, q.reclaim_min_runtime) if r > 0})
    first = math.inf
    for job in snapshot.jobs:
        moments: list[float] = []
        if job.last_start is not None:
            moments += [end for r in runtimes if (end := protection_end(job.last_start, r)) is not None]
        delay_end = job.preemption_delay_end
        if delay_end is not None:
            moments.append(delay_end)
        grace = grace_period(session, job)
        if job.stale_since is not None and grace >= 0:
            moments.append(job.stale_since + grace)
        for moment in moments:
            if moment - MARGIN > now:
                first = min(first, moment - MARGIN)
            elif moment > now:
                return now  # too close to tell: nothing may be remembered
    return first
