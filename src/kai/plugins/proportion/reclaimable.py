"""May a queue take resources back from other queues? KAI's reclaim rules as pure functions.

Reclaim moves resources between queues toward fair share. A scenario (evict these victims so
this job can run) is accepted only if:

1. the reclaimer's leaf queue stays within its fair share with the job (`can_reclaim`), and a
   non-preemptible reclaimer stays within its deserved quota;
2. every victim, compared at the level where the reclaimer's and the victim's ancestries meet,
   satisfies a strategy: *maintain fair share* (the victim-side queue is still above its
   allocatable share when the victim is taken) or *guarantee deserved quota* (the reclaimer-side
   queue stays within its deserved quota with the job while the victim side is above its quota);
3. walking up from the reclaimer's leaf, the reclaimer-side queue's saturation (allocated over
   fair share, per resource) stays below that of every sibling that loses resources, with
   `reclaimerUtilizationMultiplier` applied: two queues never evict each other back and forth;
4. a non-preemptible reclaimer stays within deserved at every level.

Before any scenario is built, `victim_queue_allowed` keeps out of the search every queue no strategy
could take anything from (KAI's reclaim victim filter), so a hopeless search ends at once.
`victim_queue_can_lose` is a necessary condition of rule 2 on its own: a queue whose leveled queue
fits no strategy at its current allocation can lose no victim in a valid scenario (taking victims
only lowers what it holds, and both strategies need it to hold more than a bound). Its jobs may still
be moved, so they stay in the search; the action uses the condition to prove a search hopeless.

Vectors are in queue space (gpu, cpu millicores, memory bytes); -1 means unlimited. The
`ReclaimablePlugin` registers these rules as the session's reclaim gate and validator.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import msgspec
import numpy as np

from kai.core import resources
from kai.core.model import Job, Matrix
from kai.core.queue_tree import leveled_queues, path
from kai.core.resources import Vector
from kai.core.session import ReclaimScenario, Session

UNLIMITED = -1.0
EPS = 1e-9
MAINTAIN_FAIR_SHARE = "maintain-fair-share"
GUARANTEE_DESERVED_QUOTA = "guarantee-deserved-quota"


class QueueTable(msgspec.Struct, frozen=True, kw_only=True):
    """The queue tree and its per-queue vectors ([Q, 3] each), as the rules read them. The fair shares
    are set when the session opens and read, never changed, by the actions."""

    names: tuple[str, ...]
    parents: tuple[int, ...]  # -1 for a top-level queue
    deserved: Matrix
    limit: Matrix
    fair_share: Matrix
    shares: dict[int, Vector] = msgspec.field(default_factory=dict)  # `allocatable_share` per queue, once asked
    levels: dict[tuple[int, int], tuple[int, int]] = msgspec.field(default_factory=dict)  # `leveled`, once asked


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    ok: bool
    reason: str  # empty when ok


def less_equal(left: Vector, right: Vector) -> bool:
    """left <= right in every resource; -1 on the right means unlimited, on the left only fits unlimited."""
    for a, b in zip(left.tolist(), right.tolist(), strict=True):  # Python floats: cheaper per item than numpy's
        if b == UNLIMITED:
            continue
        if a == UNLIMITED or a > b + EPS:
            return False
    return True


def allocatable_share(table: QueueTable, queue: int) -> Vector:
    """max(deserved, fair share) capped by the limit; -1 where unlimited (read-only: kept per queue)."""
    share = table.shares.get(queue)
    if share is None:
        share = resources.allocatable_share(table.deserved[queue], table.fair_share[queue], table.limit[queue])
        share.flags.writeable = False
        table.shares[queue] = share
    return share


def leveled(table: QueueTable, reclaimer: int, victim: int) -> tuple[int, int]:
    """`leveled_queues` in the table's tree, kept per pair (the tree is fixed for the session)."""
    pair = table.levels.get((reclaimer, victim))
    if pair is None:
        pair = table.levels[(reclaimer, victim)] = leveled_queues(table.parents, reclaimer, victim)
    return pair


def can_reclaim(
    *,
    table: QueueTable,
    queue: int,
    allocated: Matrix,
    allocated_np: Matrix,
    request: Vector,
    preemptible: bool,
) -> bool:
    """The reclaimer's leaf stays within its fair share (and within deserved if non-preemptible)."""
    if not less_equal(allocated[queue] + request, table.fair_share[queue]):
        return False
    return preemptible or less_equal(allocated_np[queue] + request, table.deserved[queue])


def fits_strategy(
    *,
    table: QueueTable,
    reclaimer_queue: int,
    victim_queue: int,
    allocated: Matrix,
    request: Vector,
    victim_remaining: Vector,
) -> str | None:
    """The strategy that allows taking from `victim_queue` (leveled queues), or None."""
    if not less_equal(victim_remaining, allocatable_share(table, victim_queue)):
        return MAINTAIN_FAIR_SHARE
    within_quota = less_equal(allocated[reclaimer_queue] + request, table.deserved[reclaimer_queue])
    if within_quota and not less_equal(victim_remaining, table.deserved[victim_queue]):
        return GUARANTEE_DESERVED_QUOTA
    return None


def saturation(allocated: float, fair: float) -> float:
    """allocated / fair share; an unlimited share is never saturated, a zero share is as soon as used."""
    if fair == UNLIMITED:
        return 0.0
    if fair <= 0:
        return math.inf if allocated > EPS else 0.0
    return allocated / fair


def saturation_lower(
    *,
    reclaimer_allocated: Vector,
    reclaimer_fair: Vector,
    sibling_allocated: Vector,
    sibling_fair: Vector,
    multiplier: float,
) -> bool:
    """Per resource: a reclaimer over its fair share must stay less saturated than the sibling it takes from."""
    for r in range(len(reclaimer_fair)):
        if reclaimer_fair[r] == UNLIMITED and sibling_fair[r] == UNLIMITED:
            continue
        ratio_r = saturation(float(reclaimer_allocated[r]), float(reclaimer_fair[r]))
        ratio_s = saturation(float(sibling_allocated[r]), float(sibling_fair[r]))
        if ratio_r > 1 and sibling_fair[r] > 0 and ratio_r * multiplier >= ratio_s:
            return False
    return True


def victim_queue_allowed(
    *, table: QueueTable, reclaimer_queue: int, victim_queue: int, allocated: Matrix, request: Vector
) -> bool:
    """May jobs of `victim_queue` be reclaim victims at all (KAI's victim filter, on current allocations)?

    A reclaimer that would exceed its deserved quota may only take from a queue above its
    allocatable share. One within its quota may take from a queue above its quota in a resource the
    reclaimer asks for, or from one that is at (not under) its quota in every such resource.
    """
    mine, theirs = leveled(table, reclaimer_queue, victim_queue)
    if not less_equal(allocated[mine] + request, table.deserved[mine]):
        return not less_equal(allocated[theirs], allocatable_share(table, theirs))
    under = False
    for r in range(len(request)):
        deserved = float(table.deserved[theirs][r])
        if request[r] <= 0 or deserved == UNLIMITED:
            continue
        used = float(allocated[theirs][r])
        if used > deserved + EPS:
            return True
        if used < deserved - EPS:
            under = True
    return not under


def victim_queue_can_lose(
    *, table: QueueTable, reclaimer_queue: int, victim_queue: int, allocated: Matrix, request: Vector
) -> bool:
    """Could a valid scenario really evict (not just move) a victim of `victim_queue`?

    Rule 2 judges each lost victim with what its leveled queue holds before that victim goes; that
    only shrinks as victims are taken, and both strategies need it above a bound, so the first
    victim's check, on the current allocation, decides for all of them.
    """
    mine, theirs = leveled(table, reclaimer_queue, victim_queue)
    return (
        fits_strategy(
            table=table,
            reclaimer_queue=mine,
            victim_queue=theirs,
            allocated=allocated,
            request=request,
            victim_remaining=allocated[theirs],
        )
        is not None
    )


def reclaimable(
    *,
    table: QueueTable,
    reclaimer_queue: int,
    request: Vector,
    preemptible: bool,
    victims: Mapping[int, Sequence[Vector]],
    allocated: Matrix,
    allocated_np: Matrix,
    multiplier: float = 1.0,
) -> Verdict:
    """Whether taking `victims` (charges per victim job, by victim leaf queue) for the reclaimer is allowed."""
    multiplier = max(1.0, multiplier)
    names = table.names
    remaining: dict[int, Vector] = {}
    for victim_queue in sorted(victims):
        mine, theirs = leveled(table, reclaimer_queue, victim_queue)
        remaining.setdefault(theirs, allocated[theirs].copy())
        for charge in victims[victim_queue]:
            strategy = fits_strategy(
                table=table,
                reclaimer_queue=mine,
                victim_queue=theirs,
                allocated=allocated,
                request=request,
                victim_remaining=remaining[theirs],
            )
            if strategy is None:
                return Verdict(ok=False, reason=f"queue {names[theirs]} would fall below its fair share and its quota")
            for q in path(table.parents, victim_queue):
                remaining.setdefault(q, allocated[q].copy())
                remaining[q] = remaining[q] - charge
    for q in path(table.parents, reclaimer_queue)[::-1]:
        mine_after = remaining.get(q, allocated[q]) + request
        for sibling in sorted(remaining):
            if sibling == q or table.parents[sibling] != table.parents[q]:
                continue
            if not saturation_lower(
                reclaimer_allocated=mine_after,
                reclaimer_fair=table.fair_share[q],
                sibling_allocated=remaining[sibling],
                sibling_fair=table.fair_share[sibling],
                multiplier=multiplier,
            ):
                return Verdict(
                    ok=False,
                    reason=f"queue {names[q]} would be more saturated than queue {names[sibling]}",
                )
        if not preemptible and not less_equal(allocated_np[q] + request, table.deserved[q]):
            return Verdict(ok=False, reason=f"non-preemptible work would put queue {names[q]} over its quota")
    return Verdict(ok=True, reason="")


def queue_table(session: Session) -> QueueTable:
    queues = session.snapshot.queues
    return QueueTable(
        names=tuple(q.name for q in queues),
        parents=tuple(q.parent for q in queues),
        deserved=np.array([q.deserved for q in queues], dtype=np.float64).reshape(len(queues), 3),
        limit=np.array([q.limit for q in queues], dtype=np.float64).reshape(len(queues), 3),
        fair_share=session.fair_share,
    )


class ReclaimablePlugin:
    """Registers the reclaim gate, validator, victim filter and loss check (part of KAI's proportion plugin)."""

    name = "reclaimable"

    def on_session_open(self, session: Session) -> None:
        table = queue_table(session)
        multiplier = float(session.config.reclaimer_utilization_multiplier)

        def gate(s: Session, job: Job, request: Vector) -> bool:
            return can_reclaim(
                table=table,
                queue=job.queue,
                allocated=s.queue_allocated,
                allocated_np=s.queue_allocated_np,
                request=request,
                preemptible=job.preemptible,
            )

        def validate(s: Session, scenario: ReclaimScenario) -> str | None:
            verdict = reclaimable(
                table=table,
                reclaimer_queue=scenario.reclaimer.queue,
                request=scenario.request,
                preemptible=scenario.reclaimer.preemptible,
                victims=scenario.victims,
                allocated=scenario.allocated,
                allocated_np=scenario.allocated_np,
                multiplier=multiplier,
            )
            return None if verdict.ok else verdict.reason

        def victim_filter(s: Session, job: Job, request: Vector, victim_queue: int) -> bool:
            return victim_queue_allowed(
                table=table,
                reclaimer_queue=job.queue,
                victim_queue=victim_queue,
                allocated=s.queue_allocated,
                request=request,
            )

        def can_lose(s: Session, job: Job, request: Vector, victim_queue: int) -> bool:
            return victim_queue_can_lose(
                table=table,
                reclaimer_queue=job.queue,
                victim_queue=victim_queue,
                allocated=s.queue_allocated,
                request=request,
            )

        session.reclaim_gates.append(gate)
        session.reclaim_validators.append(validate)
        session.reclaim_victim_filters.append(victim_filter)
        session.reclaim_loss_checks.append(can_lose)
