"""The victim search shared by preempt, reclaim and consolidation (KAI's JobSolver).

Victim units (see `kai.actions.common.victims`) are added one at a time, in victim order. After
each addition, inside the statement and behind a checkpoint, the scenario is simulated: the
victims so far are evicted, the preemptor's attempt is placed (pipelined onto the resources being
released where needed), then every victim is re-placed if it can be: back on its own node (it was
not needed and stays), or elsewhere (it is moved: evicted, and pipelined on its new node). The
action's validator judges the scenario; the first valid one wins. It is then replayed cleanly so
that victims which could stay are not evicted at all, and every eviction carries its message.

The search stays cheap: units on nodes the preemptor cannot use are skipped, a placement is only
simulated when the nodes the preemptor can use hold enough GPUs in total (idle plus releasing),
and after a failed placement only when the newest victim frees a node that fits a preemptor pod.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from kai.actions.common.placement import place_task, place_tasks
from kai.actions.common.victims import VictimUnit
from kai.core import fit as fit_lib
from kai.core.model import BoolVector, Job, Task
from kai.core.resources import GPU
from kai.core.session import Session
from kai.core.statement import Statement

EPS = 1e-9


@dataclass(frozen=True, kw_only=True, slots=True)
class Scenario:
    """One simulated outcome: the victims evicted for good, and the victims moved (task -> new node)."""

    preemptor: Job
    tasks: tuple[int, ...]
    lost: tuple[VictimUnit, ...]
    moved: dict[int, int] = field(default_factory=dict)

    @property
    def lost_tasks(self) -> list[int]:
        return [t for unit in self.lost for t in unit.tasks]


Validator = Callable[[Scenario], bool]
Messenger = Callable[[Scenario, int], str]  # (scenario, victim task) -> eviction message


def _mask(session: Session, tasks: Sequence[Task]) -> BoolVector:
    mask = np.zeros(session.snapshot.nodes.count, dtype=bool)
    seen: set[int] = set()
    for task in tasks:
        if task.constraint in seen:
            continue
        seen.add(task.constraint)
        mask |= fit_lib.predicate_mask(session, task)
    return mask


def _free_gpus(session: Session, mask: BoolVector) -> float:
    """GPUs idle or being released on the nodes the preemptor may use."""
    return float(
        np.maximum(session.idle[mask, GPU], 0.0).sum() + np.maximum(session.releasing[mask, GPU], 0.0).sum()
    )


def _fits_on(session: Session, nodes: list[int], requests: np.ndarray) -> bool:
    """Does some preemptor pod fit on one of these nodes once everything releasing is gone?"""
    future = session.idle[nodes] + session.releasing[nodes]
    return bool(np.any(np.all(future[:, None, :] >= requests[None, :, :] - EPS, axis=2)))


class _Search:
    def __init__(
        self, session: Session, stmt: Statement, *, preemptor: Job, tasks: Sequence[Task], replace_victims: bool
    ) -> None:
        self.session = session
        self.stmt = stmt
        self.preemptor = preemptor
        self.tasks = list(tasks)
        self.replace_victims = replace_victims

    def capacity_ok(self) -> bool:
        s = self.session
        request = s.job_request(self.tasks)
        return all(check(s, self.preemptor, request) is None for check in s.capacity_checks)

    def place_preemptor(self) -> bool:
        s = self.session
        if place_tasks(s, self.stmt, self.preemptor, self.tasks) is not None:
            return False
        return s.gang_satisfied(self.preemptor)

    def replace(self, units: Sequence[VictimUnit]) -> tuple[list[VictimUnit], dict[int, int], set[int]]:
        """Re-place victims unit by unit: (units lost, moved task -> node, tasks that stay)."""
        s, stmt = self.session, self.stmt
        lost: list[VictimUnit] = []
        moved: dict[int, int] = {}
        stays: set[int] = set()
        for unit in units:
            if not self.replace_victims:
                lost.append(unit)
                continue
            victim = s.snapshot.jobs[unit.job]
            charge = s.job_request([s.task(t) for t in unit.tasks])
            if any(check(s, victim, charge) is not None for check in s.capacity_checks):
                lost.append(unit)
                continue
            cp = stmt.checkpoint()
            placed: dict[int, int] = {}
            for t in unit.tasks:
                task = s.task(t)
                home = int(s.node[t])
                if not task.is_shared_gpu and bool(np.all(s.idle[home] + s.releasing[home] >= task.request - EPS)):
                    stmt.place(task, home, pipelined=True, choice=None)
                    placed[t] = home
                    continue
                fit = fit_lib.find_fit(s, task)
                if fit.later[home]:
                    stmt.place(task, home, pipelined=True, choice=fit.choice(home))
                elif place_task(s, stmt, task) is not None:
                    break
                placed[t] = int(s.node[t])
            else:
                for t, node in placed.items():
                    if node == int(s.snapshot.tasks[t].node):
                        stays.add(t)
                    else:
                        moved[t] = node
                continue
            stmt.rollback(cp)
            lost.append(unit)
        return lost, moved, stays


def solve(
    session: Session,
    stmt: Statement,
    *,
    preemptor: Job,
    tasks: Sequence[Task],
    units: Iterable[VictimUnit],
    validate: Validator,
    message: Messenger,
    replace_victims: bool = True,
    max_victim_tasks: int = 0,
) -> Scenario | None:
    """Find the first valid scenario and leave it applied in `stmt` (uncommitted); None leaves `stmt` as it was."""
    search = _Search(session, stmt, preemptor=preemptor, tasks=tasks, replace_victims=replace_victims)
    start = stmt.checkpoint()
    mask = _mask(session, tasks)
    requests = np.array([t.request for t in tasks], dtype=np.float64)
    need_gpus = float(requests[:, GPU].sum()) if len(tasks) else 0.0
    room = _free_gpus(session, mask)
    taken: list[VictimUnit] = []
    victim_tasks = 0
    placement_failed = False
    for unit in units:
        nodes = sorted({int(session.node[t]) for t in unit.tasks})
        if not mask[nodes].any():
            continue
        if max_victim_tasks and victim_tasks + len(unit.tasks) > max_victim_tasks:
            break
        for t in unit.tasks:
            stmt.evict(session.task(t), preemptor=preemptor.key, message="")
        taken.append(unit)
        victim_tasks += len(unit.tasks)
        if room < need_gpus - EPS:
            if any(session.task(t).is_shared_gpu for t in unit.tasks):
                # a shared device frees a whole GPU only once all its holders leave: recount
                room = _free_gpus(session, mask)
            else:
                room += sum(float(session.task(t).request[GPU]) for t in unit.tasks if mask[int(session.node[t])])
            if room < need_gpus - EPS:
                continue
        if placement_failed and not _fits_on(session, nodes, requests):
            continue
        cp = stmt.checkpoint()
        if not search.capacity_ok():
            continue
        if not search.place_preemptor():
            stmt.rollback(cp)
            placement_failed = True
            continue
        lost, moved, stays = search.replace(taken)
        scenario = Scenario(preemptor=preemptor, tasks=tuple(t.index for t in tasks), lost=tuple(lost), moved=moved)
        if validate(scenario):
            return _replay(search, start, taken, scenario, stays, validate, message)
        stmt.rollback(cp)
    stmt.rollback(start)
    return None


def _replay(
    search: _Search,
    start: int,
    taken: list[VictimUnit],
    found: Scenario,
    stays: set[int],
    validate: Validator,
    message: Messenger,
) -> Scenario | None:
    """Apply the scenario again with messages, leaving out the victims that could stay where they run."""
    session, stmt = search.session, search.stmt
    stmt.rollback(start)
    if stays:
        cp = stmt.checkpoint()
        kept = [VictimUnit(job=u.job, tasks=tuple(t for t in u.tasks if t not in stays), whole=u.whole) for u in taken]
        kept = [u for u in kept if u.tasks]
        scenario = Scenario(preemptor=found.preemptor, tasks=found.tasks, lost=found.lost, moved=found.moved)
        if _apply(search, kept, scenario, message) and validate(scenario):
            return scenario
        stmt.rollback(cp)
    moved = dict(found.moved)
    moved.update({t: int(session.snapshot.tasks[t].node) for t in stays})
    scenario = Scenario(preemptor=found.preemptor, tasks=found.tasks, lost=found.lost, moved=moved)
    if _apply(search, taken, scenario, message):
        return scenario
    stmt.rollback(start)
    return None


def _apply(search: _Search, units: Sequence[VictimUnit], scenario: Scenario, message: Messenger) -> bool:
    session, stmt = search.session, search.stmt
    for unit in units:
        for t in unit.tasks:
            stmt.evict(session.task(t), preemptor=scenario.preemptor.key, message=message(scenario, t))
    if not search.capacity_ok() or not search.place_preemptor():
        return False
    for t in (t for unit in units for t in unit.tasks if t in scenario.moved):
        task = session.task(t)
        node = scenario.moved[t]
        fit = fit_lib.find_fit(session, task)
        if not fit.later[node]:
            return False
        stmt.place(task, node, pipelined=True, choice=fit.choice(node))
    return True
