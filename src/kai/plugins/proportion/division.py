"""Hierarchical fair-share division, reproducing KAI's proportion plugin number for number.

Why this exists: a queue's fair share decides queue order (who schedules next) and reclaim (who may
take resources back from whom). Users compare these numbers with KAI's, so this module follows the
arithmetic of KAI's `resource_division` package exactly, quirks included: whole units (floor) in the
over-quota rounds, a leftover pass in chunks of at most one unit, and priority tiers that are served
one after another. It is pure (no I/O, no clock) and deterministic, and it is called once per cycle.

One level (sibling queues sharing an amount), one resource:

1. Deserved phase. Every queue gets min(deserved, requestable). A deserved of -1 means "the whole
   amount being divided"; requestable is the request, capped by the limit unless the limit is -1.
   The amount left is the total minus everything given. If nothing is left (quotas over-subscribed)
   the division stops there, and the fair shares may add up to more than the total.
2. Over-quota phase. Queues are grouped by priority, highest first. For each group, while something
   is left:

   a. Rounds. A queue is unsatisfied while request > fair share and (limit is -1 or limit > fair
      share). At the start of a round, W is the sum of weights of the group's queues whose
      requestable exceeds their fair share. Every unsatisfied queue gets the share weight
      ``s = max(0, w/W + k * (w/W - usage))`` (usage: normalised historical usage, 0 without
      time-based fairshare) and the portion ``round amount * s / sum(s)``. A queue with weight 0
      takes nothing. If the queue's remaining requestable (requestable - fair share) fits in its
      portion, it receives all of it and is satisfied. Otherwise it receives floor(portion), whole
      units only, and the fractional rest (portion - given) is remembered for the leftover pass. A
      further round runs only if some queue wanted less than its portion; rounds also stop when
      nothing is left.
   b. Leftover pass. If something is left and queues of the group have remembered rests, they get
      min(1, left) each, one queue after another, at most once each, in this order:
      1. larger remembered rest first;
      2. older queue first (smaller `age_rank`);
      3. name, ascending.
      This happens before the next (lower) priority group gets anything. The pass does not look at
      requests or limits, so a queue can end up to one unit above its request (KAI does the same).
3. What is still left is returned as `remaining`.

Within a level the queues are visited in name order. KAI visits them in Go map order, which is random;
the visiting order only changes the last bits of floating-point sums, never the rules above.

The tree is divided top-down: the top-level queues (no parent) share the cluster total, then the
children of every queue share that queue's fair share, each resource independently.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Final

import msgspec
import numpy as np

from kai.core.resources import Vector

UNLIMITED: Final = -1.0  # deserved or limit value meaning "no quota" / "no limit"


class QueueShareInput(msgspec.Struct, frozen=True, kw_only=True):
    """One queue, one resource, at one level of the tree."""

    name: str
    priority: int  # higher priority group is served first in the over-quota phase
    age_rank: int  # 0 = oldest queue; tie-breaker "older first" (then name)
    deserved: float  # quota; -1 means unlimited (deserved = the whole amount being divided)
    limit: float  # -1 means no limit
    weight: float  # overQuotaWeight
    request: float  # allocated + pending requests of the queue's subtree
    usage: float = 0.0  # normalised historical usage (time-based fairshare); 0 when unused


class DivisionResult(msgspec.Struct, frozen=True, kw_only=True):
    """Fair share per queue name, and the part of the total that no queue took."""

    fair_share: dict[str, float]
    remaining: float


class QueueTreeNode(msgspec.Struct, frozen=True, kw_only=True):
    """One queue of the tree; every vector has one entry per divided resource (same length for all)."""

    name: str
    parent: str | None  # None (or "") for a top-level queue
    priority: int
    age_rank: int
    deserved: Vector
    limit: Vector
    weight: Vector
    request: Vector
    usage: Vector | None = None  # None: no historical usage (all zeros)


class _Siblings(msgspec.Struct, frozen=True):
    """Queues that share one amount, in name order, with their priority groups worked out once."""

    names: tuple[str, ...]
    age_rank: tuple[int, ...]
    groups: tuple[tuple[int, ...], ...]  # positions per priority, highest priority first


def divide_resource(*, total: float, queues: Sequence[QueueShareInput], k_value: float = 1.0) -> DivisionResult:
    """Divide `total` of one resource among sibling `queues` the way KAI does (see the module docstring).

    `k_value` weighs historical usage against the over-quota weight (KAI's `kValue`, default 1). It must be
    finite and non-negative; KAI's plugin turns a non-positive configured value into 0 before calling.
    """
    _check_k_value(k_value)
    ordered = sorted(queues, key=lambda q: q.name)
    names = [q.name for q in ordered]
    _check_unique(names)
    siblings = _siblings(names, [q.priority for q in ordered], [q.age_rank for q in ordered])
    fair, remaining = _divide(
        siblings,
        float(total),
        deserved=[float(q.deserved) for q in ordered],
        limit=[float(q.limit) for q in ordered],
        weight=[float(q.weight) for q in ordered],
        request=[float(q.request) for q in ordered],
        usage=[float(q.usage) for q in ordered],
        k_value=float(k_value),
    )
    return DivisionResult(fair_share=dict(zip(names, fair, strict=True)), remaining=remaining)


def divide_tree(*, total: Vector, queues: Sequence[QueueTreeNode], k_value: float = 1.0) -> dict[str, Vector]:
    """Fair share of every queue in the tree, one entry per resource.

    The top-level queues share `total`; then each queue's children share that queue's fair share, level
    by level, every resource independently (KAI's `setFairShareForQueues`). A queue that cannot be
    reached from the top (its parent is missing, or the parents form a cycle) is never divided, as in
    KAI, and gets zeros. Queue names must be unique and all vectors must have the length of `total`.
    """
    _check_k_value(k_value)
    total_vector = np.asarray(total, dtype=np.float64)
    if total_vector.ndim != 1:
        raise ValueError(f"total must be a 1-D vector, got shape {total_vector.shape}")
    n_resources = total_vector.shape[0]
    names = [q.name for q in queues]
    _check_unique(names)
    position = {name: i for i, name in enumerate(names)}
    zeros = np.zeros(n_resources, dtype=np.float64)
    deserved = _columns(queues, [q.deserved for q in queues], n_resources, "deserved")
    limit = _columns(queues, [q.limit for q in queues], n_resources, "limit")
    weight = _columns(queues, [q.weight for q in queues], n_resources, "weight")
    request = _columns(queues, [q.request for q in queues], n_resources, "request")
    usage = _columns(queues, [zeros if q.usage is None else q.usage for q in queues], n_resources, "usage")

    children: dict[str | None, list[int]] = {}
    for i, queue in enumerate(queues):
        children.setdefault(queue.parent or None, []).append(i)

    fair_columns = [[0.0] * len(queues) for _ in range(n_resources)]
    # Each entry: sibling positions (name order) and the amount per resource that they share.
    pending: list[tuple[list[int], list[float]]] = []
    if None in children:
        pending.append((sorted(children[None], key=names.__getitem__), total_vector.tolist()))
    while pending:
        members, amounts = pending.pop()
        siblings = _siblings(
            [names[i] for i in members],
            [queues[i].priority for i in members],
            [queues[i].age_rank for i in members],
        )
        for res in range(n_resources):
            fair, _ = _divide(
                siblings,
                amounts[res],
                deserved=[deserved[res][i] for i in members],
                limit=[limit[res][i] for i in members],
                weight=[weight[res][i] for i in members],
                request=[request[res][i] for i in members],
                usage=[usage[res][i] for i in members],
                k_value=float(k_value),
            )
            column = fair_columns[res]
            for pos, i in enumerate(members):
                column[i] = fair[pos]
        for i in members:
            kids = children.get(names[i])
            if kids:
                ordered_kids = sorted(kids, key=names.__getitem__)
                pending.append((ordered_kids, [fair_columns[res][i] for res in range(n_resources)]))

    result = np.empty((len(queues), n_resources), dtype=np.float64)
    for res in range(n_resources):
        result[:, res] = fair_columns[res]
    return {name: result[i] for name, i in position.items()}


def _divide(
    siblings: _Siblings,
    total: float,
    *,
    deserved: list[float],
    limit: list[float],
    weight: list[float],
    request: list[float],
    usage: list[float],
    k_value: float,
) -> tuple[list[float], float]:
    """Fair shares (in sibling order) and the amount left over, for one resource at one level."""
    requestable = [_requestable(r, cap) for r, cap in zip(request, limit, strict=True)]
    fair = [0.0] * len(requestable)

    # 1. Deserved phase.
    left = total
    for i, quota in enumerate(deserved):
        amount = deserved_portion(total=total, deserved=quota, limit=limit[i], request=request[i])
        fair[i] += amount
        left -= amount
    if left <= 0:
        return fair, 0.0

    # 2. Over-quota phase, priority group by priority group.
    for group in siblings.groups:
        if left <= 0:
            break
        left, rests = _over_quota_rounds(left, group, fair, requestable, request, limit, weight, usage, k_value)
        if left <= 0 or not rests:
            continue
        left = _leftover_pass(left, rests, fair, siblings)
    return fair, left


def _requestable(request: float, limit: float) -> float:
    return request if limit == UNLIMITED else min(limit, request)


def deserved_portion(*, total: float, deserved: float, limit: float, request: float) -> float:
    """What the deserved phase gives one queue of `total`: its quota (all of `total` for -1), at most
    what it can request (its request, capped by its limit)."""
    return min(total if deserved == UNLIMITED else deserved, _requestable(request, limit))


def _over_quota_rounds(
    left: float,
    group: tuple[int, ...],
    fair: list[float],
    requestable: list[float],
    request: list[float],
    limit: list[float],
    weight: list[float],
    usage: list[float],
    k_value: float,
) -> tuple[float, dict[int, float]]:
    """Weighted rounds for one priority group; updates `fair`, returns what is left and the rests."""
    rests: dict[int, float] = {}
    share = dict.fromkeys(group, 0.0)
    while True:
        round_amount = left
        weight_sum = 0.0
        for i in group:
            if requestable[i] > fair[i]:
                weight_sum += weight[i]
        if weight_sum == 0:
            break
        unsatisfied = [i for i in group if request[i] > fair[i] and (limit[i] == UNLIMITED or limit[i] > fair[i])]
        share_sum = 0.0
        for i in unsatisfied:
            normalised = weight[i] / weight_sum
            share[i] = max(0.0, normalised + k_value * (normalised - usage[i]))
            share_sum += share[i]
        if share_sum == 0:
            break

        another_round = False
        for i in unsatisfied:
            if left == 0:
                break
            wanted = requestable[i] - fair[i]  # positive: the queue is unsatisfied
            if weight[i] == 0:
                continue
            portion = round_amount * (share[i] / share_sum)
            if wanted <= portion:
                give = wanted
                rests.pop(i, None)
            else:
                give = max(0.0, float(math.floor(portion)))  # whole units only
                if portion - give > 0:
                    rests[i] = portion - give
            if give == 0:
                continue
            fair[i] += give
            left -= give
            another_round = another_round or wanted < portion
        if not another_round or left == 0:
            break
    return left, rests


def _leftover_pass(left: float, rests: dict[int, float], fair: list[float], siblings: _Siblings) -> float:
    """Hand out what floor() held back, at most one unit per queue, largest rest first."""
    order = sorted(rests, key=lambda i: (-rests[i], siblings.age_rank[i], siblings.names[i]))
    for i in order:
        if left == 0:
            break
        give = min(1.0, left)
        fair[i] += give
        left -= give
    return left


def _siblings(names: list[str], priorities: list[int], age_ranks: list[int]) -> _Siblings:
    """Group sibling positions by priority (highest first); `names` must already be in name order."""
    by_priority: dict[int, list[int]] = {}
    for i, priority in enumerate(priorities):
        by_priority.setdefault(priority, []).append(i)
    groups = tuple(tuple(by_priority[p]) for p in sorted(by_priority, reverse=True))
    return _Siblings(names=tuple(names), age_rank=tuple(age_ranks), groups=groups)


def _columns(queues: Sequence[QueueTreeNode], vectors: list[Vector], n_resources: int, field: str) -> list[list[float]]:
    """One list of floats per resource, indexed like `queues`; rejects vectors of the wrong length."""
    if not vectors:
        return [[] for _ in range(n_resources)]
    try:
        matrix = np.asarray(vectors, dtype=np.float64)
    except ValueError:  # vectors of different lengths
        matrix = np.empty(0)
    if matrix.shape != (len(vectors), n_resources):
        for queue, vector in zip(queues, vectors, strict=True):
            if np.shape(vector) != (n_resources,):
                raise ValueError(
                    f"queue {queue.name!r}: {field} has shape {np.shape(vector)}, expected ({n_resources},)"
                )
    columns: list[list[float]] = matrix.T.tolist()
    return columns


def _check_unique(names: list[str]) -> None:
    if len(set(names)) != len(names):
        repeated = sorted(name for name, count in Counter(names).items() if count > 1)
        raise ValueError(f"queue names must be unique, repeated: {repeated}")


def _check_k_value(k_value: float) -> None:
    if not math.isfinite(k_value) or k_value < 0:
        raise ValueError(f"k_value must be finite and >= 0, got {k_value}")
