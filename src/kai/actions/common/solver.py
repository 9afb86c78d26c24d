"""The victim search shared by preempt, reclaim and consolidation (KAI's JobSolver).

Victim units (see `kai.actions.common.victims`) are added one at a time, in victim order, and
only counted at first: per node, what the victims taken so far would free, and how many preemptor
pods (per pod shape) each node could then hold. A scenario is simulated, inside the statement,
only when the newest victim makes room for one more preemptor pod and the nodes could then hold
every pod: first with the victims on one node of the newest victim at a time, then with every
victim on a node where victims make room (as KAI tries the latest victim's nodes first). With the
victim order as arrays (`OrderedVictims`), only the steps that can make room and the steps on the
nodes where they do are counted; the others could never start a simulation nor be simulated.

A simulation is KAI's virtual allocation: the victims are evicted, then the preemptor and the
victim jobs are placed together in the session's job order, each victim job getting back (in task
order, all or none) the pods its gang minimum needs, or one pod if it only lost surplus pods; its
other evicted pods are lost. Victims on nodes the preemptor does not use are then left out and the
scenario simulated again. The action's validator judges what is really lost; the first valid
scenario wins and stays applied; if some victims could stay where they run, it is simulated again
without them (simulations are deterministic) and kept if still valid. Its evictions get their
messages once the outcome is known. Between scenarios the statement is back where it started, so a
try that failed earlier in the same search (the same victims tried, or the same victims judged) would
fail again: it is charged to the budget what it cost, not simulated again (`_Search.recharged`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import msgspec
import numpy as np
import numpy.typing as npt

from kai.actions.common import searches
from kai.actions.common.job_order import JobsByQueue
from kai.actions.common.placement import place_task, place_tasks
from kai.actions.common.rooms import capacity as _capacity
from kai.actions.common.rooms import node_rooms
from kai.actions.common.victim_steps import OrderedVictims, StepBlock, StepKey
from kai.actions.common.victims import VictimUnit
from kai.actions.common.victims import frees as victim_frees
from kai.core.model import BoolVector, Job, Task
from kai.core.resources import Vector
from kai.core.session import Session
from kai.core.statement import Statement

EPS = 1e-9


class Scenario(msgspec.Struct, frozen=True, kw_only=True):
    """One simulated outcome: the victims evicted for good, and the victims moved (task -> new node)."""

    preemptor: Job
    tasks: tuple[int, ...]
    lost: tuple[VictimUnit, ...]
    moved: dict[int, int] = msgspec.field(default_factory=dict)


Validator = Callable[[Scenario], bool]
UnitsKey = tuple[tuple[int, tuple[int, ...], bool], ...]  # victim units as (job, tasks, whole), in order
Messenger = Callable[[Scenario, int], str]  # (scenario, victim task) -> eviction message


def _shapes(tasks: Sequence[Task]) -> tuple[np.ndarray, np.ndarray]:
    """The preemptor's distinct pod requests [S, R] and how many pods ask for each [S]."""
    counts: dict[tuple[float, ...], int] = {}
    for t in tasks:
        shape = tuple(t.request.tolist())
        counts[shape] = counts.get(shape, 0) + 1
    shapes = sorted(counts)  # as np.unique(axis=0) orders them, at a fraction of its cost
    return np.array(shapes, dtype=np.float64).reshape(len(shapes), -1), np.array([counts[s] for s in shapes])


class _Search:
    def __init__(self, session: Session, stmt: Statement, *, preemptor: Job, tasks: Sequence[Task]) -> None:
        self.session = session
        self.stmt = stmt
        self.preemptor = preemptor
        self.tasks = list(tasks)
        self.task_indices = tuple(t.index for t in tasks)
        self.request = session.job_request(self.tasks)  # task charges are session constants
        self._ranks: dict[int, dict[int, int]] = {}  # per victim job: task -> place in its task order
        # the tries that failed in this search, with the scenarios each simulated (see `recharged`)
        self.failed: dict[tuple[str, UnitsKey], int] = {}

    def recharged(self, attempt: tuple[str, UnitsKey]) -> bool:
        """Has this try (or this judged set of units) failed before in this search? Then it would fail
        again (every try starts from the same statement, and simulations and validators are
        deterministic): it is not simulated, and the action is charged the scenarios it cost, so the
        budget runs out at the same scenario either way."""
        cost = self.failed.get(attempt)
        if cost is None:
            return False
        for _ in range(cost):
            searches.charge(self.session, self.stmt.action)
        return True

    def capacity_ok(self) -> bool:
        s = self.session
        return all(check(s, self.preemptor, self.request) is None for check in s.capacity_checks)

    def _in_task_order(self, job: int, tasks: Iterable[int]) -> list[int]:
        """The tasks of a victim job in its task order (`Session.job_order_tasks`, fixed for the session:
        each job's ranks are made once per search)."""
        rank = self._ranks.get(job)
        if rank is None:
            rank = self._ranks[job] = {t: i for i, t in enumerate(self.session.job_order_tasks[job].tolist())}
        return sorted(tasks, key=rank.__getitem__)

    def place_preemptor(self) -> bool:
        s = self.session
        if place_tasks(s, self.stmt, self.preemptor, self.tasks, why=False) is not None:
            return False
        return s.gang_satisfied(self.preemptor)

    def _to_replace(self, victim: Job, evicted: list[int]) -> list[int]:
        """The evicted pods KAI re-allocates for a victim job: those its gang minimum needs, else one.

        Per podset, as many as bring it back to its minimum, then more (in task order) if the job is
        still short of its own minimum; a job that lost only surplus pods gets one of them back.
        """
        s = self.session
        tasks = s.snapshot.tasks
        alive = s.podset_alive[victim.index]
        if victim.subgroup_sets:
            return self._to_replace_tree(victim, evicted)
        short = [max(0, ps.min_available - int(alive[i])) for i, ps in enumerate(victim.podsets)]
        chosen: list[int] = []
        rest: list[int] = []
        for t in evicted:
            podset = tasks[t].podset
            if short[podset] > 0:
                short[podset] -= 1
                chosen.append(t)
            else:
                rest.append(t)
        missing = victim.min_member - int(alive.sum()) - len(chosen)
        if missing > 0:
            chosen += rest[:missing]
        if not chosen:
            chosen = evicted[:1]
        return sorted(chosen, key=evicted.index)

    def _to_replace_tree(self, victim: Job, evicted: list[int]) -> list[int]:
        """For a job with a subgroup tree (`minSubGroup`): evicted pods in task order, those of subgroups
        below their minimum first, until the tree is satisfied again; one pod if it still is."""
        counts = self.session.podset_alive[victim.index].copy()
        if victim.gang_satisfied_by(counts):
            return evicted[:1]
        tasks = self.session.snapshot.tasks
        chosen: list[int] = []
        for needy in (True, False):
            for t in evicted:
                podset = tasks[t].podset
                if t in chosen or (needy and counts[podset] >= victim.podsets[podset].min_available):
                    continue
                chosen.append(t)
                counts[podset] += 1
                if victim.gang_satisfied_by(counts):
                    return sorted(chosen, key=evicted.index)
        return chosen

    def _replace_job(
        self, victim: Job, job_units: list[VictimUnit], back: list[int], charge: Vector, placed: dict[int, int]
    ) -> list[VictimUnit]:
        """Re-place the pods `back` of one victim job (costing its queue `charge`), all of them or none;
        returns the units' lost parts."""
        s, stmt = self.session, self.stmt
        mine: dict[int, int] = {}
        if all(check(s, victim, charge) is None for check in s.capacity_checks):
            cp = stmt.checkpoint()
            for t in back:
                if place_task(s, stmt, s.snapshot.tasks[t], why=False) is not None:
                    stmt.rollback(cp)
                    mine = {}
                    break
                mine[t] = int(s.node[t])
        placed.update(mine)
        lost = []
        for unit in job_units:
            gone = tuple(t for t in unit.tasks if t not in mine)
            if gone:
                lost.append(VictimUnit(job=unit.job, tasks=gone, whole=unit.whole))
        return lost

    def simulate(self, units: Sequence[VictimUnit]) -> tuple[Scenario, set[int]] | None:
        """Evict `units`, then place the preemptor and re-place the victim jobs together in the session's
        job order (KAI's virtual allocation); None if the preemptor does not fit. The statement keeps
        the result (the caller rolls back). Returns the scenario and the victim pods that stay put."""
        s, stmt = self.session, self.stmt
        searches.charge(s, stmt.action)
        tasks, jobs = s.snapshot.tasks, s.snapshot.jobs
        preemptor = self.preemptor.key  # one string for every eviction
        by_job: dict[int, list[VictimUnit]] = {}
        for unit in units:
            for t in unit.tasks:
                stmt.evict(tasks[t], preemptor=preemptor, message="")
            by_job.setdefault(unit.job, []).append(unit)
        # each victim job gets back, in task order, the pods its gang minimum needs (or one pod if it
        # only lost surplus pods); the preemptor and the victim jobs go in the session's job order,
        # a victim job's attempt being those pods (KAI's virtual allocation of preemptor and victims)
        backs: dict[int, list[int]] = {}
        for j, job_units in by_job.items():
            evicted = self._in_task_order(j, (t for unit in job_units for t in unit.tasks))
            back = backs[j] = self._to_replace(jobs[j], evicted)
            s.simulated_attempts[j] = s.job_request([tasks[t] for t in back])
        order = JobsByQueue(s, [self.preemptor, *(jobs[j] for j in sorted(by_job))])
        lost: list[VictimUnit] = []
        placed: dict[int, int] = {}
        try:
            while (job := order.pop()) is not None:
                if job.index == self.preemptor.index:
                    if not self.capacity_ok() or not self.place_preemptor():
                        return None
                    continue
                charge = s.simulated_attempts.pop(job.index)
                lost += self._replace_job(job, by_job[job.index], backs[job.index], charge, placed)
        finally:
            s.simulated_attempts.clear()
        stays = {t for t, node in placed.items() if node == int(s.snapshot.tasks[t].node)}
        moved = {t: node for t, node in placed.items() if t not in stays}
        return Scenario(preemptor=self.preemptor, tasks=self.task_indices, lost=tuple(lost), moved=moved), stays


class _Scan:
    """What the victims taken so far free, per node, and how many preemptor pods each node could then hold.

    A node's count is the capacity of its free room plus what its victims free (zero off the
    preemptor's nodes); it only grows as victims are taken.
    """

    def __init__(self, session: Session, tasks: Sequence[Task]) -> None:
        # the free room, the nodes the preemptor may use and their pod counts are kept for the session
        # and brought up to date on the nodes changed since (`kai.actions.common.rooms`): read only
        rooms = node_rooms(session)
        self.mask = rooms.mask(session, tasks)
        self.shapes, self.counts = _shapes(tasks)
        self.cap_base, self.base_total = rooms.counts(session, self.shapes, tasks)
        self.base = rooms.base
        self.freed = np.zeros(self.base.shape)
        self.cap = self.cap_base.copy()
        self.total = self.base_total.copy()
        self.taken: list[VictimUnit] = []
        self.taken_key: list[StepKey] = []  # each taken unit's place in the victim order
        self.taken_at: dict[StepKey, int] = {}  # and back
        # per (taken unit, node) row: the unit's place in `taken`, and the node (appended in chunks)
        self.row_unit: list[npt.NDArray[np.int64]] = []
        self.row_node: list[npt.NDArray[np.int64]] = []
        self.victim_tasks = 0
        # resources every preemptor pod asks for, with the smallest amount asked: a node that stays short
        # of one of them holds no preemptor pod whatever was freed on it
        least = self.shapes.min(axis=0).tolist()
        self.asked_by_all = [(r, need) for r, need in enumerate(least) if need > EPS]

    def take(self, unit: VictimUnit, nodes: Sequence[int]) -> None:
        self.row_unit.append(np.full(len(nodes), len(self.taken), dtype=np.int64))
        self.row_node.append(np.asarray(nodes, dtype=np.int64))
        self._taken(unit, (float(len(self.taken)),))
        self.victim_tasks += len(unit.tasks)

    def _taken(self, unit: VictimUnit, key: StepKey) -> None:
        self.taken_at[key] = len(self.taken)
        self.taken.append(unit)
        self.taken_key.append(key)

    def catch_up(self, steps: StepBlock) -> None:
        """Add steps that come earlier in the victim order on nodes the walk has just reached: their
        rows there free nothing those nodes are short of, so no count grows (see `OrderedVictims.relevant`)."""
        place = np.empty(len(steps.units), dtype=np.int64)
        for k, (unit, key) in enumerate(zip(steps.units, steps.keys, strict=True)):
            known = self.taken_at.get(key)
            if known is None:
                known = len(self.taken)
                self._taken(unit, key)
            place[k] = known
        nodes = np.unique(steps.row_node)
        np.add.at(self.freed, steps.row_node, steps.row_frees)
        self.row_unit.append(place[steps.row_step])
        self.row_node.append(steps.row_node)
        grown = np.where(self.mask[None, nodes], _capacity(self.base[nodes] + self.freed[nodes], self.shapes), 0.0)
        assert np.array_equal(grown, self.cap[:, nodes]), "a step behind the walk made room"

    def roomy(self, nodes: Sequence[int]) -> list[int]:
        """The nodes not short, even with what was freed, of a resource every preemptor pod asks for."""
        base, freed = self.base, self.freed
        return [n for n in nodes if not any(base[n, r] + freed[n, r] + EPS < need for r, need in self.asked_by_all)]

    def units_on(self, nodes: BoolVector) -> list[VictimUnit]:
        """The taken units with a pod on one of the nodes, in the order they were taken."""
        if len(self.row_unit) > 1:
            self.row_unit, self.row_node = [np.concatenate(self.row_unit)], [np.concatenate(self.row_node)]
        if not self.row_unit:
            return []
        rows = self.row_unit[0][nodes[self.row_node[0]]]
        keys = self.taken_key
        return [self.taken[i] for i in sorted(np.unique(rows).tolist(), key=lambda i: keys[i])]

    def step(self, session: Session, unit: VictimUnit, max_victim_tasks: int) -> list[int] | None:
        """Take one unit (per-unit walk); the nodes to try if it makes room for one more preemptor pod
        and the nodes could then hold every pod, else None. Raises StopIteration past the task cap."""
        nodes, freed = victim_frees(session, unit)
        if not self.mask[nodes].any():
            return None
        if max_victim_tasks and self.victim_tasks + len(unit.tasks) > max_victim_tasks:
            raise StopIteration
        self.take(unit, nodes)
        self.freed[nodes] += freed
        nodes = self.roomy(nodes)
        if not nodes:
            return None
        grown = np.where(self.mask[None, nodes], _capacity(self.base[nodes] + self.freed[nodes], self.shapes), 0.0)
        grew = bool(np.any(grown > self.cap[:, nodes]))
        self.cap[:, nodes] = grown
        # simulate only when this victim makes room for one more preemptor pod somewhere, and the
        # nodes could then hold every pod (each shape counted on its own: a necessary condition)
        if not grew or bool(np.any(self.cap.sum(axis=1) < self.counts)):
            return None
        return nodes

    def block(self, steps: StepBlock) -> tuple[int, list[int]] | None:
        """Take the steps, all at once, up to the first one `step` would simulate at: (its place in
        `steps`, the nodes to try), or None when none does (all taken). Same arithmetic as `step`:
        each node's freed room adds up its victims in order."""
        mask = self.mask
        count = len(steps.units)
        kept = np.zeros(count, dtype=np.bool_)
        kept[steps.row_step[mask[steps.row_node]]] = True
        rows = np.flatnonzero(kept[steps.row_step])
        if not rows.size:
            return None
        frees = steps.row_frees[rows]
        row_step, row_node = steps.row_step[rows], steps.row_node[rows]
        # each node's freed room after each of its rows, summed in order from what it had freed before
        by_node = np.argsort(row_node, kind="stable")
        nodes_sorted = row_node[by_node]
        starts = np.empty(rows.size, dtype=np.bool_)  # a node's first row (rows sorted by node)
        starts[0] = True
        np.not_equal(nodes_sorted[1:], nodes_sorted[:-1], out=starts[1:])
        first = np.flatnonzero(starts)
        group = np.cumsum(starts) - 1
        place = np.arange(rows.size) - first[group]
        pad = np.zeros((first.size, int(place.max()) + 2, frees.shape[1]))
        pad[:, 0] = self.freed[nodes_sorted[first]]
        pad[group, place + 1] = frees[by_node]
        after_sorted = np.cumsum(pad, axis=1)[group, place + 1]
        after = np.empty_like(after_sorted)
        after[by_node] = after_sorted
        cap_after = np.where(mask[None, row_node], _capacity(self.base[row_node] + after, self.shapes), 0.0)
        previous = np.empty_like(by_node)
        shifted = np.empty_like(by_node)  # the row before in node order
        shifted[0], shifted[1:] = -1, by_node[:-1]
        previous[by_node] = np.where(place == 0, -1, shifted)
        cap_before = np.where(previous[None, :] >= 0, cap_after[:, np.maximum(previous, 0)], self.cap[:, row_node])
        grew_row = np.any(cap_after > cap_before, axis=0)
        increments = cap_after - cap_before
        kept_steps = np.flatnonzero(kept)
        # per kept step (its rows are together, steps ascending): did a count grow, and by how much
        # per shape (whole numbers of pods: summed exactly in any order)
        step_first = np.searchsorted(row_step, kept_steps)
        grew = np.logical_or.reduceat(grew_row, step_first)
        totals = self.total[:, None] + np.cumsum(np.add.reduceat(increments, step_first, axis=1), axis=1)
        fires = grew & np.all(totals >= self.counts[:, None], axis=0)
        hit = int(np.argmax(fires)) if bool(fires.any()) else -1
        last = int(kept_steps[hit]) if hit >= 0 else count - 1
        # take the steps up to `last`: their rows set the nodes' freed room and counts
        upto = row_step <= last
        place_of = len(self.taken) + np.cumsum(kept) - 1  # a kept step's place in `taken`
        for k in np.flatnonzero(kept[: last + 1]).tolist():
            self._taken(steps.units[k], steps.keys[k])
        self.row_unit.append(place_of[row_step[upto]])
        self.row_node.append(row_node[upto])
        # per node, its last row among those taken
        sel = np.flatnonzero(upto[by_node])
        ends = np.ones(sel.size, dtype=np.bool_)  # a node's last taken row
        np.not_equal(group[sel][1:], group[sel][:-1], out=ends[:-1])
        final = by_node[sel[ends]]
        self.freed[row_node[final]] = after[final]
        self.cap[:, row_node[final]] = cap_after[:, final]
        self.total = self.cap.sum(axis=1)
        if hit < 0:
            return None
        return last, self.roomy(row_node[row_step == last].tolist())


def solve(
    session: Session,
    stmt: Statement,
    *,
    preemptor: Job,
    tasks: Sequence[Task],
    units: Iterable[VictimUnit] | OrderedVictims,
    validate: Validator,
    message: Messenger,
    max_victim_tasks: int = 0,
) -> Scenario | None:
    """Find the first valid scenario and leave it applied in `stmt` (uncommitted); None leaves `stmt` as it was.

    `units` is the victim order one unit at a time, or as blocks of steps (`OrderedVictims`, same order).
    Each scenario simulated is charged to the action's budget (`searches.charge`); when it runs out,
    `stmt` is left as it was and BudgetExhausted propagates.
    """
    start = stmt.checkpoint()
    try:
        return _solve(session, stmt, preemptor, tasks, units, validate, message, max_victim_tasks)
    except searches.BudgetExhausted:
        stmt.rollback(start)
        raise


def _solve(
    session: Session,
    stmt: Statement,
    preemptor: Job,
    tasks: Sequence[Task],
    units: Iterable[VictimUnit] | OrderedVictims,
    validate: Validator,
    message: Messenger,
    max_victim_tasks: int,
) -> Scenario | None:
    search = _Search(session, stmt, preemptor=preemptor, tasks=tasks)
    start = stmt.checkpoint()
    scan = _Scan(session, tasks)
    if isinstance(units, OrderedVictims):
        assert not max_victim_tasks, "the block walk does not cap victim tasks"
        walk = units.relevant(reachable=scan.mask, room=scan.base, needs=scan.asked_by_all)
        for behind, steps in walk:
            if behind:
                scan.catch_up(steps)
                continue
            at = 0
            while at < len(steps.units):
                fired = scan.block(steps.after(at) if at else steps)
                if fired is None:
                    break
                found = _simulate_at(search, start, scan, fired[1], validate, message)
                if found is not None:
                    return found
                at += fired[0] + 1
    else:
        for unit in units:
            try:
                nodes = scan.step(session, unit, max_victim_tasks)
            except StopIteration:
                break
            if nodes is None:
                continue
            found = _simulate_at(search, start, scan, nodes, validate, message)
            if found is not None:
                return found
    stmt.rollback(start)
    return None


def _units_key(units: Sequence[VictimUnit]) -> UnitsKey:
    return tuple((u.job, u.tasks, u.whole) for u in units)


def _simulate_at(
    search: _Search, start: int, scan: _Scan, nodes: list[int], validate: Validator, message: Messenger
) -> Scenario | None:
    """The newest victim made room: first the victims on one of its nodes at a time (the least
    disruptive), as KAI tries each node of its latest victim, then every victim on a node where victims
    make room. The first valid scenario is left applied, with its messages, and returned."""
    cap, cap_base, counts, base_total = scan.cap, scan.cap_base, scan.counts, scan.base_total
    count = cap.shape[1]
    tried: list[list[VictimUnit]] = []
    for n in nodes:
        if not bool(np.any(cap[:, n] > cap_base[:, n])) or bool(
            np.any(base_total + cap[:, n] - cap_base[:, n] < counts)
        ):
            continue
        only = np.zeros(count, dtype=np.bool_)
        only[n] = True
        on_node = scan.units_on(only)
        tried.append(on_node)
        found = _try(search, start, on_node, validate)
        if found is not None:
            return _settle(search, start, found[2], found[0], found[1], validate, message)
    candidates = scan.units_on(np.any(cap > cap_base, axis=0))
    if candidates in tried:
        return None
    found = _try(search, start, candidates, validate)
    if found is not None:
        return _settle(search, start, found[2], found[0], found[1], validate, message)
    return None


def _try(
    search: _Search, start: int, units: list[VictimUnit], validate: Validator
) -> tuple[Scenario, set[int], list[VictimUnit]] | None:
    """Simulate with `units` evicted, keep only the victims on nodes the preemptor uses, simulate again, validate.

    Returns (scenario, victim pods that stay, units evicted) with the scenario left applied in the
    statement (validators judge the scenario alone, not the session), or None with the statement back
    at `start`.
    """
    session, stmt = search.session, search.stmt
    tried = _units_key(units)
    if search.recharged(("try", tried)):
        return None
    found = search.simulate(units)
    if found is None:
        stmt.rollback(start)
        search.failed[("try", tried)] = 1
        return None
    touched = {int(session.node[t]) for t in search.task_indices}
    tasks = session.snapshot.tasks
    needed = [u for u in units if any(tasks[t].node in touched for t in u.tasks)]
    judged = tried  # the units of the scenario the validator judges
    first = 0  # scenarios simulated before it
    if len(needed) < len(units):
        # victims on nodes the preemptor does not use are not needed: simulate without them
        stmt.rollback(start)
        judged, first = _units_key(needed), 1
        if search.recharged(("judged", judged)):
            search.failed[("try", tried)] = 1 + search.failed[("judged", judged)]
            return None
        found = search.simulate(needed)
        if found is None:
            stmt.rollback(start)
            search.failed[("judged", judged)] = 1
            search.failed[("try", tried)] = 2
            return None
    scenario, stays = found
    if not validate(scenario):
        stmt.rollback(start)
        search.failed[("judged", judged)] = 1
        search.failed[("try", tried)] = first + 1
        return None
    return scenario, stays, needed


def _settle(
    search: _Search,
    start: int,
    taken: list[VictimUnit],
    found: Scenario,
    stays: set[int],
    validate: Validator,
    message: Messenger,
) -> Scenario | None:
    """The statement holds `found` (the units `taken` evicted): leave out the victims that could stay
    where they run, if the scenario stays valid without evicting them, and give every eviction its message.

    Simulations are deterministic, so simulating the same evictions again reproduces a scenario."""
    stmt = search.stmt
    scenario = found
    if stays:
        stmt.rollback(start)
        kept = [VictimUnit(job=u.job, tasks=tuple(t for t in u.tasks if t not in stays), whole=u.whole) for u in taken]
        kept = [u for u in kept if u.tasks]
        again = search.simulate(kept)
        if again is not None and validate(again[0]):
            settled = again[0]
            stmt.label_evictions(start, lambda t: message(settled, t))
            return settled
        stmt.rollback(start)
        # victims that could stay are evicted after all and pipelined back where they ran
        if search.simulate(taken) is None:
            stmt.rollback(start)
            return None
        home = {t: int(search.session.snapshot.tasks[t].node) for t in stays}
        scenario = msgspec.structs.replace(found, moved={**found.moved, **home})
    stmt.label_evictions(start, lambda t: message(scenario, t))
    return scenario
