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

from kai.core.model import Task
from kai.core.resources import QUEUE_RESOURCES
from kai.core.session import Session

SLACK = 1e-6


def could_free_enough(session: Session, tasks: Sequence[Task], losing_queues: Iterable[int]) -> bool:
    """False when no scenario could make room for `tasks` with victims lost only from `losing_queues`."""
    need = np.sum([t.request[list(QUEUE_RESOURCES)] for t in tasks], axis=0)
    if not np.any(need > SLACK):
        return True
    columns = list(QUEUE_RESOURCES)
    free = np.maximum(session.idle[:, columns] + session.releasing[:, columns], 0.0).sum(axis=0)
    losing = list(losing_queues)
    if losing:
        free = free + session.queue_allocated[losing].sum(axis=0)
    free[0] += sum(len(devices) for devices in session.devices.values())
    return bool(np.all(free + SLACK >= need))
