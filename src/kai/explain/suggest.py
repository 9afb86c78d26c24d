"""What would make a waiting job run: candidate changes per reason, each verified by a dry cycle.

Every candidate is applied to a copy of the cycle's snapshot and the cycle's actions run again on
it (`kai.scheduler.cycle.run_actions`); only a change after which the job runs (Running or
Pipelined) is suggested. Candidates are tried smallest first and dry runs are capped per job, so a
job with many candidates costs at most `budget` cycles.

Where a candidate needs a number, the number comes from the rules themselves: a raised limit or
quota from the proportion plugin's `capacity_block` at every level it blocks, a smaller pod from
`place_task` on the room free now, a smaller gang from how many pods fit now, the room to free from
what the gang needs beyond what is free (or what its queue holds beyond its limit or quota). The job
that would free it is the one known to end first (the adapter's `pod_end`), and the first in KAI's
victim order (`VictimPool`), each holding enough of it by itself.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Iterator, Sequence

import msgspec

from kai.api.priority import PREEMPTIBLE_BELOW
from kai.core import fit as fit_lib
from kai.core.model import Job, Snapshot
from kai.core.resources import GPU
from kai.core.session import Session
from kai.explain import analysis, changes, dryruns, holders, model, patches
from kai.plugins.proportion.plugin import NON_PREEMPTIBLE_OVER_QUOTA, OVER_LIMIT, capacity_block
from kai.scheduler.cycle import run_actions

Candidate = tuple[changes.Change, ...]
MAX_QUEUE_CHOICES = 3
MAX_LEVELS = 8
# what a dry cycle that asks of one job only costs against one that runs every job's attempts: about
# a session's opening against a whole cycle (measured 0.11 against 1.0 on 100 nodes with 440 groups
# waiting), rounded up
ALONE_COST = 0.2
EPS = 1e-9


class DryRuns:
    """A number of dry cycles several jobs draw on (a cycle's budget for its conditions' fixes). A dry
    cycle that asks of one job only (`dryruns.alone`) costs `ALONE_COST` of one: what it takes is
    given back once it has run."""

    def __init__(self, limit: int) -> None:
        self.left: float = limit

    def take(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        return True

    def give_back(self, amount: float) -> None:
        self.left += amount


class Search(msgspec.Struct, frozen=True, kw_only=True):
    """How far the search for a job's first fix has gone: the candidates whose dry cycle did not make
    it run, and the fix found. `done` once a fix is found or every candidate within the cap failed;
    a search the cycle's dry runs cut short goes on from `tried`. `reasons` are the job's reasons
    (tokens and words, with the numbers they rest on) it was made for: it stands for the job while
    they do (`stands_for`)."""

    reasons: tuple[tuple[str, str], ...]
    tried: int
    found: model.Suggestion | None
    done: bool
    basis: str = ""  # the cluster's settings its dry cycles ran on (`kai.explain.engine.basis`)

    def stands_for(self, reasons: Sequence[model.Reason]) -> bool:
        return self.reasons == signature(reasons)


def signature(reasons: Sequence[model.Reason]) -> tuple[tuple[str, str], ...]:
    """What a search rests on: the reasons' tokens and words (the words carry their numbers)."""
    return tuple((r.token, r.message) for r in reasons)


def suggestions(
    ctx: analysis.Context, job: Job, reasons: list[model.Reason], *, budget: int, shared: DryRuns | None = None
) -> tuple[model.Suggestion, ...]:
    """Verified suggestions for the job, smallest first, one per kind of change (at most `budget` dry
    cycles, each also taken from `shared` if given)."""
    out: list[model.Suggestion] = []
    families: set[str] = set()
    for size, text, candidate, found in _ranked(ctx, job, reasons):
        if budget <= 0:
            break
        if candidate[0].family in families:
            continue  # a smaller change of the same kind already works
        if shared is not None and not shared.take():
            break
        budget -= 1
        fixed = _fixed_if_it_runs(ctx, job, candidate, shared)
        if fixed is not None:
            families.add(candidate[0].family)
            out.append(model.Suggestion(change=text, patches=found, verified=True, size=size, fixed=fixed))
    return tuple(out)


def first_fix(
    ctx: analysis.Context,
    job: Job,
    reasons: list[model.Reason],
    *,
    cap: int,
    shared: DryRuns,
    tried: int = 0,
    basis: str = "",
) -> Search:
    """The smallest change that makes the job run, trying at most `cap` candidates in all (`tried` of
    them already failed for the same reasons) while `shared` has dry cycles left (a candidate the
    context's dry cycles already answered takes none); `basis`: see `Search`."""
    said = signature(reasons)
    for size, text, candidate, found in _ranked(ctx, job, reasons)[tried:cap]:
        known = _known_outcome(ctx, job, candidate)
        if known is not None:
            fixed = known[0] if known[1] else None
        elif not shared.take():
            return Search(reasons=said, tried=tried, found=None, done=False, basis=basis)
        else:
            fixed = _dry_run(ctx, job, candidate, shared)
        if fixed is not None:
            fix = model.Suggestion(change=text, patches=found, verified=True, size=size, fixed=fixed)
            return Search(reasons=said, tried=tried, found=fix, done=True, basis=basis)
        tried += 1
    return Search(reasons=said, tried=tried, found=None, done=True, basis=basis)


def _ranked(
    ctx: analysis.Context, job: Job, reasons: list[model.Reason]
) -> list[tuple[tuple[int, float], str, Candidate, tuple[model.Patch, ...]]]:
    """The candidate changes an object can express, each once, smallest first."""
    seen: set[str] = set()
    ranked: list[tuple[tuple[int, float], str, Candidate, tuple[model.Patch, ...]]] = []
    for candidate in _candidates(ctx, job, reasons):
        text = "; ".join(c.describe(ctx.snapshot, ctx.facts.queue_label_key) for c in candidate)
        if text in seen:
            continue
        seen.add(text)
        found = patches.patches_for(candidate, ctx.snapshot, ctx.facts)
        if found is None:
            continue
        ranked.append((changes.combined_size(candidate), text, candidate, found))
    ranked.sort(key=lambda item: (item[0], item[1]))
    return ranked


def runs_with(ctx: analysis.Context, job: Job, candidate: Candidate) -> bool:
    """Apply the changes to a copy of the snapshot, run the cycle's actions: does the job then run?"""
    return _fixed_if_it_runs(ctx, job, candidate) is not None


def _fixed_if_it_runs(
    ctx: analysis.Context, job: Job, candidate: Candidate, shared: DryRuns | None = None
) -> Job | None:
    """The job as the changes leave it, if it then runs (`runs_with`); else None. One dry cycle, unless
    the context's dry cycles already answered (`kai.explain.dryruns`)."""
    known = _known_outcome(ctx, job, candidate)
    if known is not None:
        return known[0] if known[1] else None
    return _dry_run(ctx, job, candidate, shared)


class _SharesDiffer(Exception):
    """A dry cycle's session divides the fair shares otherwise than the cycle's (`dryruns.alone`)."""


def _alone(ctx: analysis.Context, job: Job, candidate: Candidate, changed: Snapshot) -> Session | None:
    """The dry cycle on the changed snapshot with the other waiting jobs left out (`dryruns.alone`), if
    it answers as the full one would for the job; else None."""
    alone = dryruns.alone(ctx, job, candidate, changed)
    if alone is None:
        return None

    def opened(session: Session) -> None:
        if not dryruns.same_shares(ctx, session):
            raise _SharesDiffer

    try:
        return run_actions(alone, ctx.config, opened=opened)
    except _SharesDiffer:
        return None


def _known_outcome(ctx: analysis.Context, job: Job, candidate: Candidate) -> tuple[Job, bool] | None:
    """(The job as the changes leave it, whether it then runs) if a dry cycle of the context answered it
    (the same candidate, or at rest a twin's same change), else None."""
    book = dryruns.book(ctx)
    outcome = book.outcomes.get(candidate)
    if outcome is not None:
        return outcome[0][job.index], job.index in outcome[1]
    twin = book.twins.get(dryruns.twin_change(dryruns.twin_key(ctx, job), job, candidate) or ())
    if twin is not None:
        return apply_all(ctx.snapshot, candidate).jobs[job.index], twin
    return None


def _dry_run(ctx: analysis.Context, job: Job, candidate: Candidate, shared: DryRuns | None = None) -> Job | None:
    """Apply the changes, run the cycle's actions: the job as they leave it if it then runs; the outcome
    is kept for the jobs that ask the same (`kai.explain.dryruns`)."""
    snapshot = apply_all(ctx.snapshot, candidate)
    book = dryruns.book(ctx)
    session = _alone(ctx, job, candidate, snapshot)
    if session is not None:  # it answers for this job only
        asked = [job.index]
        if shared is not None:
            shared.give_back(1 - ALONE_COST)
    else:
        session = run_actions(snapshot, ctx.config)
        asked = ctx.remembered("waiting", lambda: [j.index for j in ctx.snapshot.jobs if ctx.session.has_pending(j)])
    running = frozenset(
        j for j in asked if analysis.phase(session, snapshot.jobs[j]) in (model.RUNNING, model.PIPELINED)
    )
    book.outcomes[candidate] = (snapshot.jobs, running)
    twin_key = dryruns.twin_key(ctx, job)
    twin = dryruns.twin_change(twin_key, job, candidate)
    if twin is not None and twin_key is not None:
        book.twins[twin] = job.index in running
        book.classes.add(twin_key)
    return snapshot.jobs[job.index] if job.index in running else None


def _candidates(ctx: analysis.Context, job: Job, reasons: list[model.Reason]) -> Iterator[Candidate]:
    for reason in reasons:
        token = reason.token
        if token in (model.QUEUE_DOES_NOT_EXIST, model.QUEUE_NOT_LEAF, model.QUEUE_LABEL_MISSING):
            yield from _queues(ctx, job, reason)
        elif token == model.PRIORITY_CLASS_NOT_FOUND:
            yield from _known_priorities(ctx, job)
        elif token == model.GANG_INCOMPLETE:
            exists = sum(int(entry["pods"]) for entry in _subgroups(reason))
            if 1 <= exists < job.min_member and _flat_gang(job):
                yield (changes.SetMinMember(job=job.index, min_member=exists, was=job.min_member),)
        elif token == model.POD_TOO_LARGE:
            yield from _too_large(ctx, job, reason)
        elif token == model.NO_MATCHING_NODES:
            yield from _selectors(ctx, job)
        elif token == model.OVER_LIMIT:
            yield from _raise_queues(ctx, job, OVER_LIMIT)
            if not reason.never:
                yield from _free_quota(ctx, job, OVER_LIMIT)
        elif token == model.NON_PREEMPTIBLE_OVER_QUOTA:
            yield from _preemptible(ctx, job, "to go over quota")
            yield from _raise_queues(ctx, job, NON_PREEMPTIBLE_OVER_QUOTA)
            if not reason.never:
                yield from _free_quota(ctx, job, NON_PREEMPTIBLE_OVER_QUOTA)
        elif token in (model.GANG_DOES_NOT_FIT, model.FRAGMENTED):
            yield from _shrink(ctx, job, reason)
            if not job.preemptible:
                yield from _preemptible(ctx, job, "so consolidation and reclaim may make room for it")
            yield from _higher_priority(ctx, job, "to preempt lower-priority jobs of its queue")
            yield from _free_nodes(ctx, job, reason)
        elif token == model.QUEUED_BEHIND:
            yield from _higher_priority(ctx, job, "to be tried earlier in its queue")


def _subgroups(reason: model.Reason) -> list[dict[str, int]]:
    entries = reason.evidence.get("subGroups")
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def _flat_gang(job: Job) -> bool:
    return len(job.podsets) == 1 and not job.subgroup_sets


def _queues(ctx: analysis.Context, job: Job, reason: model.Reason) -> Iterator[Candidate]:
    leaves = reason.evidence.get("leafQueues")
    if not isinstance(leaves, list):
        leaves = sorted(q.name for q in ctx.snapshot.queues if q.is_leaf)
    choices = [str(q) for q in leaves if q != job.queue_name and q in ctx.snapshot.queue_by_name]
    # the queue the user most likely meant first: the most similar name (a typo), then by name
    choices.sort(key=lambda q: (-difflib.SequenceMatcher(None, job.queue_name, q).ratio(), q))
    for rank, queue in enumerate(choices[:MAX_QUEUE_CHOICES]):
        yield (changes.SetQueue(job=job.index, queue=queue, preference=rank),)


def _known_priorities(ctx: analysis.Context, job: Job) -> Iterator[Candidate]:
    """The priority classes that exist, the one the user most likely meant first: the most similar
    name (a typo), then the lowest value."""

    def likely(pc: model.PriorityClassFacts) -> tuple[float, int, str]:
        return (-difflib.SequenceMatcher(None, job.priority_class_name, pc.name).ratio(), pc.value, pc.name)

    for pc in sorted(ctx.facts.priority_classes.values(), key=likely)[:2]:
        yield (
            changes.SetPriorityClass(
                job=job.index,
                name=pc.name,
                value=pc.value,
                preemptible=job.preemptible if _preemptibility_set(ctx, job) else pc.value < PREEMPTIBLE_BELOW,
                preempts=pc.preempts,
                why="",
            ),
        )


def _preemptibility_set(ctx: analysis.Context, job: Job) -> bool:
    facts = ctx.facts.workloads.get(job.key)
    return facts is not None and facts.preemptibility_set


def _preemptible(ctx: analysis.Context, job: Job, why: str) -> Iterator[Candidate]:
    """Make the job preemptible: a preemptible priority class (the closest first), or the label."""
    if job.preemptible:
        return
    if _preemptibility_set(ctx, job):
        yield (changes.SetPreemptible(job=job.index),)
        return
    classes = [pc for pc in ctx.facts.priority_classes.values() if pc.value < PREEMPTIBLE_BELOW]
    classes.sort(key=lambda pc: (abs(pc.value - job.priority), pc.name))
    for pc in classes[:2]:
        yield (
            changes.SetPriorityClass(
                job=job.index, name=pc.name, value=pc.value, preemptible=True, preempts=pc.preempts, why=why
            ),
        )


def _higher_priority(ctx: analysis.Context, job: Job, why: str) -> Iterator[Candidate]:
    """A higher priority class that keeps the job's preemptibility, the closest first."""
    explicit = _preemptibility_set(ctx, job)
    classes = [
        pc
        for pc in ctx.facts.priority_classes.values()
        if pc.value > job.priority and (explicit or (pc.value < PREEMPTIBLE_BELOW) == job.preemptible)
    ]
    classes.sort(key=lambda pc: (pc.value, pc.name))
    for pc in classes[:1]:
        yield (
            changes.SetPriorityClass(
                job=job.index,
                name=pc.name,
                value=pc.value,
                preemptible=job.preemptible,
                preempts=pc.preempts,
                why=why,
            ),
        )


def _raise_queues(ctx: analysis.Context, job: Job, reason: str) -> Iterator[Candidate]:
    """Raise every limit (or quota) that blocks the job, level by level, to what it needs."""
    session = ctx.session
    tasks = session.tasks_to_allocate(job)
    request = session.job_request(tasks)
    view = copy.copy(session)  # the post-cycle allocations, with the queues as the changes leave them
    found: list[changes.Change] = []
    for _ in range(MAX_LEVELS):
        block = capacity_block(view, job, request)
        if block is None:
            break
        if block.reason != reason:
            return  # another gate blocks first: this change alone does not make room
        change = changes.RaiseQueue(
            queue=view.snapshot.queues[block.queue].name,
            resource=block.resource,
            field="limit" if reason == OVER_LIMIT else "quota",
            was=block.bound,
            amount=block.allocated + block.request,
        )
        found.append(change)
        view.snapshot = change.apply(view.snapshot)
    if found:
        yield tuple(found)


def _too_large(ctx: analysis.Context, job: Job, reason: model.Reason) -> Iterator[Candidate]:
    resource = reason.evidence.get("resource")
    request = reason.evidence.get("request")
    largest = reason.evidence.get("largest")
    names = ctx.snapshot.resources.names
    if not isinstance(resource, str) or resource not in names:
        return
    if not isinstance(request, float) or not isinstance(largest, float) or largest <= 0:
        return
    yield (changes.SetPodRequest(job=job.index, resource=names.index(resource), was=request, amount=largest),)


def _selectors(ctx: analysis.Context, job: Job) -> Iterator[Candidate]:
    """Drop a node selector entry of the job's pending pods, one at a time."""
    snap = ctx.snapshot
    seen: set[tuple[str, str]] = set()
    for task in ctx.session.pending_tasks(job):
        for kv in snap.constraints[task.constraint].node_selector:
            if kv not in seen:
                seen.add(kv)
                yield (changes.DropNodeSelector(job=job.index, key=kv[0], value=kv[1]),)


def _shrink(ctx: analysis.Context, job: Job, reason: model.Reason) -> Iterator[Candidate]:
    """A smaller gang (the pods that fit now) and smaller pods (the largest size at which all fit now)."""
    placed = reason.evidence.get("placed")
    if isinstance(placed, int) and 1 <= placed < job.min_member and _flat_gang(job):
        yield (changes.SetMinMember(job=job.index, min_member=placed, was=job.min_member),)
    session = ctx.session
    tasks = session.tasks_to_allocate(job)
    if not tasks or any(t.is_shared_gpu for t in tasks):
        return
    was = float(tasks[0].request[GPU])
    if was < 2 or any(float(t.request[GPU]) != was for t in tasks):
        return
    for amount in range(int(was) - 1, 0, -1):
        smaller = []
        for task in tasks:
            request = task.request.copy()
            request[GPU] = amount
            smaller.append(msgspec.structs.replace(task, request=request))
        if analysis.fitting(session, smaller).placed == len(smaller):
            yield (changes.SetPodRequest(job=job.index, resource=GPU, was=was, amount=float(amount)),)
            return


def _free_nodes(ctx: analysis.Context, job: Job, reason: model.Reason) -> Iterator[Candidate]:
    """Another job ends and frees the GPUs the gang needs beyond what is free on the nodes it may use
    (beyond what the most free node has, for a pod that fits on no node of a fragmented cluster)."""
    evidence = reason.evidence
    if evidence.get("resource") != ctx.snapshot.resources.names[GPU]:
        return
    free, most, pod_needs, gang_needs = (evidence.get(k) for k in ("free", "mostOnOneNode", "podNeeds", "gangNeeds"))
    if not (isinstance(free, float) and isinstance(most, float)):
        return
    if not (isinstance(pod_needs, float) and isinstance(gang_needs, float)):
        return
    needed = gang_needs - free if gang_needs - free > EPS else pod_needs - most
    tasks = ctx.session.tasks_to_allocate(job)
    if needed <= EPS or not tasks:
        return
    held = holders.holding(ctx, job, 0, nodes=fit_lib.predicate_mask(ctx.session, tasks[0]))
    yield from _enders(ctx, job, held, needed=needed, resource=0, queue=None)


def _free_quota(ctx: analysis.Context, job: Job, reason: str) -> Iterator[Candidate]:
    """Another job under the queue whose limit (or non-preemptible quota) blocks this one ends, and
    frees what the queue holds beyond it."""
    session = ctx.session
    block = capacity_block(session, job, session.job_request(session.tasks_to_allocate(job)))
    if block is None or block.reason != reason:
        return
    needed = block.allocated + block.request - block.bound
    if needed <= EPS:
        return
    queues = ctx.snapshot.queues
    under: set[int] = set()
    for queue in queues:
        q = queue.index
        while q >= 0 and q != block.queue:
            q = queues[q].parent
        if q == block.queue:
            under.add(queue.index)
    held = holders.holding(ctx, job, block.resource, queues=under)
    if reason == NON_PREEMPTIBLE_OVER_QUOTA:
        held = holders.non_preemptible(ctx, held)
    yield from _enders(ctx, job, held, needed=needed, resource=block.resource, queue=queues[block.queue].name)


def _enders(
    ctx: analysis.Context, job: Job, held: dict[int, float], *, needed: float, resource: int, queue: str | None
) -> Iterator[Candidate]:
    """End the job known to end first, and the first in KAI's victim order, of those that hold `needed`
    (queue space) by themselves; `queue`: where it must be freed (None: the ending job's queue)."""
    enough = {j: amount for j, amount in held.items() if amount >= needed - EPS}
    jobs = ctx.snapshot.jobs

    def end(index: int, why: str, line: int) -> Candidate:
        where = queue if queue is not None else jobs[index].queue_name
        amount = enough[index]
        return (
            changes.EndJob(job=index, queue=where, resource=resource, needed=needed, holds=amount, why=why, line=line),
        )

    first = holders.first_to_end(ctx, enough)
    if first is not None:
        yield end(first, "is first in line to end", 0)
    victim = holders.first_victim(ctx, enough, but=first)
    if victim is not None:
        kind = "preempted" if jobs[victim].queue == job.queue else "reclaimed"
        yield end(victim, f"is first in line to be {kind}", 1)


def apply_all(snapshot: Snapshot, candidate: Candidate) -> Snapshot:
    """The snapshot with every change of the candidate made (the given one is left as it was)."""
    for change in candidate:
        snapshot = change.apply(snapshot)
    return snapshot
