"""One scheduling cycle: snapshot in, decisions out.

1. Open a session over the snapshot; every plugin registers its callbacks.
2. Run the configured actions in order.
3. Close the session: collect placements, evictions, conditions and events as data.
"""

from __future__ import annotations

from kai.core.decisions import CycleResult
from kai.core.model import Snapshot
from kai.core.session import SchedulerConfig, Session
from kai.scheduler import registry


def open_session(snapshot: Snapshot, config: SchedulerConfig) -> Session:
    session = Session(snapshot, config)
    for factory in registry.PLUGINS:
        factory().on_session_open(session)
    return session


def run_cycle(snapshot: Snapshot, config: SchedulerConfig) -> CycleResult:
    # 1. open the session
    session = open_session(snapshot, config)
    # 2. run the actions
    for name in config.actions:
        action = registry.make_action(name)
        if action is not None:
            action.execute(session)
    # 3. close: decisions leave as data
    return CycleResult(
        placements=tuple(session.placements),
        evictions=tuple(session.evictions),
        conditions=tuple(session.conditions[j] for j in sorted(session.conditions)),
        events=tuple(session.events),
        starts=tuple(session.starts),
        stale_marks=tuple(session.stale_marks),
        fair_share={
            q.name: (
                float(session.fair_share[q.index, 0]),
                float(session.fair_share[q.index, 1]),
                float(session.fair_share[q.index, 2]),
            )
            for q in snapshot.queues
        },
    )
