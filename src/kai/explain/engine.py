"""The explanation engine: per PodGroup, its phase, reasons, verified suggestions and position.

Pure: `explain` reads a cycle's snapshot, the session its actions left (`run_actions`) and the
adapter's facts, and returns `Explanation`s. The estimated start is the adapter's to add (the
simulator simulates forward; a live cluster has no durations to simulate with).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kai.core.model import Job, Snapshot
from kai.core.session import SchedulerConfig, Session
from kai.explain import analysis, model, position, suggest

DRY_RUNS_PER_JOB = 6  # suggestion dry cycles per job in `kai explain`
CYCLE_EXPLAINED = 16  # waiting jobs a cycle explains for its conditions
CYCLE_DRY_RUNS_PER_JOB = 3  # dry cycles one of them may spend on its first fix
CYCLE_DRY_RUN_PODS = 2_000  # a cycle's dry runs: about one cycle of this many pods (16 at most)


def context(
    *, snapshot: Snapshot, config: SchedulerConfig, session: Session, facts: model.Facts, thorough: bool = True
) -> analysis.Context:
    """What the engine reads of one cycle; `thorough=False` for a cycle's own conditions (see `Context`)."""
    return analysis.Context(snapshot=snapshot, config=config, session=session, facts=facts, thorough=thorough)


def explain_job(
    ctx: analysis.Context,
    job: Job,
    *,
    budget: int,
    first_only: bool = False,
    with_position: bool = True,
    shared: suggest.DryRuns | None = None,
) -> model.Explanation:
    """One PodGroup: why it waits (nothing if it runs), what would make it run, where it stands.

    `budget` caps the dry cycles spent verifying suggestions (and `shared`, a budget several jobs draw
    on); `first_only` stops at the first verified one (what a condition shows); `with_position` also
    works out its place in its queue.
    """
    session = ctx.session
    state = analysis.phase(session, job)
    waits = session.has_pending(job) or state == model.PIPELINED
    reasons = analysis.job_reasons(ctx, job) if waits else []
    found: tuple[model.Suggestion, ...] = ()
    if reasons and state == model.PENDING and budget > 0 and (shared is None or shared.left > 0):
        found = suggest.suggestions(ctx, job, reasons, budget=budget, first_only=first_only, shared=shared)
    return model.Explanation(
        namespace=job.namespace,
        name=job.name,
        workload=job.workload,
        queue=job.queue_name,
        phase=state,
        reasons=tuple(reasons),
        suggestions=found,
        position=position.position(session, job) if with_position else None,
    )


def explain(
    ctx: analysis.Context,
    jobs: Iterable[Job] | None = None,
    *,
    budget: int = DRY_RUNS_PER_JOB,
    first_only: bool = False,
) -> dict[str, model.Explanation]:
    """Explanations by PodGroup namespace/name, for the given jobs (default: every job)."""
    chosen = ctx.snapshot.jobs if jobs is None else jobs
    return {job.key: explain_job(ctx, job, budget=budget, first_only=first_only) for job in chosen}


def waiting_jobs(session: Session) -> list[Job]:
    """The jobs that wait after a cycle (pods pending or pipelined), in the session's job order."""
    waiting = [
        job
        for job in session.snapshot.jobs
        if session.has_pending(job) or analysis.phase(session, job) == model.PIPELINED
    ]
    waiting.sort(key=session.job_key)
    return waiting


def cycle_jobs(waiting: Sequence[Job]) -> list[Job]:
    """Of the waiting jobs (`waiting_jobs`), those a cycle explains: the ones it would try first."""
    return list(waiting[:CYCLE_EXPLAINED])


def cycle_dry_runs(snapshot: Snapshot) -> int:
    """How many dry cycles a cycle may spend on fixes: fewer as the cluster (and so a cycle) grows."""
    return min(CYCLE_EXPLAINED, CYCLE_DRY_RUN_PODS // max(1, len(snapshot.tasks)))


def explain_cycle(
    ctx: analysis.Context, jobs: Iterable[Job], *, dry_runs: int | None = None
) -> dict[str, model.Explanation]:
    """What a cycle's conditions say of its waiting jobs: reasons, and a first fix while dry runs last
    (`cycle_dry_runs` of them unless `dry_runs` says how many)."""
    shared = suggest.DryRuns(cycle_dry_runs(ctx.snapshot) if dry_runs is None else dry_runs)
    out = {}
    for job in jobs:
        explanation = explain_job(
            ctx, job, budget=CYCLE_DRY_RUNS_PER_JOB, first_only=True, with_position=False, shared=shared
        )
        if explanation.reasons and explanation.phase in (model.PENDING, model.PIPELINED):
            out[job.key] = explanation
    return out
