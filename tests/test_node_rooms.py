"""Property: what the victim search keeps per session about the nodes (`kai.actions.common.rooms`) is
what it would compute afresh, bit for bit, whenever it is read: each node's free room, the nodes a
preemptor may use, how many pods of each shape every node holds and their totals, the cluster's free
room as an exact sum with the float sum made afresh inside its interval, the shared devices counted,
and `could_free_enough`'s answer; and what placement keeps (whether every node's free GPUs are
whole). Checked at random moments among random evictions, placements, rollbacks and commits (so kept
values lag by one change or many), on the reclaim benchmark's cluster, on drawn clusters (cordoned
nodes, node selectors, nodes being released) and with pods sharing GPUs. Deterministic (seeded
generators, derandomized examples).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from fractions import Fraction

import numpy as np
import pytest
from benchmarks.clusters import reclaim_cluster
from hypothesis import given
from hypothesis import strategies as st

from kai.actions.common import placement
from kai.actions.common import rooms as rooms_lib
from kai.actions.common.bounds import SLACK, could_free_enough
from kai.actions.common.solver import _Scan, _shapes
from kai.core import fit as fit_lib
from kai.core.model import Task, TaskStatus
from kai.core.resources import GPU, QUEUE_RESOURCES
from kai.core.session import SchedulerConfig, Session
from kai.core.statement import Statement
from kai.scheduler.cycle import open_session
from tests.test_gang_placement import DRAWN, _snapshot, clusters, shapes
from tests.test_statement_rollback import _shared_gpu_snapshot, evict_or_place

PLACED = (int(TaskStatus.RUNNING), int(TaskStatus.ALLOCATED))
COLUMNS = list(QUEUE_RESOURCES)


def _could_free_enough_afresh(session: Session, tasks: Sequence[Task], losing_queues: Iterable[int]) -> bool:
    """`could_free_enough` as it was before anything was kept: every node read on every call."""
    need = np.sum([t.request[COLUMNS] for t in tasks], axis=0)
    if not np.any(need > SLACK):
        return True
    free = np.maximum(session.idle[:, COLUMNS] + session.releasing[:, COLUMNS], 0.0).sum(axis=0)
    losing = list(losing_queues)
    if losing:
        free = free + session.queue_allocated[losing].sum(axis=0)
    free[0] += sum(len(devices) for devices in session.devices.values())
    return bool(np.all(free + SLACK >= need))


def _mask_afresh(session: Session, tasks: Sequence[Task]) -> np.ndarray:
    mask = np.zeros(session.snapshot.nodes.count, dtype=bool)
    for task in tasks:
        mask |= fit_lib.predicate_mask(session, task)
    return mask


def _groups(session: Session, rng: random.Random) -> list[list[Task]]:
    """Preemptors to read the kept values for: pending jobs' next pods, and a few pods of mixed shapes."""
    out = []
    for job in session.snapshot.jobs:
        tasks = session.tasks_to_allocate(job)
        if tasks:
            out.append(tasks)
    every = list(session.snapshot.tasks)
    out += [rng.sample(every, min(len(every), k)) for k in (1, 3)]
    return out[:6]


def _check(session: Session, groups: list[list[Task]], rng: random.Random) -> None:
    logged = np.bincount(np.array(session.node_log, dtype=np.int64), minlength=session.snapshot.nodes.count)
    assert logged.tolist() == session.node_version.tolist()  # every change logged, once
    rooms = rooms_lib.node_rooms(session)
    queues = len(session.snapshot.queues)
    for tasks in rng.sample(groups, rng.randint(1, len(groups))):  # some kept values lag behind others
        losing = rng.sample(range(queues), rng.randint(0, queues))
        assert could_free_enough(session, tasks, losing) == _could_free_enough_afresh(session, tasks, losing)
        scan = _Scan(session, tasks)
        fresh = session.idle + session.releasing
        assert scan.base.tobytes() == fresh.tobytes()
        mask = _mask_afresh(session, tasks)
        assert scan.mask.tobytes() == mask.tobytes()
        cap = np.where(mask[None, :], rooms_lib.capacity(fresh, _shapes(tasks)[0]), 0.0)
        assert scan.cap_base.tobytes() == cap.tobytes()
        assert scan.base_total.tobytes() == cap.sum(axis=1).tobytes()
    free = rooms.free_room(session)
    per_node = np.maximum(session.idle[:, COLUMNS] + session.releasing[:, COLUMNS], 0.0)
    exact = [sum(Fraction(v) for v in per_node[:, c].tolist()) * 2**1074 for c in range(len(COLUMNS))]
    assert free.exact == exact
    bounds = free.bounds()
    assert bounds is not None
    for low, high, total in zip(*bounds, per_node.sum(axis=0).tolist(), strict=True):
        assert low <= total <= high
    assert free.devices == sum(len(devices) for devices in session.devices.values())
    assert placement._whole_free_gpus(session) == placement._whole(session.free(GPU))


def _operate(session: Session, seed: int, steps: int) -> int:
    """Random evictions and placements, rolled back or committed at random, with the kept values read
    and checked at random moments; returns how many checks were made."""
    rng = random.Random(seed)
    groups = _groups(session, rng)
    stmt = Statement(session, action="reclaim")
    checked = 0
    for _ in range(steps):
        move = rng.random()
        if move < 0.7:
            evict_or_place(session, stmt, rng, evict=move < 0.35, placed=PLACED)
        elif move < 0.85:
            stmt.rollback(rng.randrange(stmt.checkpoint() + 1))
        else:
            stmt.commit()
            stmt = Statement(session, action="reclaim")
        if rng.random() < 0.3:
            _check(session, groups, rng)
            checked += 1
    _check(session, groups, rng)
    return checked + 1


@pytest.mark.parametrize("few", [rooms_lib._FEW, 0])  # 0: pod counts always made again with numpy
def test_kept_rooms_match_fresh_ones_on_the_reclaim_cluster(few: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rooms_lib, "_FEW", few)
    session = open_session(reclaim_cluster(nodes=40, seed=3).built().snapshot, SchedulerConfig())
    assert _operate(session, seed=7, steps=300) > 50


def test_kept_rooms_match_fresh_ones_with_a_plugin_predicate() -> None:
    """A plugin predicate may read the session: the nodes it admits are then found afresh each time."""
    session = open_session(reclaim_cluster(nodes=40, seed=3).built().snapshot, SchedulerConfig())
    session.predicates.append(lambda s, task: s.idle[:, 0] > 2000.0 + 1000.0 * (task.index % 3))
    assert _operate(session, seed=9, steps=200) > 30


def test_pod_counts_too_large_to_add_up_exactly_are_summed_afresh() -> None:
    """A shape asking almost nothing fits more pods than add up exactly: the totals are made afresh."""
    session = open_session(reclaim_cluster(nodes=40, seed=3).built().snapshot, SchedulerConfig())
    rooms = rooms_lib.node_rooms(session)
    tasks = [session.snapshot.tasks[0]]
    shapes = np.zeros((2, session.idle.shape[1]))
    shapes[0, 1] = 1.0  # one byte of memory
    shapes[1, 0] = 1000.0
    rng = random.Random(1)
    stmt = Statement(session, action="reclaim")
    for _ in range(30):
        placed = [t for t in session.snapshot.tasks if session.status[t.index] in PLACED]
        stmt.evict(rng.choice(placed), preemptor=None, message="")
        if rng.random() < 0.3:
            stmt.rollback(rng.randrange(stmt.checkpoint() + 1))
        cap, total = rooms.counts(session, shapes, tasks)
        fresh = rooms_lib.capacity(session.idle + session.releasing, shapes)
        fresh = np.where(_mask_afresh(session, tasks)[None, :], fresh, 0.0)
        assert cap.max() > 2.0**32
        assert cap.tobytes() == fresh.tobytes() and total.tobytes() == fresh.sum(axis=1).tobytes()


def test_kept_rooms_match_fresh_ones_with_shared_gpus() -> None:
    session = open_session(_shared_gpu_snapshot(), SchedulerConfig())
    assert _operate(session, seed=17, steps=300) > 50


@DRAWN
@given(nodes=clusters, gang=st.lists(shapes, min_size=1, max_size=6), selector=st.booleans(), seed=st.integers(0, 99))
def test_kept_rooms_match_fresh_ones_on_drawn_clusters(
    nodes: list[tuple[int, int, float, bool, int]], gang: list[tuple[float, float]], selector: bool, seed: int
) -> None:
    session = open_session(_snapshot(nodes, gang, selector), SchedulerConfig())
    _operate(session, seed=seed, steps=40)


def test_a_room_still_read_is_not_changed_under_its_reader() -> None:
    """The kept arrays are shared with the search that read them: brought up to date while it still
    holds them, they are copied first."""
    session = open_session(reclaim_cluster(nodes=40, seed=3).built().snapshot, SchedulerConfig())
    job = next(j for j in session.snapshot.jobs if session.tasks_to_allocate(j))
    tasks = session.tasks_to_allocate(job)
    scan = _Scan(session, tasks)
    base, cap = scan.base.copy(), scan.cap_base.copy()
    stmt = Statement(session, action="reclaim")
    placed = [t for t in session.snapshot.tasks if session.status[t.index] in PLACED]
    for task in placed[:: max(1, len(placed) // 10)]:
        stmt.evict(task, preemptor=None, message="")
    stmt.commit()
    again = _Scan(session, tasks)
    assert scan.base.tobytes() == base.tobytes() and scan.cap_base.tobytes() == cap.tobytes()
    assert again.base.tobytes() == (session.idle + session.releasing).tobytes()
    assert again.base.tobytes() != base.tobytes()
    del scan
    third = _Scan(session, tasks)
    assert third.base is again.base  # no change since: the same array


@DRAWN
@given(
    values=st.lists(
        st.one_of(
            st.floats(0.0, 1e6, allow_nan=False),
            st.sampled_from([0.1, 0.3, 1e-9, 2.0**-40, 1e15, 123456.789]),
            st.integers(0, 2**40).map(float),
        ),
        min_size=1,
        max_size=3000,
    ),
    seed=st.integers(0, 9),
)
def test_any_float_sum_lies_around_the_exact_sum(values: list[float], seed: int) -> None:
    """The interval `around` gives holds the float sums numpy makes, in the orders it makes them (a column
    of an [n, 3] array, a contiguous vector), and sums in a shuffled order."""
    rng = random.Random(seed)
    total = sum(rooms_lib.exact(v) for v in values)
    assert total == sum(Fraction(v) for v in values) * 2**1074 == rooms_lib._exact_sum(np.array(values))
    low, high = rooms_lib.around(total, len(values))
    column = np.zeros((len(values), 3))
    column[:, 1] = values
    shuffled = values[:]
    rng.shuffle(shuffled)
    running = 0.0
    for v in shuffled:
        running += v
    for fresh in (float(column.sum(axis=0)[1]), float(np.sum(np.array(values))), running):
        assert low <= fresh <= high


def test_the_bound_sums_afresh_when_its_interval_is_undecided(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where both ends of the interval disagree, the answer is the fresh sum's."""
    session = open_session(reclaim_cluster(nodes=40, seed=3).built().snapshot, SchedulerConfig())
    monkeypatch.setattr(rooms_lib.FreeRoom, "bounds", lambda self: ([0.0] * 3, [1e300] * 3))
    rng = random.Random(3)
    for tasks in _groups(session, rng):
        for losing in ([], [0], list(range(len(session.snapshot.queues)))):
            assert could_free_enough(session, tasks, losing) == _could_free_enough_afresh(session, tasks, losing)
