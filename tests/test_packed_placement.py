"""Property: where the packing scores decide (`_packs`: whole GPUs under bin-pack), the shortcut that
skips the scores (`_packed_best`: of the candidates the pod fits idle, else of all, the fewest free
GPUs, the lowest index on a tie) picks the node the summed scores pick (`_scored_best`), on busy
clusters and on every candidate set placement uses (fits later, fits now).

Deterministic (derandomized, no example database).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kai.actions.common.placement import _packed_best, _packs, _scored_best, _whole_free_gpus, place_task
from kai.core import fit as fit_lib
from kai.core.resources import GPU
from kai.core.session import SchedulerConfig
from kai.core.statement import Statement
from kai.scheduler.cycle import open_session
from tests.test_gang_placement import DRAWN, _gang, _snapshot, clusters, shapes


@DRAWN
@given(
    nodes=clusters,
    first=shapes,
    second=shapes,
    sizes=st.tuples(st.integers(1, 16), st.integers(0, 6)),
    selector=st.booleans(),
)
def test_the_packing_shortcut_picks_the_best_scored_node(
    nodes: list[tuple[int, int, float, bool, int]],
    first: tuple[float, float],
    second: tuple[float, float],
    sizes: tuple[int, int],
    selector: bool,
) -> None:
    snapshot = _snapshot(nodes, [first] * sizes[0] + [second] * sizes[1], selector)
    session = open_session(snapshot, SchedulerConfig(gpu_placement="binpack"))
    stmt = Statement(session, action="allocate")
    for t in _gang(session)[1]:
        task = session.task(t)
        assert _packs(session, task)
        fit = fit_lib.find_fit(session, task)
        for candidates in (np.flatnonzero(fit.later), np.flatnonzero(fit.now)):
            if candidates.size:
                assert _packed_best(session, fit, candidates) == _scored_best(session, task, fit, candidates)
        place_task(session, stmt, task)  # the next pods see the cluster this one changed


def test_whole_free_gpus_kept_per_session_sees_a_fraction_come_and_go() -> None:
    """Packing's precondition, kept per session (`_whole_free_gpus`: once every node's free GPUs were
    whole, only the nodes changed since are looked at): a pod asking half a GPU leaves a fraction free on
    its node, and the rollback of its placement makes every node whole again."""
    snapshot = _snapshot([(2, 0, 64.0, False, 1), (0, 0, 64.0, False, 1), (8, 1, 64.0, False, 1)], [(0.5, 1.0)], False)
    session = open_session(snapshot, SchedulerConfig(gpu_placement="binpack"))
    stmt = Statement(session, action="allocate")
    assert _whole_free_gpus(session)
    assert _whole_free_gpus(session)  # nothing changed: the kept answer
    start = stmt.checkpoint()
    [task] = [session.task(t) for t in _gang(session)[1]]
    stmt.place(task, 1, pipelined=False, choice=None)
    assert not _whole_free_gpus(session)
    assert session.free(GPU).tolist() == [6.0, 7.5, 1.0]
    stmt.rollback(start)
    assert _whole_free_gpus(session)
