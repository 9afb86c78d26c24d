"""KAI's reclaim rules as a table: strategies at the level where ancestries meet, saturation, quotas."""

from __future__ import annotations

import numpy as np
import pytest

from kai.core.queue_tree import leveled_queues
from kai.plugins.proportion import reclaimable as rc

U = -1.0


def table(
    *, parents: tuple[int, ...], deserved: list[float], fair: list[float], limit: list[float] | None = None
) -> rc.QueueTable:
    """A GPU-only table: cpu and memory are unlimited everywhere, so only GPUs decide."""
    n = len(parents)

    def gpu_only(values: list[float]) -> np.ndarray:
        out = np.full((n, 3), U)
        out[:, 0] = values
        return out

    fair_m = np.zeros((n, 3))
    fair_m[:, 0] = fair
    fair_m[:, 1:] = U
    return rc.QueueTable(
        names=tuple(f"q{i}" for i in range(n)),
        parents=parents,
        deserved=gpu_only(deserved),
        limit=gpu_only(limit if limit is not None else [U] * n),
        fair_share=fair_m,
    )


def alloc(values: list[float]) -> np.ndarray:
    out = np.zeros((len(values), 3))
    out[:, 0] = values
    return out


def gpus(value: float) -> np.ndarray:
    return np.array([value, 0.0, 0.0])


# two top-level queues q0 (reclaimer) and q1 (victim), 8 GPUs
CASES = [
    # (name, deserved, fair, allocated, request, victim charges from q1, multiplier, ok)
    ("victim over fair share: maintain fair share", [0, 0], [4, 4], [0, 8], 1, [1], 1.0, True),
    ("victim at fair share, reclaimer over quota: refused", [0, 0], [4, 4], [0, 4], 1, [1], 1.0, False),
    (
        "victim at fair share but over quota, reclaimer within quota: guarantee quota",
        [2, 0],
        [2, 6],
        [0, 6],
        2,
        [2],
        1.0,
        True,
    ),
    (
        "victim over fair share when each job is taken: several victims",
        [0, 0],
        [4, 4],
        [0, 8],
        2,
        [1, 1],
        1.0,
        True,
    ),
    (
        "second victim taken when the victim already fell to its fair share: refused",
        [0, 0],
        [4, 4],
        [0, 5],
        2,
        [1, 1],
        1.0,
        False,
    ),
    ("reclaimer would be as saturated as the victim: refused", [0, 0], [2, 4], [2, 6], 1, [1], 1.0, False),
    ("reclaimer stays less saturated than the victim", [0, 0], [2, 4], [2, 8], 1, [1], 1.0, True),
    ("the multiplier refuses what saturation alone allows", [0, 0], [2, 4], [2, 8], 1, [1], 1.5, False),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_reclaim_strategies(
    case: tuple[str, list[float], list[float], list[float], float, list[float], float, bool],
) -> None:
    _, deserved, fair, allocated, request, charges, multiplier, ok = case
    verdict = rc.reclaimable(
        table=table(parents=(-1, -1), deserved=deserved, fair=fair),
        reclaimer_queue=0,
        request=gpus(request),
        preemptible=True,
        victims={1: [gpus(c) for c in charges]},
        allocated=alloc(allocated),
        allocated_np=alloc([0, 0]),
        multiplier=multiplier,
    )
    assert verdict.ok is ok, verdict.reason


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_loss_check_never_rejects_an_accepted_scenario(
    case: tuple[str, list[float], list[float], list[float], float, list[float], float, bool],
) -> None:
    """The loss check is a necessary condition: a queue that loses victims in an accepted scenario passes it."""
    _, deserved, fair, allocated, request, _charges, _multiplier, ok = case
    can_lose = rc.victim_queue_can_lose(
        table=table(parents=(-1, -1), deserved=deserved, fair=fair),
        reclaimer_queue=0,
        victim_queue=1,
        allocated=alloc(allocated),
        request=gpus(request),
    )
    assert can_lose or not ok


def test_departments_with_unlimited_quota_lose_nothing() -> None:
    """Departments with quota -1 (as in the Ray guide's queues) each deserve what they hold: no victim of
    another department can ever be lost, whatever it holds, so a reclaim search between them is hopeless."""
    # department d0 (0) with team 2, department d1 (1) with team 3; d1 holds all 16 GPUs
    t = table(parents=(-1, -1, 0, 1), deserved=[U, U, U, U], fair=[16, 16, 16, 16])
    assert rc.victim_queue_allowed(
        table=t, reclaimer_queue=2, victim_queue=3, allocated=alloc([0, 16, 0, 16]), request=gpus(1)
    )
    assert not rc.victim_queue_can_lose(
        table=t, reclaimer_queue=2, victim_queue=3, allocated=alloc([0, 16, 0, 16]), request=gpus(1)
    )


def test_saturation_blocks_reclaiming_back_and_forth() -> None:
    """A reclaimer over its fair share may not become at least as saturated as the queue it takes from."""
    assert rc.saturation_lower(
        reclaimer_allocated=gpus(5),
        reclaimer_fair=gpus(4),
        sibling_allocated=gpus(7),
        sibling_fair=gpus(4),
        multiplier=1.0,
    )
    assert not rc.saturation_lower(
        reclaimer_allocated=gpus(5),
        reclaimer_fair=gpus(4),
        sibling_allocated=gpus(5),
        sibling_fair=gpus(4),
        multiplier=1.0,
    )
    # the multiplier makes the reclaimer count as more saturated than it is
    assert not rc.saturation_lower(
        reclaimer_allocated=gpus(5),
        reclaimer_fair=gpus(4),
        sibling_allocated=gpus(7),
        sibling_fair=gpus(4),
        multiplier=1.5,
    )
    # within its fair share a reclaimer is never blocked by saturation
    assert rc.saturation_lower(
        reclaimer_allocated=gpus(4),
        reclaimer_fair=gpus(4),
        sibling_allocated=gpus(1),
        sibling_fair=gpus(4),
        multiplier=3.0,
    )


def test_compared_where_ancestries_meet() -> None:
    """dept-a {q2, q3}, dept-b {q4}: q2 vs q3 compare as siblings, q2 vs q4 as departments."""
    parents = (-1, -1, 0, 0, 1)
    assert leveled_queues(parents, 2, 3) == (2, 3)
    assert leveled_queues(parents, 2, 4) == (0, 1)
    # q4's department is over its fair share even though q4 itself is not over its own:
    # the department level decides
    t = table(parents=parents, deserved=[0, 0, 0, 0, 0], fair=[4, 4, 2, 2, 8])
    verdict = rc.reclaimable(
        table=t,
        reclaimer_queue=2,
        request=gpus(1),
        preemptible=True,
        victims={4: [gpus(1)]},
        allocated=alloc([0, 8, 0, 0, 8]),
        allocated_np=alloc([0, 0, 0, 0, 0]),
    )
    assert verdict.ok
    # dept-b at its fair share: refused although q4 sits above its own
    t = table(parents=parents, deserved=[0, 0, 0, 0, 0], fair=[4, 4, 2, 2, 2])
    verdict = rc.reclaimable(
        table=t,
        reclaimer_queue=2,
        request=gpus(1),
        preemptible=True,
        victims={4: [gpus(1)]},
        allocated=alloc([0, 4, 0, 0, 4]),
        allocated_np=alloc([0, 0, 0, 0, 0]),
    )
    assert not verdict.ok


@pytest.mark.parametrize(
    ("allocated", "allocated_np", "preemptible", "ok"),
    [
        (0, 0, True, True),  # 0 + 2 <= fair share 2
        (1, 0, True, False),  # 1 + 2 > fair share 2
        (0, 0, False, False),  # non-preemptible: 0 + 2 > quota 1
    ],
)
def test_can_reclaim(allocated: float, allocated_np: float, preemptible: bool, ok: bool) -> None:
    t = table(parents=(-1, -1), deserved=[1, 0], fair=[2, 6])
    assert (
        rc.can_reclaim(
            table=t,
            queue=0,
            allocated=alloc([allocated, 6]),
            allocated_np=alloc([allocated_np, 0]),
            request=gpus(2),
            preemptible=preemptible,
        )
        is ok
    )


def test_non_preemptible_reclaimer_stays_within_quota_at_every_level() -> None:
    t = table(parents=(-1, 0, -1), deserved=[1, 4, 0], fair=[4, 4, 4])
    verdict = rc.reclaimable(
        table=t,
        reclaimer_queue=1,
        request=gpus(2),
        preemptible=False,
        victims={2: [gpus(2)]},
        allocated=alloc([0, 0, 8]),
        allocated_np=alloc([0, 0, 0]),
    )
    assert not verdict.ok and "q0" in verdict.reason
