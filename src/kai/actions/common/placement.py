"""Placing tasks on nodes inside a statement: filter, score, pick, record.

The node with the highest total score wins; ties go to the lowest node index (nodes are sorted
by name), so the same input always gives the same placement.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import numpy as np
import numpy.typing as npt

from kai.core import fit as fit_lib
from kai.core.model import Job, NodeIndices, Task, TaskStatus
from kai.core.resources import GPU, Vector
from kai.core.scores import FITS_IDLE
from kai.core.session import Session
from kai.core.statement import Statement

# plain ints: numpy compares them faster than the IntEnum members
_ALLOCATED = int(TaskStatus.ALLOCATED)
_PIPELINED = int(TaskStatus.PIPELINED)


def place_task(
    session: Session,
    stmt: Statement,
    task: Task,
    *,
    allow_pipeline: bool = True,
    why: bool = True,
    remember: bool = False,
) -> str | None:
    """Place one task; returns None on success, else the fit-error summary (a bare `0/N nodes` when
    the caller does not want the per-node reasons: `why=False`).

    `remember`: a failure is kept in `Session.fits_nowhere`, and a like task fails with the same error
    without a fit while no node changed (for callers that try many tasks on an unchanged cluster)."""
    nowhere = _nowhere_key(session, task, why, allow_pipeline) if remember else None
    version = session.node_changes if nowhere is not None else 0
    remembered = session.fits_nowhere.get(nowhere) if nowhere is not None else None
    if remembered is not None and remembered[0] == version:
        return remembered[1]
    fit = _fit(session, task, _shape(session, task))
    error = _place(session, stmt, task, fit, allow_pipeline=allow_pipeline, why=why)
    if error is not None and nowhere is not None:
        session.fits_nowhere[nowhere] = (version, error)
    return error


def _place(
    session: Session, stmt: Statement, task: Task, fit: fit_lib.Fit, *, allow_pipeline: bool = True, why: bool = True
) -> str | None:
    nodes = np.flatnonzero(fit.later if allow_pipeline else fit.now)
    if not nodes.size:
        if not why:
            return f"0/{session.snapshot.nodes.count} nodes"
        return fit_lib.fit_errors(session, task, fit)
    node = _best(session, task, fit, nodes)
    choice = None
    policy = session.gpu_policy
    if task.is_shared_gpu:
        if policy is not None and fit.now[node]:
            choice = policy.devices(session, task, node, fit)
        choice = choice or fit.choice(node)
    stmt.place(task, node, pipelined=not bool(fit.now[node]), choice=choice)
    return None


def _best(session: Session, task: Task, fit: fit_lib.Fit, nodes: NodeIndices) -> int:
    """The candidate node (of `nodes`, ascending) with the highest total score, the lowest on a tie: found
    without the scores where the packing scores decide (`_packed_best`), else by summing them."""
    if _packs(session, task):
        node = _packed_best(session, fit, nodes)
        if node is not None:
            return node
    return _scored_best(session, task, fit, nodes)


def _scored_best(session: Session, task: Task, fit: fit_lib.Fit, nodes: NodeIndices) -> int:
    """`_best` by the scores: every node score, the idle-fit score and the GPU policy's bonus, summed in
    that order on the candidates alone (a candidate's score depends on the node and the candidates)."""
    scores = np.zeros(nodes.size)
    for score in session.node_scores:
        scores += score(session, task, nodes)
    scores += np.where(fit.now[nodes], FITS_IDLE, 0.0)
    policy = session.gpu_policy
    if policy is not None:
        scores += policy.node_bonus(session, task, fit, nodes)
    return int(nodes[int(np.argmax(scores))])


def _packed_best(session: Session, fit: fit_lib.Fit, nodes: NodeIndices) -> int | None:
    """`_scored_best` for a task the packing scores place (`_packs`), without computing them: their sum
    ranks the nodes the task fits idle first, then fewer free GPUs first (`Session.packing`), so the
    winner is, of the candidates it fits idle (else of all), the one with the fewest free GPUs, the
    lowest index on a tie. None when a candidate's free GPUs are not whole numbers (`_whole`)."""
    free = session.free(GPU, nodes)
    if not _whole(free):
        return None
    idle = fit.now[nodes]
    if idle.any():
        nodes, free = nodes[idle], free[idle]
    return int(nodes[int(np.argmin(free))])


def _packs(session: Session, task: Task) -> bool:
    """Whether the next pods of the gang like `task`, which went to a node's idle resources, may go to
    the same node while they fit its idle resources without scoring every node again: the scores
    pack whole GPUs (`Session.packing`); the caller checks that every node's free GPUs are whole
    numbers (`_whole_free_gpus`)."""
    if task.is_shared_gpu or task.nominated_node >= 0 or session.predicates:
        return False
    gpus = float(task.request[GPU])
    if gpus <= 0 or not gpus.is_integer():
        return False
    if not all(score in session.packing for score in session.node_scores):
        return False
    return session.gpu_policy is None or session.gpu_policy in session.packing


def _whole_free_gpus(session: Session) -> bool:
    """Every node's free GPUs (idle or being released) are whole numbers (`_whole`). Placing whole GPUs
    keeps it so. Kept per session (`Session.whole_free_gpus`): once they were, only the nodes logged
    since (`Session.node_log`: every statement operation on a node) are looked at again, not every node
    at every gang."""
    log = session.node_log
    known = session.whole_free_gpus
    if known is not None and known[1]:
        if known[0] == len(log):
            return True
        changed = np.fromiter(set(log[known[0] :]), dtype=np.int64)
        whole = _whole(session.free(GPU, changed))
    else:
        whole = _whole(session.free(GPU))
    session.whole_free_gpus = (len(log), whole)
    return whole


def _whole(free: Vector) -> bool:
    """Whether these free GPUs are whole numbers, so the scaled bin-pack scores of nodes with different
    free GPUs never round to equal."""
    return bool(np.array_equal(free, np.floor(free)))


def _nowhere_key(session: Session, task: Task, why: bool, allow_pipeline: bool = True) -> tuple[object, ...] | None:
    """What a task's placement failure depends on besides the nodes (None: something else too, a
    plugin predicate): pods with the same key fit the same nodes, or fail for the same reasons."""
    if session.predicates:
        return None
    shape = (task.request.tobytes(), task.constraint, task.is_shared_gpu, task.gpu_portion, task.gpu_memory_mib)
    return (*shape, task.gpu_devices, why, allow_pipeline)


Shape = tuple[bytes, int]  # request and constraint of a task sharing no GPU: like tasks fit the same nodes
KnownFit = tuple[fit_lib.Fit, set[int]]  # a like task's fit, and the nodes changed since


def _shape(session: Session, task: Task) -> Shape | None:
    """The task's `Shape`, or None when like tasks may fit different nodes (it shares a GPU: the fit
    depends on the devices; or plugin predicates judge the task itself)."""
    if task.is_shared_gpu or session.predicates:
        return None
    return (task.request.tobytes(), task.constraint)


def _fit(session: Session, task: Task, shape: Shape | None) -> fit_lib.Fit:
    """`find_fit`, from the last fit of a like task in the session when the task has a shape (`_like_fit`)."""
    return fit_lib.find_fit(session, task) if shape is None else _like_fit(session, shape, task)


def _current(session: Session, known: KnownFit, task: Task) -> fit_lib.Fit:
    """The fit of `task` from a like task's fit: the changed nodes computed again."""
    fit, changed = known
    if not changed:
        return msgspec.structs.replace(fit, task=task)
    return fit_lib.refit_nodes(session, fit, changed, task)


def _like_fit(session: Session, shape: Shape, task: Task) -> fit_lib.Fit:
    """`find_fit` of a task sharing no GPU without plugin predicates, from the last fit of a like task
    in this session (`Session.shape_fits`): the nodes logged since (`Session.node_log`: every statement
    operation on a node, and its undo, logs it) are computed again (`fit.refit_nodes`), the others cannot
    have changed. The first pod of each gang no longer computes a fit over every node."""
    known = session.shape_fits.get(shape)
    log = session.node_log
    if known is None:
        fit = fit_lib.find_fit(session, task)
    elif known[1] == len(log):  # no node changed since
        return _current(session, (known[0], set()), task)
    else:
        fit = _current(session, (known[0], set(log[known[1] :])), task)
    session.shape_fits[shape] = (fit, len(log))
    return fit


class _PackedRun(msgspec.Struct):
    """Like pods of a gang placed with packing scores (`_packs`): while they fit the node the last one
    went to (on idle resources) they go there, as scoring every node would choose it again.

    Once it is full, the best node is the one with the fewest free GPUs (lowest index on a tie) among
    those the pod fits idle: the nodes are sorted so once, at the first such switch, and taken in that
    order at each later switch (no other node changes while the gang is placed, and a full node stays
    full for like pods). When none is left, no node fits idle: placement scores every node again (the
    pod may be pipelined, or fail)."""

    shape: Shape
    node: int
    order: npt.NDArray[np.int64] | None = None
    position: int = 0

    def next_node(self, session: Session, task: Task, fits: dict[Shape, KnownFit]) -> int | None:
        if fit_lib.fits_now_at(session, task, self.node):
            return self.node
        if self.order is None:
            fit = _current(session, fits[self.shape], task)
            fits[self.shape] = (fit, set())
            fitting = np.flatnonzero(fit.now)
            self.order = fitting[np.argsort(session.free(GPU, fitting), kind="stable")]
            self.position = -1
        self.position += 1
        if self.position >= len(self.order):
            return None
        self.node = int(self.order[self.position])
        return self.node


def place_tasks(session: Session, stmt: Statement, job: Job, tasks: Sequence[Task], *, why: bool = True) -> str | None:
    """Place a gang attempt; if any member had to be pipelined while the gang was short, pipeline all.
    Returns None on success, else why it failed (`why=False`: without the per-node reasons)."""
    was_satisfied = session.gang_satisfied(job)
    start = stmt.checkpoint()
    # pods with the same request and constraint (sharing no GPU) fit the same nodes: the fit of the
    # last one is kept, with the nodes placements changed since, and only those are checked again
    fits: dict[Shape, KnownFit] = {}
    packed: _PackedRun | None = None  # with packing scores: where the next like pods go
    whole: bool | None = None  # _whole_free_gpus, once asked
    for task in tasks:
        same = _shape(session, task)
        if packed is not None and packed.shape == same and task.nominated_node < 0:
            node = packed.next_node(session, task, fits)
            if node is not None:
                stmt.place(task, node, pipelined=False, choice=None)
                for _, nodes in fits.values():
                    nodes.add(node)
                continue
        packed = None
        known = fits.get(same) if same is not None else None
        nowhere = _nowhere_key(session, task, why) if known is None else None
        version = session.node_changes if nowhere is not None else 0
        remembered = session.fits_nowhere.get(nowhere) if nowhere is not None else None
        fit: fit_lib.Fit | None = None
        if remembered is not None and remembered[0] == version:
            error: str | None = remembered[1]  # no node changed since a pod like it fit nowhere
        else:
            fit = _current(session, known, task) if known is not None else _fit(session, task, same)
            error = _place(session, stmt, task, fit, why=why)
            if error is not None and nowhere is not None:
                session.fits_nowhere[nowhere] = (version, error)
        if error is not None or fit is None:
            stmt.rollback(start)
            if len(tasks) > 1:
                gang = f"{len(tasks)} pods of the gang must start together"
                return f"{gang}; pod {task.name} fits nowhere: {error}"
            return str(error)
        node = int(session.node[task.index])
        for _, nodes in fits.values():
            nodes.add(node)
        if same is None:
            continue
        fits[same] = (fit, {node})
        if session.status[task.index] == _ALLOCATED and _packs(session, task):
            whole = _whole_free_gpus(session) if whole is None else whole
            packed = _PackedRun(same, node) if whole else None
        else:
            whole = None  # this placement may have left a fraction of a GPU free somewhere
    placed = [t.index for t in tasks]
    if not was_satisfied and bool((session.status[placed] == _PIPELINED).any()):
        stmt.convert_to_pipelined(set(placed))
    return None
