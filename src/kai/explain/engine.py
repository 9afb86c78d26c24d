"""The explanation engine: per PodGroup, its phase, reasons, verified suggestions and position.

Pure: `explain` reads a cycle's snapshot, the session its actions left (`run_actions`) and the
adapter's facts, and returns `Explanation`s; `explain_cycle` is what a cycle's conditions say of
every waiting job, with fixes from a bounded budget of dry cycles and from what the adapter
remembers. The estimated start is the adapter's to add (the
simulator simulates forward; a live cluster has no durations to simulate with).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence

import msgspec

from kai.core.model import Job, Snapshot
from kai.core.session import SchedulerConfig, Session
from kai.explain import analysis, dryruns, model, position, suggest

DRY_RUNS_PER_JOB = 6  # suggestion dry cycles per job in `kai explain`
CYCLE_DRY_RUNS_PER_JOB = 3  # dry cycles a waiting job may spend on its first fix in a cycle
CYCLE_DRY_RUN_PODS = 2_000  # a cycle's dry runs: about one cycle of this many pods
REST_DRY_RUN_PODS = 100_000  # a cycle at rest's dry runs where nothing remembers fixes (`rest_dry_runs`)
VIEW_DRY_RUN_PODS = 20_000  # a view's dry runs (`view_dry_runs`): about one cycle of this many pods


class CycleExplanations(msgspec.Struct, frozen=True):
    """What a cycle says of its waiting jobs (`explain_cycle`).

    `explanations`: every waiting job with a reason, by PodGroup namespace/name; `searches`: how far
    this cycle took the search for each job's first fix, for the adapter to remember while the
    cluster stays as it is; `unsought`: the jobs whose search is not done, in line.
    """

    explanations: dict[str, model.Explanation]
    searches: dict[str, suggest.Search]
    unsought: tuple[str, ...]


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
    with_position: bool = True,
    shared: suggest.DryRuns | None = None,
) -> model.Explanation:
    """One PodGroup: why it waits (nothing if it runs), what would make it run, where it stands.

    `budget` caps the dry cycles spent verifying suggestions (0: reasons only), each also taken from
    `shared` if given; `with_position` also works out its place in its queue.
    """
    session = ctx.session
    state = analysis.phase(session, job)
    waits = session.has_pending(job) or state == model.PIPELINED
    reasons = analysis.job_reasons(ctx, job, state) if waits else []
    found: tuple[model.Suggestion, ...] = ()
    if reasons and state == model.PENDING and budget > 0:
        found = suggest.suggestions(ctx, job, reasons, budget=budget, shared=shared)
    return model.Explanation(
        namespace=job.namespace,
        name=job.name,
        workload=job.workload,
        queue=job.queue_name,
        phase=state,
        reasons=tuple(reasons),
        suggestions=found,
        position=_position(session, job, found) if with_position else None,
    )


def _position(session: Session, job: Job, found: tuple[model.Suggestion, ...]) -> model.Position | None:
    """Its place in its queue; for a job that waits in none (its queue or priority class is unusable),
    the place it would take once its first fix is made."""
    here = position.position(session, job)
    if here is not None or not found:
        return here
    return position.position_after(session, job, found[0])


def explain(
    ctx: analysis.Context, jobs: Iterable[Job] | None = None, *, budget: int = DRY_RUNS_PER_JOB
) -> dict[str, model.Explanation]:
    """Explanations by PodGroup namespace/name, for the given jobs (default: every job)."""
    chosen = ctx.snapshot.jobs if jobs is None else jobs
    return {job.key: explain_job(ctx, job, budget=budget) for job in chosen}


def view_dry_runs(snapshot: Snapshot) -> int:
    """How many dry cycles a view of many jobs (`kai explain queue`) may spend on their suggestions:
    about `VIEW_DRY_RUN_PODS` pods' worth of cycles (every job its `DRY_RUNS_PER_JOB` on a small
    cluster; one on a cluster of that many pods, none above)."""
    return VIEW_DRY_RUN_PODS // max(1, len(snapshot.tasks))


def explain_listed(
    ctx: analysis.Context,
    jobs: Sequence[Job],
    *,
    dry_runs: int,
    known: Mapping[str, model.Explanation] | None = None,
) -> dict[str, model.Explanation]:
    """What a view says of the waiting jobs it lists, in line (`kai explain queue`): every one's reasons
    and its place in its queue (each queue ordered once); its verified suggestions while the view's
    `dry_runs` last, `DRY_RUNS_PER_JOB` at most each; past them, the fix a cycle found for it
    (`known`: the cycle's explanations) if its reasons are still the same."""
    pool = suggest.DryRuns(dry_runs)
    places = position.positions(ctx.session, jobs)
    earlier = known or {}
    out: dict[str, model.Explanation] = {}
    for job in jobs:
        explanation = explain_job(
            ctx, job, budget=min(DRY_RUNS_PER_JOB, math.ceil(pool.left)), with_position=False, shared=pool
        )
        before = earlier.get(job.key)
        if (
            not explanation.suggestions
            and before is not None
            and suggest.signature(before.reasons) == suggest.signature(explanation.reasons)
        ):
            explanation = msgspec.structs.replace(explanation, suggestions=before.suggestions)
        place = places.get(job.key)
        if place is None:
            place = _position(ctx.session, job, explanation.suggestions)
        out[job.key] = msgspec.structs.replace(explanation, position=place)
    return out


def waiting_jobs(session: Session) -> list[Job]:
    """The jobs that wait after a cycle (pods pending or pipelined), in the session's job order."""
    waiting = [
        job
        for job in session.snapshot.jobs
        if session.has_pending(job) or analysis.phase(session, job) == model.PIPELINED
    ]
    waiting.sort(key=session.job_key)
    return waiting


def cycle_dry_runs(snapshot: Snapshot) -> int:
    """How many dry cycles a cycle may spend on fixes: fewer as the cluster (and so a cycle) grows, so
    that they cost about one cycle of `CYCLE_DRY_RUN_PODS` pods; none above that many pods (where
    an adapter that remembers fixes hands in its own budget)."""
    return CYCLE_DRY_RUN_PODS // max(1, len(snapshot.tasks))


def rest_dry_runs(snapshot: Snapshot) -> int:
    """How many dry cycles a cycle at rest (its actions decided nothing, `dryruns.at_rest`) may spend on
    fixes where nothing remembers them (kai sim): about `REST_DRY_RUN_PODS` pods' worth of cycles, one
    at least. At rest twins share their dry cycles (`kai.explain.dryruns`), so they cover the waiting
    groups of a few hundred kinds on a cluster of a few thousand pods."""
    return max(1, cycle_dry_runs(snapshot), REST_DRY_RUN_PODS // max(1, len(snapshot.tasks)))


def explain_cycle(
    ctx: analysis.Context,
    jobs: Iterable[Job],
    *,
    dry_runs: int | None = None,
    known: Mapping[str, suggest.Search] | None = None,
) -> CycleExplanations:
    """What a cycle's conditions say of its waiting jobs (`waiting_jobs`, in line): every one gets its
    reasons; its first verified fix comes from `known` (what the adapter remembers of the searches of
    earlier cycles, each standing while the job's reasons are the same), else from dry cycles while
    the cycle's budget lasts (`dry_runs`, by default `cycle_dry_runs`), spent on the jobs in line
    whose search is not done, `CYCLE_DRY_RUNS_PER_JOB` candidates each at most in all; a search the
    budget cuts short goes on in a later cycle."""
    shared = suggest.DryRuns(cycle_dry_runs(ctx.snapshot) if dry_runs is None else dry_runs)
    remembered = known or {}
    book = dryruns.book(ctx)
    out: dict[str, model.Explanation] = {}
    searches: dict[str, suggest.Search] = {}
    unsought: list[str] = []
    for job in jobs:
        explanation = explain_job(ctx, job, budget=0, with_position=False)
        if not explanation.reasons or explanation.phase not in (model.PENDING, model.PIPELINED):
            continue
        if explanation.phase == model.PENDING:
            search = remembered.get(job.key)
            if search is not None and (not search.stands_for(explanation.reasons) or search.basis != basis(ctx)):
                search = None  # its reasons or the settings it ran on changed: what it found does not count
            if (search is None or not search.done) and (shared.left > 0 or book.has_twin(ctx, job)):
                search = suggest.first_fix(
                    ctx,
                    job,
                    list(explanation.reasons),
                    cap=CYCLE_DRY_RUNS_PER_JOB,
                    shared=shared,
                    tried=search.tried if search is not None else 0,
                    basis=basis(ctx),
                )
                searches[job.key] = search
            if search is None or not search.done:
                unsought.append(job.key)
            elif search.found is not None:
                explanation = msgspec.structs.replace(explanation, suggestions=(search.found,))
        out[job.key] = explanation
    return CycleExplanations(explanations=out, searches=searches, unsought=tuple(unsought))


def basis(ctx: analysis.Context) -> str:
    """What a remembered fix's dry cycles rested on beyond the job's own reasons, whose words carry the
    numbers of what is free and held: the nodes (names, sizes, whether schedulable, labels, taints),
    the queues' settings and the priority classes, as a digest. A fix found on other settings no
    longer counts and is searched again (a node added, another queue's limit raised); work coming and
    going is not in it, so a busy cluster does not take every fix off only to put it back a dry run
    at a time."""
    return ctx.remembered("basis", lambda: _digest(ctx.snapshot, ctx.facts))


def _digest(snapshot: Snapshot, facts: model.Facts) -> str:
    nodes = snapshot.nodes
    digest = hashlib.blake2b(digest_size=16)
    digest.update(repr((nodes.names, nodes.labels, nodes.taints)).encode())
    digest.update(nodes.allocatable.tobytes())
    digest.update(nodes.schedulable.tobytes())
    queues = [
        (q.name, q.parent, q.priority, q.deserved.tolist(), q.limit.tolist(), q.weight.tolist())
        for q in snapshot.queues
    ]
    classes = sorted((pc.name, pc.value, pc.preempts) for pc in facts.priority_classes.values())
    digest.update(repr((queues, classes)).encode())
    return digest.hexdigest()
