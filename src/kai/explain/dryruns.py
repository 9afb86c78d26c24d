"""The dry cycles one cycle's explaining runs, shared by every job they answer for.

A dry cycle applies a candidate change to a copy of the snapshot and runs the cycle's actions again;
what it answers is which jobs then run. So two jobs that try the very same change (a queue's raised
limit, another job ended) read one dry cycle.

And on a cycle at rest, where the actions decided nothing (every attempt failed, and a failed
attempt leaves nothing behind), two waiting jobs alike in everything the actions read of them
(`twin_key`: queue, priority, gang, their pods' shapes and states) are interchangeable: a change to
one of them alone (its gang, its pods, its priority class, its queue, its selectors) meets the same
cluster as the same change to the other. Every job tried before the changed one fails as it did,
whatever the order (the cluster it is tried on is the one at rest, the fair shares are changed alike
by the same change in the same queue), and nothing tried after it can take back what it was given
(only running pods are victims). So the outcome of one twin's candidate stands for the same candidate
of the others. The actions' per-cycle caps (a queue depth per action, scenario budgets) count the
jobs tried before, and a plugin predicate or a shared GPU reads the pod itself: with them nothing is
shared between twins.

The same reasoning lets a cycle at rest try a change to one job with every other waiting job left out
of the actions' attempts (`alone`): about a session's opening instead of a whole cycle.
"""

from __future__ import annotations

import msgspec
import numpy as np

from kai.core.model import Job, JobProblem, Snapshot
from kai.core.session import Session
from kai.explain import analysis, changes

Candidate = tuple[changes.Change, ...]
# what a dry cycle that asks of one job only gives every other waiting job: the actions do not try it
# (allocate and the victim searches leave out a job with a problem), while its pods still count in
# its queue's request, so the fair shares are divided as before
LEFT_OUT = JobProblem(reason="LeftOut", message="not tried in a dry cycle that asks of another job")
# the changes that touch nothing but the job they are made for
LOCAL = (
    changes.SetQueue,
    changes.SetPriorityClass,
    changes.SetPreemptible,
    changes.DropNodeSelector,
    changes.SetMinMember,
    changes.SetPodRequest,
)


class Book(msgspec.Struct):
    """What the context's dry cycles found: per candidate, the jobs as it leaves them and the indices of
    those that then run; per twin class and change (`twin_change`), whether the job then runs."""

    outcomes: dict[Candidate, tuple[tuple[Job, ...], frozenset[int]]] = msgspec.field(default_factory=dict)
    twins: dict[tuple[object, ...], bool] = msgspec.field(default_factory=dict)
    classes: set[tuple[object, ...]] = msgspec.field(default_factory=set)  # the twin classes with an outcome

    def has_twin(self, ctx: analysis.Context, job: Job) -> bool:
        """Whether a twin of the job had a dry cycle: its search may go on without one."""
        key = twin_key(ctx, job)
        return key is not None and key in self.classes


def book(ctx: analysis.Context) -> Book:
    return ctx.remembered("dry runs", Book)


def at_rest(session: Session) -> bool:
    """Whether the cycle's actions decided nothing, and no per-cycle cap counts the jobs they tried."""
    config = session.config
    return (
        not session.placements
        and not session.evictions
        and not config.queue_depth_per_action
        and not config.max_action_scenarios
        and not session.predicates
    )


def twin_key(ctx: analysis.Context, job: Job) -> tuple[object, ...] | None:
    """Everything the actions and the candidates read of a waiting job but its name and its pods'
    names; None where twins share nothing (a cycle not at rest, a pod on a shared GPU)."""
    if not ctx.remembered("at rest", lambda: at_rest(ctx.session)):
        return None
    tasks = [ctx.snapshot.tasks[t] for t in job.tasks]
    if any(t.is_shared_gpu for t in tasks):
        return None
    facts = ctx.facts.workloads.get(job.key)
    pods = sorted(
        (
            t.request.tobytes(),
            t.podset,
            int(t.status),
            t.node,
            t.nominated_node,
            t.gpu_groups,
            t.task_priority,
            t.constraint,
            t.grace_seconds,
            t.start_time,
        )
        for t in tasks
    )
    return (
        job.queue,
        job.queue_name,
        job.priority,
        job.priority_class_name,
        job.preemptible,
        job.can_preempt,
        job.min_member,
        tuple((p.name, p.min_available) for p in job.podsets),
        job.subgroup_sets,
        job.problem,
        job.preemption_delay,
        job.last_eviction,
        job.last_start,
        job.stale_since,
        job.staleness_grace_period,
        job.safe_to_consolidate,
        None if facts is None else (facts.podgroup_is_input, facts.queue_label_missing, facts.preemptibility_set),
        tuple(pods),
    )


def alone(ctx: analysis.Context, job: Job, candidate: Candidate, changed: Snapshot) -> Snapshot | None:
    """The changed snapshot with every other waiting job left out of the actions' attempts (`LEFT_OUT`),
    for a dry cycle that asks only whether the job runs; None where that could answer otherwise than
    the full dry cycle: a cycle not at rest, or a change that touches more than the job.

    On a cycle at rest every other job's attempt fails and leaves nothing behind, on the cluster as it
    is, whatever the order; the job's own attempts meet that same cluster; and nothing tried after it
    can take back what it was given (only running pods are victims). So leaving the others out changes
    nothing for it, as long as the fair shares the actions read are the same as the cycle's, which
    the caller checks once the session is open (`same_shares`)."""
    if not ctx.remembered("at rest", lambda: at_rest(ctx.session)) or not _local(job, candidate):
        return None
    jobs = list(ctx.remembered("others left out", lambda: _left_out(ctx)))
    jobs[job.index] = changed.jobs[job.index]
    return msgspec.structs.replace(changed, jobs=tuple(jobs))


def same_shares(ctx: analysis.Context, session: Session) -> bool:
    """Whether a dry cycle's session divides the queues' fair shares as the cycle's did."""
    return bool(np.array_equal(session.fair_share, ctx.session.fair_share))


def _left_out(ctx: analysis.Context) -> tuple[Job, ...]:
    session = ctx.session
    return tuple(
        msgspec.structs.replace(j, problem=LEFT_OUT) if j.problem is None and session.has_pending(j) else j
        for j in ctx.snapshot.jobs
    )


def _local(job: Job, candidate: Candidate) -> bool:
    return all(isinstance(change, LOCAL) and change.job == job.index for change in candidate)


def twin_change(twin: tuple[object, ...] | None, job: Job, candidate: Candidate) -> tuple[object, ...] | None:
    """The key under which a twin's outcome for this candidate is kept: the twin class and the changes
    with the job left out; None for a candidate that touches more than the job."""
    if twin is None:
        return None
    unnamed: list[object] = []
    for change in candidate:
        if not isinstance(change, LOCAL) or change.job != job.index:
            return None
        unnamed.append(msgspec.structs.replace(change, job=-1))
    return (twin, tuple(unnamed))
