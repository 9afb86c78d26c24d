"""Why one job waits after a cycle: every reason that holds, read from the session the actions left.

Nothing here restates a scheduling rule. Queue problems come from the snapshot builder's verdict on
the job; gang readiness from `Session.not_ready`; queue gates from the proportion plugin's
`capacity_block`; node admission from `fit.predicate_mask`; what fits now from `place_task` run
in a statement that is discarded; reclaim's verdict from the session's reclaim gates; preemption
delays from the preemptor loop's own test. The analysis only measures (free GPUs per node, the
largest node) to put numbers on what those rules decided.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar, cast

import msgspec
import numpy as np

from kai.actions.common import preemptors
from kai.actions.common.placement import place_task
from kai.core import fit as fit_lib
from kai.core.decisions import Eviction
from kai.core.model import Job, Snapshot, Task, TaskStatus
from kai.core.resources import GPU, PODS
from kai.core.session import SchedulerConfig, Session
from kai.core.snapshot_builder import QUEUE_DOES_NOT_EXIST
from kai.core.statement import Statement
from kai.explain import model, words
from kai.plugins.proportion.plugin import NON_PREEMPTIBLE_OVER_QUOTA, CapacityBlock, capacity_block
from kai.scheduler.cycle import open_session

EPS = 1e-9
PRIORITY_CLASS_NOT_FOUND = "PriorityClassNotFound"
_T = TypeVar("_T")
# statuses as plain ints for the session's int8 arrays (numpy compares them faster than IntEnum members)
_ALLOCATED, _RUNNING, _RELEASING = int(TaskStatus.ALLOCATED), int(TaskStatus.RUNNING), int(TaskStatus.RELEASING)


class Context(msgspec.Struct):
    """One cycle as the engine reads it: its snapshot, the session after its actions, the facts."""

    snapshot: Snapshot
    config: SchedulerConfig
    session: Session
    facts: model.Facts
    # also ask whether the job fit when the cycle began (QueuedBehind as another reason): that opens a
    # second session over the snapshot, which a cycle's own conditions do without
    thorough: bool = True
    _before: Session | None = None
    _placed: list[str] | None = None
    # what several jobs of the same shapes ask of the session alike (it does not change while jobs
    # are explained): the nodes their pods would go to, whether some node could hold a pod, the
    # room free on the nodes a pod may use
    _alike: dict[tuple[object, ...], object] = msgspec.field(default_factory=dict)

    def remembered(self, key: str, make: Callable[[], _T]) -> _T:
        """What `make` gives, made once for the context (it must read only what does not change while
        jobs are explained: the snapshot, the session the actions left, the facts)."""
        found = self._alike.get((key,))
        if found is None:
            found = self._alike[(key,)] = make()
        return cast(_T, found)

    def before(self) -> Session:
        """A session over the same snapshot with no action run: the room free when the cycle began."""
        if self._before is None:
            self._before = open_session(self.snapshot, self.config)
        return self._before

    def placed_workloads(self) -> list[str]:
        """The workloads the cycle placed pods of, by name."""
        if self._placed is None:
            tasks = {t.key: t for t in self.snapshot.tasks}
            self._placed = sorted(
                {self.snapshot.jobs[tasks[p.pod].job].display_name for p in self.session.placements if p.pod in tasks}
            )
        return self._placed


class Fitting(msgspec.Struct, frozen=True, kw_only=True):
    """Where the job's next attempt would go on what is free now, pod by pod (the rest fit nowhere)."""

    tasks: tuple[Task, ...]
    nodes: tuple[int | None, ...]  # per task: the node `place_task` chose, or None

    @property
    def placed(self) -> int:
        return len(self.nodes) - self.nodes.count(None)

    @property
    def first_unplaced(self) -> Task | None:
        return self.tasks[self.nodes.index(None)] if None in self.nodes else None


def phase(session: Session, job: Job) -> str:
    """The job's phase after the cycle: Running, Pipelined (its gang holds releasing room), Pending, ..."""
    if not job.tasks:
        return model.PENDING
    status = session.status[session.job_order_tasks[job.index]]  # the job's tasks (in task order)
    if session.gang_satisfied(job):
        if len(job.podsets) == 1:
            bound = np.array([np.count_nonzero((status == _ALLOCATED) | (status == _RUNNING))])
        else:
            bound = np.zeros(len(job.podsets), dtype=np.int64)
            for t in job.tasks:
                if session.status[t] in (TaskStatus.ALLOCATED, TaskStatus.RUNNING):
                    bound[session.snapshot.tasks[t].podset] += 1
        return model.RUNNING if job.gang_satisfied_by(bound) else model.PIPELINED
    if not (status <= _RELEASING).any():
        return model.SUCCEEDED if np.any(status == TaskStatus.SUCCEEDED) else model.FAILED
    return model.PENDING


def fitting(session: Session, tasks: list[Task]) -> Fitting:
    """Place each task on idle resources as the cycle would, skipping those that fit nowhere; undo all.

    Once a pod fits nowhere, the job's later pods of the same shape are not tried: nothing was placed
    in between that could make room for them.
    """
    stmt = Statement(session, action="explain")
    nodes: list[int | None] = []
    stuck: set[tuple[object, ...]] = set()
    for task in tasks:
        shape = _shape(task)
        if shape in stuck:
            nodes.append(None)
            continue
        error = place_task(session, stmt, task, allow_pipeline=False, why=False, remember=True)
        if error is not None:
            stuck.add(shape)
        nodes.append(None if error is not None else int(session.node[task.index]))
    stmt.discard()
    return Fitting(tasks=tuple(tasks), nodes=tuple(nodes))


def _shape(task: Task) -> tuple[object, ...]:
    return (task.request.tobytes(), task.gpu_portion, task.gpu_devices, task.gpu_memory_mib, task.constraint)


def _runs(tasks: Sequence[Task]) -> list[tuple[Task, int]]:
    """The tasks as runs of like pods in a row, (first pod, how many): pods that share a request vector
    (the snapshot gives the pods of a workload one) and ask alike otherwise have the same `_shape` and
    nominated node. Two runs in a row may still have equal shapes (equal requests in two vectors)."""
    runs: list[tuple[Task, int]] = []
    first: Task | None = None
    count = 0
    for task in tasks:
        if (
            first is not None
            and task.request is first.request
            and task.gpu_portion == first.gpu_portion
            and task.gpu_devices == first.gpu_devices
            and task.gpu_memory_mib == first.gpu_memory_mib
            and task.constraint == first.constraint
            and task.nominated_node == first.nominated_node
        ):
            count += 1
            continue
        if first is not None:
            runs.append((first, count))
        first, count = task, 1
    if first is not None:
        runs.append((first, count))
    return runs


def _alike(session: Session, tasks: list[Task]) -> bool:
    """Whether what the session says of these pods depends on their shapes alone (`_shape`, and a
    nominated node): no plugin predicate reads the pod itself, and no pod shares a GPU (the device
    chooser may remember the pod it last chose for)."""
    return not session.predicates and not any(t.is_shared_gpu for t in tasks)


def _fitting(ctx: Context, tasks: list[Task], runs: list[tuple[Task, int]]) -> Fitting:
    """`fitting` on the cycle's session, once for all the jobs whose pods have the same shapes (`runs`:
    `_runs(tasks)`)."""
    session = ctx.session
    if not _alike(session, [task for task, _ in runs]):  # a run's pods all share a GPU or none does
        return fitting(session, tasks)
    # the shapes and nominated nodes of the pods in order, as runs (equal runs: equal sequences)
    key = ("fitting", *((_shape(t), t.nominated_node, n) for t, n in runs))
    nodes = ctx._alike.get(key)
    if not isinstance(nodes, tuple):
        nodes = fitting(session, tasks).nodes
        ctx._alike[key] = nodes
    return Fitting(tasks=tuple(tasks), nodes=nodes)


def job_reasons(ctx: Context, job: Job, state: str | None = None) -> list[model.Reason]:
    """Every reason that holds for a job with pending pods, dominant first (`state`: its `phase`, if
    known)."""
    session = ctx.session
    if (phase(session, job) if state is None else state) == model.PIPELINED:
        return [_waiting_for_victims(ctx, job)]
    found: list[model.Reason] = []
    found += _queue_reasons(ctx, job)
    short = session.not_ready(job)
    if short:
        found.append(_gang_incomplete(job, short))
    pending = session.pending_tasks(job)
    node_reason = None
    for task in _distinct_shapes(pending):
        node_reason = _node_reason(ctx, job, task)
        if node_reason is not None:
            found.append(node_reason)
            break
    if job.problem is None and job.queue >= 0 and not short:
        # where no node could ever hold a pod, what is free now says nothing more
        found += _capacity_and_room(ctx, job, room=node_reason is None)
    if not found and pending:
        found.append(_from_cycle(session, job))
    return model.dominant_first(found)


# ----------------------------------------------------------------------------- never
def _queue_reasons(ctx: Context, job: Job) -> list[model.Reason]:
    problem = job.problem
    facts = ctx.facts.workloads.get(job.key)
    label_missing = facts is not None and facts.queue_label_missing
    if problem is None:
        return []
    if problem.reason == PRIORITY_CLASS_NOT_FOUND:
        return [model.Reason(token=model.PRIORITY_CLASS_NOT_FOUND, message=problem.message, never=True)]
    if problem.reason != QUEUE_DOES_NOT_EXIST:
        return [model.Reason(token=problem.reason, message=problem.message, never=True)]
    snap = ctx.snapshot
    leaves = sorted(q.name for q in snap.queues if q.is_leaf)
    index = snap.queue_by_name.get(job.queue_name)
    token = model.QUEUE_DOES_NOT_EXIST
    evidence: dict[str, object] = {"queue": job.queue_name, "leafQueues": leaves}
    if index is not None and not snap.queues[index].is_leaf:
        token = model.QUEUE_NOT_LEAF
        evidence["leafQueues"] = _leaves_under(snap, index)
    reasons = [model.Reason(token=token, message=problem.message, evidence=evidence, never=True)]
    if label_missing:
        reasons.append(_label_missing(ctx, job, problem.message))
    return reasons


def _label_missing(ctx: Context, job: Job, why: str) -> model.Reason:
    key = ctx.facts.queue_label_key
    return model.Reason(
        token=model.QUEUE_LABEL_MISSING,
        message=(
            f"{job.display_name} has no {key} label, so it went to {job.queue_name or ctx.facts.default_queue}, "
            f"where {why}"
        ),
        evidence={"label": key, "queue": job.queue_name},
        never=True,
    )


def _leaves_under(snapshot: Snapshot, queue: int) -> list[str]:
    out: list[str] = []
    stack = [queue]
    while stack:
        q = snapshot.queues[stack.pop()]
        if q.is_leaf:
            out.append(q.name)
        stack.extend(q.children)
    return sorted(out)


def _gang_incomplete(job: Job, short: list[tuple[str, int, int]]) -> model.Reason:
    parts = []
    for podset, minimum, existing in short:
        where = "" if podset in ("", "default") else f" in subgroup {podset}"
        exist = f"{existing} exists" if existing == 1 else f"{existing} exist"
        parts.append(f"{minimum} pod{'s' if minimum != 1 else ''}{where} must start together, {exist}")
    return model.Reason(
        token=model.GANG_INCOMPLETE,
        message=f"{job.display_name} cannot start: " + "; ".join(parts),
        evidence={
            "minMember": job.min_member,
            "subGroups": [{"name": p or "default", "minMember": m, "pods": e} for p, m, e in short],
        },
        never=True,
    )


def _distinct_shapes(tasks: list[Task]) -> list[Task]:
    seen: set[tuple[object, ...]] = set()
    out = []
    for task, _ in _runs(tasks):  # a run's later pods have its first pod's shape
        key = _shape(task)
        if key not in seen:
            seen.add(key)
            out.append(task)
    return out


def _pod(job: Job, task: Task) -> str:
    """`pod trainer-3 of trainer`, or just `pod build-pod` when the pod is the workload."""
    return f"pod {task.name}" if task.name == job.display_name else f"pod {task.name} of {job.display_name}"


def _node_reason(ctx: Context, job: Job, task: Task) -> model.Reason | None:
    """PodTooLarge (no node could ever hold the pod) or NoMatchingNodes (none it may use could)."""
    session = ctx.session
    alike = ("some node may hold", _shape(task)) if _alike(session, [task]) else None
    if alike is not None and ctx._alike.get(alike):
        return None  # a pod of the same shape was found to fit some node it may use
    found = _node_reason_of(session, job, task)
    if alike is not None:
        ctx._alike[alike] = found is None
    return found


def _node_reason_of(session: Session, job: Job, task: Task) -> model.Reason | None:
    snap = session.snapshot
    nodes = snap.nodes
    names = snap.resources.names
    asked = [int(r) for r in np.flatnonzero(task.request > 0) if r != PODS]
    alloc = nodes.allocatable
    big_enough = np.all(alloc[:, asked] >= task.request[asked] - EPS, axis=1) & nodes.schedulable
    if task.is_shared_gpu and task.gpu_memory_mib > 0:
        big_enough &= nodes.gpu_memory_mib >= task.gpu_memory_mib
    if task.is_shared_gpu:
        big_enough &= alloc[:, GPU] >= 1.0 - EPS
    if not big_enough.any():
        return _too_large(snap, job, task, asked)
    admitted = fit_lib.predicate_mask(session, task)
    if (admitted & big_enough).any():
        return None
    evidence: dict[str, object] = {"pod": task.name, "nodes": nodes.count, "admitting": int(admitted.sum())}
    if not admitted.any():
        summary = fit_lib.fit_errors(
            session,
            task,
            fit_lib.Fit(session=session, task=task, now=admitted, later=admitted, shares_existing=admitted),
        )
        evidence["summary"] = summary
        message = f"no node admits {_pod(job, task)} ({summary})"
    else:
        r = next(r for r in asked if not np.any(alloc[admitted, r] >= task.request[r] - EPS))
        largest = float(alloc[admitted, r].max())
        evidence["largest"] = largest
        message = (
            f"the {int(admitted.sum())} nodes that admit {_pod(job, task)} are all smaller "
            f"than it: it asks {words.node_amount(r, float(task.request[r]), names)}, the largest has "
            f"{words.node_amount(r, largest, names)}"
        )
    return model.Reason(token=model.NO_MATCHING_NODES, message=message, evidence=evidence, never=True)


def _too_large(snap: Snapshot, job: Job, task: Task, asked: list[int]) -> model.Reason:
    names = snap.resources.names
    usable = snap.nodes.allocatable[snap.nodes.schedulable]
    if task.is_shared_gpu and task.gpu_memory_mib > 0:
        largest_mib = int(snap.nodes.gpu_memory_mib.max()) if snap.nodes.count else 0
        return model.Reason(
            token=model.POD_TOO_LARGE,
            message=(
                f"{_pod(job, task)} asks gpu-memory {task.gpu_memory_mib} MiB; the largest GPU has {largest_mib} MiB"
            ),
            evidence={
                "pod": task.name,
                "resource": "gpu-memory",
                "request": task.gpu_memory_mib,
                "largest": largest_mib,
            },
            never=True,
        )
    for r in asked:
        largest = float(usable[:, r].max()) if len(usable) else 0.0
        if largest < task.request[r] - EPS:
            return model.Reason(
                token=model.POD_TOO_LARGE,
                message=(
                    f"{_pod(job, task)} asks "
                    f"{words.node_amount(r, float(task.request[r]), names)}; the largest node has "
                    f"{words.node_amount(r, largest, names)}"
                ),
                evidence={
                    "pod": task.name,
                    "resource": names[r],
                    "request": float(task.request[r]),
                    "largest": largest,
                },
                never=True,
            )
    # no single resource is too large, but no node has all of them at once
    return model.Reason(
        token=model.POD_TOO_LARGE,
        message=f"{_pod(job, task)} asks more than any node has",
        evidence={"pod": task.name},
        never=True,
    )


# ----------------------------------------------------------------------------- capacity now and order
def _capacity_and_room(ctx: Context, job: Job, *, room: bool) -> list[model.Reason]:
    session = ctx.session
    tasks = session.tasks_to_allocate(job)
    if not tasks:
        return []
    found: list[model.Reason] = []
    request = session.job_request(tasks)
    block = capacity_block(session, job, request)
    facts = ctx.facts.workloads.get(job.key)
    if block is not None:
        found.append(_capacity(session, job, block))
        if facts is not None and facts.queue_label_missing:
            found.append(_label_missing(ctx, job, found[-1].message))
    if not room:
        return found
    runs = _runs(tasks)
    fit = _fitting(ctx, tasks, runs)
    fits_now = fit.placed == len(tasks)
    if not fits_now and block is None:
        found.append(_no_room(ctx, job, fit, request, runs))
    if preemptors.within_preemption_delay(job, session.now) and not fits_now:
        found.append(
            model.Reason(
                token=model.PREEMPTION_DELAY_NOT_ELAPSED,
                message=preemptors.preemption_delay_message(job),
                evidence={"until": job.preemption_delay_end},
            )
        )
    if fits_now and block is None:
        found.append(
            model.Reason(
                token=model.QUEUED_BEHIND,
                message=f"{job.display_name} fits on the free room now; it starts when its turn comes",
            )
        )
    elif not fits_now and block is None and ctx.thorough and fitting(ctx.before(), tasks).placed == len(tasks):
        taken = ctx.placed_workloads()
        found.append(
            model.Reason(
                token=model.QUEUED_BEHIND,
                message=(
                    f"{job.display_name} fit on the room free when the cycle began, but jobs ahead of it took it"
                    + (f": {words.listing(taken)}" if taken else "")
                ),
                evidence={"tookTheRoom": taken},
            )
        )
    return found


def _capacity(session: Session, job: Job, block: CapacityBlock) -> model.Reason:
    queue = session.snapshot.queues[block.queue].name
    r = block.resource
    res = words.resource_name(r)
    never = block.request > block.bound + EPS
    evidence = {
        "queue": queue,
        "resource": res,
        "allocated": block.allocated,
        "request": block.request,
        "limit" if block.reason != NON_PREEMPTIBLE_OVER_QUOTA else "quota": block.bound,
    }
    need = words.queue_amount(r, block.request)
    bound = words.queue_amount(r, block.bound)
    if block.reason == NON_PREEMPTIBLE_OVER_QUOTA:
        if never:
            message = (
                f"non-preemptible {job.display_name} needs {need}, more than queue {queue}'s {res} quota of "
                f"{bound}; only preemptible work may go over quota"
            )
        else:
            message = (
                f"non-preemptible {job.display_name} needs {need}, but queue {queue} has "
                f"{words.queue_amount(r, block.allocated)} of non-preemptible work and a {res} quota of {bound}"
            )
        token = model.NON_PREEMPTIBLE_OVER_QUOTA
    else:
        if never:
            message = f"{job.display_name} needs {need}, more than queue {queue}'s {res} limit of {bound}"
        else:
            message = (
                f"queue {queue} would exceed its {res} limit: it has "
                f"{words.queue_amount(r, block.allocated)} allocated, {job.display_name} needs {need}, "
                f"the limit is {bound}"
            )
        token = model.OVER_LIMIT
    return model.Reason(token=token, message=message, evidence=evidence, never=never)


def _no_room(ctx: Context, job: Job, fit: Fitting, request: np.ndarray, runs: list[tuple[Task, int]]) -> model.Reason:
    """GangDoesNotFit (with a per-node summary) or Fragmented (enough free in total, not on one node);
    `runs`: `_runs` of the fitting's pods."""
    session = ctx.session
    snap = session.snapshot
    names = snap.resources.names
    tasks = list(fit.tasks)
    stuck = fit.first_unplaced
    assert stuck is not None
    r = words.main_node_resource(stuck)
    total_free, most = _free_room(ctx, stuck, r)
    need_one = words.task_gpus(stuck) if r == GPU else float(stuck.request[r])
    need_all = 0.0
    for task, count in runs:  # added pod by pod, in order, as a sum over the pods would
        need = words.task_gpus(task) if r == GPU else float(task.request[r])
        for _ in range(count):
            need_all += need
    evidence: dict[str, object] = {
        "resource": names[r],
        "free": total_free,
        "mostOnOneNode": most,
        "podNeeds": need_one,
        "gangNeeds": need_all,
        "pods": len(tasks),
        "placed": fit.placed,
    }
    reclaim = _reclaim_clause(session, job, request)
    if reclaim:
        evidence["reclaim"] = reclaim
    suffix = f"; {reclaim}" if reclaim else ""
    if total_free >= need_all - EPS and need_one > most + EPS and not stuck.is_shared_gpu:
        message = (
            f"{words.node_amount(r, total_free, names)} free, at most {words.node_amount(r, most, names)} on one "
            f"node, a pod of {job.display_name} needs {words.node_amount(r, need_one, names)}"
        )
        return model.Reason(token=model.FRAGMENTED, message=message + suffix, evidence=evidence)
    per_node: dict[str, int] = {}
    for node in fit.nodes:
        if node is not None:
            per_node[snap.nodes.names[node]] = per_node.get(snap.nodes.names[node], 0) + 1
    evidence["nodes"] = dict(sorted(per_node.items()))
    if per_node:
        where = ", ".join(f"{n} takes {c}" for n, c in sorted(per_node.items()))
    else:
        where = (
            f"no node has {words.node_amount(r, need_one, names)} free "
            f"(at most {words.node_amount(r, most, names)} on one node)"
        )
    message = f"{job.display_name}: {words.shape(runs, names)}: {where}; {fit.placed} of {len(tasks)} placed"
    return model.Reason(token=model.GANG_DOES_NOT_FIT, message=message + suffix, evidence=evidence)


def _free_room(ctx: Context, task: Task, r: int) -> tuple[float, float]:
    """Of resource `r`, what is free in all and at most on one node, on the nodes the pod may use."""
    session = ctx.session
    alike = ("free room", r, task.constraint) if _alike(session, [task]) else None
    known = ctx._alike.get(alike) if alike is not None else None
    if isinstance(known, tuple):
        return known[0], known[1]
    free = np.maximum(session.idle[:, r], 0.0) * fit_lib.predicate_mask(session, task)
    found = (float(free.sum()), float(free.max()) if len(free) else 0.0)
    if alike is not None:
        ctx._alike[alike] = found
    return found


def _reclaim_clause(session: Session, job: Job, request: np.ndarray) -> str:
    """Why reclaim takes nothing back for this job, when its own gate says so."""
    if not job.can_preempt or not session.reclaim_gates:
        return ""
    if all(gate(session, job, request) for gate in session.reclaim_gates):
        return ""
    q = job.queue
    queue = session.snapshot.queues[q].name
    r = next((i for i in range(3) if request[i] > 0), 0)
    has = float(session.queue_allocated[q, r])
    fair = float(session.fair_share[q, r])
    return (
        f"reclaim cannot help: queue {queue} would go over its fair share of {words.queue_amount(r, fair)} "
        f"(has {words.number(r, has)}, {job.display_name} needs {words.number(r, float(request[r]))})"
    )


def _waiting_for_victims(ctx: Context, job: Job) -> model.Reason:
    session = ctx.session
    snap = session.snapshot
    mine = set(job.tasks)
    nodes = sorted({int(session.node[t]) for t in mine if session.status[t] == TaskStatus.PIPELINED})
    victims = [e for e in session.evictions if e.preemptor == job.key]
    held = np.flatnonzero((session.status == TaskStatus.RELEASING) & np.isin(session.node, nodes))
    releasing = [snap.tasks[int(t)] for t in held]
    node_names = [snap.nodes.names[n] for n in nodes]
    evidence: dict[str, object] = {
        "nodes": node_names,
        "terminating": sorted(t.key for t in releasing),
        "evicted": [{"pod": e.pod, "action": e.action} for e in victims],
    }
    count = len(victims) or len(releasing)
    pods = f"{count} victim pod" + ("" if count == 1 else "s")
    if victims:
        action = victims[0].action
        reclaimed = _reclaim_numbers(ctx, job, victims) if action == "reclaim" else ""
        lead = f"{reclaimed}; " if reclaimed else f"{action} evicted {pods} for it; "
        message = f"{lead}{action} starts {job.display_name} once {pods} terminate"
    else:
        message = (
            f"{job.display_name} holds room on {words.listing(node_names)} that {pods} still use; "
            "it starts once they terminate"
        )
    return model.Reason(token=model.WAITING_FOR_VICTIMS, message=message, evidence=evidence)


def _reclaim_numbers(ctx: Context, job: Job, victims: list[Eviction]) -> str:
    """`team-b is 4 GPUs over its fair share of 8 (has 12)` for each queue reclaim takes from."""
    session = ctx.session
    snap = session.snapshot
    by_key = {j.key: j for j in snap.jobs}
    queues: list[int] = []
    for e in victims:
        victim = by_key.get(e.podgroup)
        if victim is not None and victim.queue >= 0 and victim.queue not in queues:
            queues.append(victim.queue)
    request = session.job_request([snap.tasks[t] for t in job.tasks])
    r = next((i for i in range(3) if request[i] > 0), 0)
    before = ctx.before().queue_allocated  # what the queues held when the cycle began
    parts = []
    for q in sorted(queues, key=lambda i: snap.queues[i].name):
        has, fair = float(before[q, r]), float(session.fair_share[q, r])
        over = has - fair
        if over > EPS:
            parts.append(
                f"{snap.queues[q].name} is {words.queue_amount(r, over)} over its fair share of "
                f"{words.number(r, fair)} (has {words.number(r, has)})"
            )
    return "; ".join(parts)


def _from_cycle(session: Session, job: Job) -> model.Reason:
    condition = session.conditions.get(job.index)
    if condition is not None:
        return model.Reason(token=condition.reason, message=condition.message)
    return model.Reason(token=model.QUEUED_BEHIND, message=f"{job.display_name} waits for its turn")
