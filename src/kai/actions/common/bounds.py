"""Cheap necessary conditions that end a victim search before any scenario is simulated.

A scenario evicts victims, places the preemptor and re-places the victim jobs it can. Counted over
the whole cluster, per resource the preemptor asks for, the room left afterwards is the room there
was (idle or being released), plus what the victims lost for good held, minus the preemptor; and a
node never ends below zero in a resource that something placed on it asks for. So no scenario can
succeed unless

    free room (each node counted from zero up) + what the queues that may lose victims hold
        + one whole GPU per shared device (moving fractions can empty a device)
    >= what the preemptor asks for

in GPUs (whole devices; a fraction needs no whole GPU), CPU and memory. The queues' allocations are
an upper bound of what their candidate victims hold. When it fails, the search is hopeless: the
attempt ends at once with the same outcome the full search would reach.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from kai.actions.common.rooms import node_rooms
from kai.core.model import Task
from kai.core.resources import QUEUE_RESOURCES
from kai.core.session import Session

SLACK = 1e-6


def could_free_enough(session: Session, tasks: Sequence[Task], losing_queues: Iterable[int]) -> bool:
    """False when no scenario could make room for `tasks` with victims lost only from `losing_queues`.

    The free room is the session's exact sum kept up to date (`kai.actions.common.rooms.FreeRoom`): the
    answer is the one the float sum made afresh gives, decided at both ends of the interval that sum
    lies in, and made afresh only when they disagree (`enough` only grows with the free room)."""
    columns = list(QUEUE_RESOURCES)
    if any(t.is_shared_gpu for t in tasks):
        need = np.sum([t.request[columns] for t in tasks], axis=0)
    else:
        need = session.job_request(list(tasks))  # the same rows (charges are requests), summed alike
    wanted = need.tolist()
    if not any(amount > SLACK for amount in wanted):
        return True
    losing = list(losing_queues)
    held = session.queue_allocated[losing].sum(axis=0).tolist() if losing else None
    room = node_rooms(session).free_room(session)
    devices = room.devices

    def enough(free: list[float]) -> bool:
        free = [f + h for f, h in zip(free, held, strict=True)] if held is not None else list(free)
        free[0] += devices
        return all(f + SLACK >= n for f, n in zip(free, wanted, strict=True))

    bounds = room.bounds()
    if bounds is not None:
        low, high = bounds
        if enough(low):
            return True
        if not enough(high):
            return False
    fresh = np.maximum(session.idle[:, columns] + session.releasing[:, columns], 0.0).sum(axis=0)
    return enough(fresh.tolist())
