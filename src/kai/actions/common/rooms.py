"""What every node has free, kept per session for the victim search and brought up to date only on
the nodes that changed since it was last read.

Each preempt or reclaim attempt starts by reading every node: the bound that ends a hopeless search
(`kai.actions.common.bounds`) adds up the free room of the whole cluster, and the search
(`kai.actions.common.solver`) starts from each node's free room (idle plus releasing) and how many
preemptor pods of each shape it could hold. Attempts grow with the cluster, so these reads made a
cycle grow with the square of the node count. Statements log a node (`Session.node_log`, beside its
`node_version`) whenever its resources or shared devices change, so everything here is kept per
session and computed again on the nodes logged since only: each node's values depend on that node
alone, and are the very floats a fresh computation gives.

Sums over the nodes are another matter: a float sum kept up to date is not the float sum made
afresh. The pod counts per shape are whole numbers and add up exactly in any order (checked: a count
too large for that is summed afresh). The cluster's free room is kept as an exact sum (an integer
count of 2**-1074, the unit every double is a whole multiple of): the bound compares the float sum
made afresh, which lies within a known distance of the exact one, so the bound's answer is decided
at both ends of that interval and only made afresh when they disagree (`FreeRoom.bounds`).

Arrays handed out (`base`, the masks, the pod counts) are shared: read them, never write them. A
shared array still referenced when the nodes change is copied before it is brought up to date, so a
reader never sees it change under it.
"""

from __future__ import annotations

import math
import sys
import weakref
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from kai.core import fit as fit_lib
from kai.core.model import BoolVector, Task
from kai.core.resources import QUEUE_RESOURCES
from kai.core.session import Session

EPS = 1e-9
UNBOUNDED = 1 << 20  # pods of a shape that asks for nothing
_SHIFT = 1074  # every finite double is a whole multiple of 2**-1074
_UNIT = 2.0**-53  # the unit roundoff of a double
# pod counts up to this add up exactly (as floats) over any number of nodes below 2**20
_EXACT_COUNTS = float(2**32)
_FEW = 16  # up to this many changed nodes, counts are brought up to date in Python floats

Floats = npt.NDArray[np.float64]


def capacity(free: Floats, shapes: Floats) -> Floats:
    """How many pods of each shape fit on each node's free resources, ignoring the others [S, n]."""
    asked = shapes > EPS
    per = np.where(asked[:, None, :], (free[None, :, :] + EPS) / np.where(asked, shapes, 1.0)[:, None, :], np.inf)
    cap = np.floor(per.min(axis=2))
    out: Floats = np.where(np.isfinite(cap), cap, float(UNBOUNDED))
    return out


def exact(value: float) -> int:
    """A finite double as a whole number of 2**-1074."""
    numerator, denominator = value.as_integer_ratio()  # the denominator is a power of two
    return numerator << (_SHIFT + 1 - denominator.bit_length())


def _exact_sum(column: Floats) -> int:
    """The exact sum of a column, in 2**-1074."""
    if column.size and bool(np.all(column == np.floor(column))) and float(np.abs(column).max()) < 2.0**53:
        # whole numbers: summed exactly as Python integers (no overflow, unlike an int64 sum)
        return sum(map(int, column.tolist())) << _SHIFT
    return sum(map(exact, column.tolist()))


class _Keeper:
    __slots__ = ("kept",)

    def __init__(self) -> None:
        self.kept = object()


_PROBE = _Keeper()
# what `sys.getrefcount(keeper.kept)` reads for an object only its keeper's attribute holds (the count
# of the call's own references differs between interpreter versions: measured, not assumed)
_ALONE = sys.getrefcount(_PROBE.kept)


class _Counts:
    """Per node, how many pods of each shape it could hold on its free room, off the masked nodes zero."""

    __slots__ = ("admitted", "asked", "cap", "exact_total", "mask", "seen", "shapes", "total")

    def __init__(self, rooms: NodeRooms, shapes: Floats, mask: BoolVector | None) -> None:
        self.shapes = shapes
        self.asked = [[(r, a) for r, a in enumerate(shape) if a > EPS] for shape in shapes.tolist()]
        self.mask = mask
        self.admitted: list[bool] | None = None if mask is None else mask.tolist()
        self.seen = rooms.seen  # up to date with the nodes changed before this entry of the session's node_log
        cap = capacity(rooms.base, shapes)
        self.cap: Floats = cap if mask is None else np.where(mask[None, :], cap, 0.0)
        self.total: Floats = self.cap.sum(axis=1)
        self.exact_total = rooms.count < 2**20 and bool(np.all(np.abs(self.cap) <= _EXACT_COUNTS))

    def update(self, rooms: NodeRooms, log: list[int]) -> None:
        """Bring the counts up to date with the nodes `rooms` brought up to date (from `log`) since."""
        if self.seen == rooms.seen:
            return
        if self.seen == rooms.last_seen:
            nodes, rows = rooms.last
        else:
            nodes = sorted(set(log[self.seen : rooms.seen]))
            rows = rooms.base[nodes].tolist()
        self.seen = rooms.seen
        if sys.getrefcount(self.cap) > _ALONE:  # still read (a search's counts, or a view): leave it be
            self.cap = self.cap.copy()
        cap = self.cap
        few = self._few(nodes, rows) if self.exact_total and len(nodes) <= _FEW else None
        if few is not None:
            cap[:, nodes] = few[0]
            self.total = np.array(few[1])
            return
        at = np.array(nodes, dtype=np.int64)
        new = capacity(rooms.base[at], self.shapes)
        if self.mask is not None:
            new = np.where(self.mask[None, at], new, 0.0)
        cap[:, at] = new
        self.total = cap.sum(axis=1)
        self.exact_total = rooms.count < 2**20 and bool(np.all(np.abs(cap) <= _EXACT_COUNTS))

    def _few(self, nodes: list[int], rows: list[list[float]]) -> tuple[list[list[float]], list[float]] | None:
        """`capacity` on a few nodes in Python floats (the same operations on the same doubles) and the
        totals with them (whole numbers: exact); None for a room that is not a number, or a count too
        large to add up exactly."""
        admitted = self.admitted
        new: list[list[float]] = []
        total = self.total.tolist()
        for s, (asked, old) in enumerate(zip(self.asked, self.cap[:, nodes].tolist(), strict=True)):
            counts = []
            for node, row in zip(nodes, rows, strict=True):
                if admitted is not None and not admitted[node]:
                    counts.append(0.0)
                    continue
                least = math.inf
                for r, amount in asked:
                    fits = (row[r] + EPS) / amount
                    if fits < least:
                        least = fits
                    elif fits != fits:  # NaN: numpy's minimum keeps it, Python's comparisons do not
                        return None
                count = float(math.floor(least)) if math.isfinite(least) else float(UNBOUNDED)
                if not -_EXACT_COUNTS <= count <= _EXACT_COUNTS:
                    return None
                counts.append(count)
            new.append(counts)
            total[s] += sum(counts) - sum(old)
        return new, total


class NodeRooms:
    """A session's nodes' free room (idle plus releasing), with what is derived from it node by node,
    up to date with the session's `node_log` as of the last `sync`."""

    def __init__(self, session: Session) -> None:
        self.seen = len(session.node_log)  # up to date with the nodes changed before this entry of the log
        self.last_seen = self.seen  # and before the last sync, which brought these nodes up to date:
        self.last: tuple[list[int], list[list[float]]] = ([], [])  # (nodes, their free room)
        self.base: Floats = session.idle + session.releasing
        self.count = int(self.base.shape[0])
        self._masks: dict[tuple[int, ...], BoolVector] = {}
        self._counts: dict[tuple[bytes, tuple[int, ...] | None], _Counts] = {}
        self.free: FreeRoom | None = None  # made on first use

    def sync(self, session: Session) -> None:
        """Bring everything kept up to date with the nodes statements changed since the last sync."""
        log = session.node_log
        if len(log) == self.seen:
            return
        nodes = sorted(set(log[self.seen :]))
        self.last_seen, self.seen = self.seen, len(log)
        if sys.getrefcount(self.base) > _ALONE:  # still read (a search's room, or a view): leave it be
            self.base = self.base.copy()
        at = np.array(nodes, dtype=np.int64)
        rows = session.idle[at] + session.releasing[at]
        self.base[at] = rows
        self.last = (nodes, rows.tolist())
        if self.free is not None:
            self.free.update(session, *self.last)

    def mask(self, session: Session, tasks: Sequence[Task]) -> BoolVector:
        """The nodes the predicates admit one of the tasks on (shared while no plugin predicate can
        depend on the session: constraints and cordons are the snapshot's)."""
        if session.predicates:
            return _mask(session, tasks)
        constraints = tuple(sorted({t.constraint for t in tasks}))
        mask = self._masks.get(constraints)
        if mask is None:
            mask = self._masks[constraints] = _mask(session, tasks)
            mask.flags.writeable = False
        return mask

    def counts(self, session: Session, shapes: Floats, tasks: Sequence[Task]) -> tuple[Floats, Floats]:
        """Per node (off the tasks' nodes zero), how many pods of each shape its free room holds [S, n],
        and their totals per shape [S] (whole numbers, summed exactly)."""
        self.sync(session)
        key = shapes.tobytes() + bytes(shapes.shape[1:])
        if session.predicates:
            found = self._count(session, key, shapes, None)
            cap = np.where(self.mask(session, tasks)[None, :], found.cap, 0.0)
            return cap, cap.sum(axis=1)
        constraints = tuple(sorted({t.constraint for t in tasks}))
        found = self._count(session, key, shapes, constraints, self.mask(session, tasks))
        return found.cap, found.total

    def _count(
        self,
        session: Session,
        key: bytes,
        shapes: Floats,
        constraints: tuple[int, ...] | None,
        mask: BoolVector | None = None,
    ) -> _Counts:
        found = self._counts.get((key, constraints))
        if found is None:
            found = self._counts[(key, constraints)] = _Counts(self, shapes, mask)
        else:
            found.update(self, session.node_log)
        return found

    def free_room(self, session: Session) -> FreeRoom:
        self.sync(session)
        if self.free is None:
            self.free = FreeRoom(session, self)
        return self.free


def _mask(session: Session, tasks: Sequence[Task]) -> BoolVector:
    mask = np.zeros(session.snapshot.nodes.count, dtype=bool)
    seen: set[int] = set()
    for task in tasks:
        if task.constraint in seen:
            continue
        seen.add(task.constraint)
        mask |= fit_lib.predicate_mask(session, task)
    return mask


class FreeRoom:
    """The cluster's free room in the queue resources (each node counted from zero up), kept exactly,
    and the shared devices counted (each may be emptied by moving fractions)."""

    COLUMNS: ClassVar[list[int]] = list(QUEUE_RESOURCES)

    def __init__(self, session: Session, rooms: NodeRooms) -> None:
        per_node = np.maximum(rooms.base[:, self.COLUMNS], 0.0)
        self.per_node: list[list[float]] = per_node.tolist()
        # None once some node's room is not a finite number (then the bound sums afresh)
        self.exact: list[int] | None = None
        if bool(np.all(np.isfinite(per_node))):
            self.exact = [_exact_sum(per_node[:, c]) for c in range(len(self.COLUMNS))]
        self.device_counts = {node: len(devices) for node, devices in session.devices.items()}
        self.devices = sum(self.device_counts.values())
        self.count = rooms.count

    def update(self, session: Session, nodes: list[int], rows: list[list[float]]) -> None:
        """These nodes' rooms (idle plus releasing) changed to `rows`."""
        per_node, totals, (first, second, third) = self.per_node, self.exact, self.COLUMNS
        counts, devices = self.device_counts, session.devices
        for node, row in zip(nodes, rows, strict=True):
            # np.maximum(v, 0.0) in Python floats (NaN stays NaN)
            new = [v if v >= 0.0 or v != v else 0.0 for v in (row[first], row[second], row[third])]
            old = per_node[node]
            if new != old:
                per_node[node] = new
                if totals is not None:
                    try:
                        for c, (after, before) in enumerate(zip(new, old, strict=True)):
                            if after != before:
                                totals[c] += exact(after) - exact(before)
                    except (ValueError, OverflowError):  # a room that is not a finite number
                        totals = self.exact = None
            now = len(devices[node]) if node in devices else 0
            if now != counts.get(node, 0):
                self.devices += now - counts.get(node, 0)
                counts[node] = now

    def bounds(self) -> tuple[list[float], list[float]] | None:
        """Per queue resource, floats below and above the cluster's free room summed afresh as floats
        (`np.maximum(idle + releasing, 0).sum(axis=0)` over the nodes, in any order of additions);
        None when some node's room is not finite."""
        if self.exact is None:
            return None
        low, high = [], []
        for total in self.exact:
            below, above = around(total, self.count)
            low.append(below)
            high.append(above)
        return low, high


def around(total: int, count: int) -> tuple[float, float]:
    """Floats below and above any float sum of `count` non-negative doubles whose exact sum is `total`
    (in 2**-1074). Such a sum, whatever the order of its additions, is within (n - 1) * u / (1 - (n - 1) * u)
    of the exact sum, relatively (n terms, u = 2**-53); the interval is widened for its own roundings."""
    value = total / (1 << _SHIFT)  # correctly rounded
    spread = 4.0 * (count + 4) * _UNIT
    return value * (1.0 - spread), value * (1.0 + spread)


_ROOMS: weakref.WeakKeyDictionary[Session, NodeRooms] = weakref.WeakKeyDictionary()


def node_rooms(session: Session) -> NodeRooms:
    rooms = _ROOMS.get(session)
    if rooms is None:
        rooms = _ROOMS[session] = NodeRooms(session)
    return rooms
