"""Statements: gang transactions of virtual allocate, pipeline and evict operations.

Each operation changes the session and records its exact inverse; `checkpoint()` marks a point
in the log, `rollback(cp)` undoes back to it, `discard()` undoes everything and `commit()` turns
the operations into decisions on the session's output lists. Nothing here performs I/O: the
decisions are applied later by the adapter.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import numpy as np

from kai.core import gpu_devices
from kai.core.decisions import Eviction, Kind, Placement
from kai.core.model import Task, TaskStatus
from kai.core.resources import GPU, Vector
from kai.core.session import Session

# statuses as plain ints: numpy stores and compares them faster than the IntEnum members
_RUNNING = int(TaskStatus.RUNNING)
_ALLOCATED = int(TaskStatus.ALLOCATED)
_PIPELINED = int(TaskStatus.PIPELINED)
_RELEASING = int(TaskStatus.RELEASING)


class _Op(msgspec.Struct, frozen=True, kw_only=True):
    """One logged operation and what its exact inverse needs, as data (a msgspec Struct: one is made
    per eviction and placement, most of them in the victim search's simulations, and most undone).

    `previous_*` are the task's status, node and devices before the operation; a placement took
    `from_idle` from the node's idle resources and `from_releasing` (None: nothing) from its releasing
    ones. `shared_undo` undoes the shared-GPU bookkeeping of a task sharing GPUs (None otherwise)."""

    kind: Kind
    task: int
    node: int
    groups: tuple[str, ...]
    portion: float
    preemptor: str | None
    message: str
    previous_status: int
    previous_node: int = -1
    previous_groups: tuple[str, ...] = ()
    from_idle: Vector | None = None
    from_releasing: Vector | None = None
    shared_undo: Callable[[], None] | None = None


class Statement:
    """An operation log over a session; see the module docstring."""

    def __init__(self, session: Session, *, action: str) -> None:
        self.session = session
        self.action = action
        self._ops: list[_Op] = []

    def checkpoint(self) -> int:
        return len(self._ops)

    def rollback(self, checkpoint: int) -> None:
        ops = self._ops
        while len(ops) > checkpoint:
            op = ops.pop()
            if op.kind is Kind.EVICT:
                self._undo_evict(op)
            else:
                self._undo_place(op)

    def discard(self) -> None:
        self.rollback(0)

    # ----------------------------------------------------------------- operations
    def _count(self, task: Task, node: int, step: int) -> None:
        """The per-job, per-node and queue accounting every operation and undo shares: the task joins
        (step +1) or leaves (-1) its job's alive pods and its queue's allocation; the job and the node
        change."""
        s = self.session
        s.podset_alive[task.job][task.podset] += step
        s.job_version[task.job] += 1
        s.node_version[node] += 1
        s.node_log.append(node)
        s._charge_queue(s.snapshot.jobs[task.job], s.task_charge[task.index], step)

    def place(self, task: Task, node: int, *, pipelined: bool, choice: gpu_devices.DeviceChoice | None) -> None:
        """Allocate the task on the node (or pipeline it onto resources still being released)."""
        s = self.session
        req = task.request
        from_releasing = None  # placed on idle resources only
        from_idle = req
        if pipelined:
            from_releasing = np.minimum(np.maximum(s.releasing[node], 0.0), req)
            from_idle = req - from_releasing
            s.releasing[node] -= from_releasing
        s.idle[node] -= from_idle
        groups: tuple[str, ...] = ()
        portion = 0.0
        shared_undo = None
        if task.is_shared_gpu and choice is not None:
            portion = gpu_devices.task_portion(task, int(s.snapshot.nodes.gpu_memory_mib[node]))
            groups, shared_undo = self._share_devices(task, node, choice, portion)
        index = task.index
        previous_status = int(s.status[index])
        previous_node = int(s.node[index])
        previous_groups = s.gpu_groups[index]
        s.status[index] = _PIPELINED if pipelined else _ALLOCATED
        s.node[index] = node
        s.gpu_groups[index] = groups
        self._count(task, node, +1)
        self._ops.append(
            _Op(
                kind=Kind.PIPELINE if pipelined else Kind.BIND,
                task=index,
                node=node,
                groups=groups,
                portion=portion,
                preemptor=None,
                message="",
                previous_status=previous_status,
                previous_node=previous_node,
                previous_groups=previous_groups,
                from_idle=from_idle,
                from_releasing=from_releasing,
                shared_undo=shared_undo,
            )
        )

    def _share_devices(
        self, task: Task, node: int, choice: gpu_devices.DeviceChoice, portion: float
    ) -> tuple[tuple[str, ...], Callable[[], None]]:
        """Put a task sharing GPUs on the chosen devices of its node (new devices take a whole GPU, idle
        if there is one, else releasing); returns its device groups and the undo of this bookkeeping."""
        s = self.session
        created: list[str] = []
        extra_idle_gpu = 0.0
        extra_rel_gpu = 0.0
        devs = s.devices.setdefault(node, {})
        for g in choice.existing:
            devs[g].used += portion
            devs[g].tasks.add(task.index)
        for k in range(choice.new_devices):
            gid = gpu_devices.new_group_id(node=s.snapshot.nodes.names[node], now=s.now, task_key=task.key, ordinal=k)
            devs[gid] = gpu_devices.SharedDevice(group=gid, used=portion, releasing=0.0, tasks={task.index})
            created.append(gid)
            if s.idle[node, GPU] >= 1.0 - gpu_devices.EPS:
                s.idle[node, GPU] -= 1.0
                extra_idle_gpu += 1.0
            else:
                s.releasing[node, GPU] -= 1.0
                extra_rel_gpu += 1.0
        s.refresh_shared_rooms(node)

        def undo() -> None:
            devs = s.devices[node]
            for g in choice.existing:
                devs[g].used -= portion
                devs[g].tasks.discard(task.index)
            for g in created:
                del devs[g]
            s.idle[node, GPU] += extra_idle_gpu
            s.releasing[node, GPU] += extra_rel_gpu
            s.refresh_shared_rooms(node)

        return tuple(choice.existing) + tuple(created), undo

    def _undo_place(self, op: _Op) -> None:
        """The exact inverse of `place`: the node's resources back (idle, releasing, then the shared
        devices, in that order), the task's status, node and devices back, the accounting undone."""
        s = self.session
        node = op.node
        assert op.from_idle is not None, "a placement takes from idle"
        s.idle[node] += op.from_idle
        if op.from_releasing is not None:
            s.releasing[node] += op.from_releasing
        if op.shared_undo is not None:
            op.shared_undo()
        index = op.task
        s.status[index] = op.previous_status
        s.node[index] = op.previous_node
        s.gpu_groups[index] = op.previous_groups
        self._count(s.snapshot.tasks[index], node, -1)

    def evict(self, task: Task, *, preemptor: str | None, message: str) -> None:
        """Evict a running task: its resources become releasing and its queue stops paying for it."""
        s = self.session
        index = task.index
        node = int(s.node[index])
        previous_status = int(s.status[index])
        assert previous_status in (_RUNNING, _ALLOCATED), "only placed tasks are evicted"
        releasing = s.releasing[node]  # in place on the row's view
        releasing += task.request
        shared_undo = self._release_devices(task, node) if task.is_shared_gpu else None
        s.status[index] = _RELEASING
        self._count(task, node, -1)
        self._ops.append(
            _Op(
                kind=Kind.EVICT,
                task=index,
                node=node,
                groups=s.gpu_groups[index],
                portion=0.0,
                preemptor=preemptor,
                message=message,
                previous_status=previous_status,
                shared_undo=shared_undo,
            )
        )

    def _release_devices(self, task: Task, node: int) -> Callable[[], None]:
        """Mark an evicted task's share of its GPUs as releasing (a device all of whose holders leave
        becomes a releasing whole GPU); returns the undo of this bookkeeping."""
        s = self.session
        moved_gpu = 0.0
        shared_changes: list[tuple[str, float]] = []
        devs = s.devices.get(node, {})
        for g in s.gpu_groups[task.index]:
            dev = devs.get(g)
            if dev is None:
                continue
            portion = gpu_devices.task_portion(task, int(s.snapshot.nodes.gpu_memory_mib[node]))
            was_releasing = dev.all_releasing
            dev.releasing += portion
            shared_changes.append((g, portion))
            if dev.all_releasing and not was_releasing:
                s.releasing[node, GPU] += 1.0
                moved_gpu += 1.0
        s.refresh_shared_rooms(node)

        def undo() -> None:
            s.releasing[node, GPU] -= moved_gpu
            devs = s.devices.get(node, {})
            for g, portion in shared_changes:
                devs[g].releasing -= portion
            if shared_changes:
                s.refresh_shared_rooms(node)

        return undo

    def _undo_evict(self, op: _Op) -> None:
        """The exact inverse of `evict`: the node's releasing resources back (then the shared devices),
        the task's status back, the accounting undone."""
        s = self.session
        node = op.node
        task = s.snapshot.tasks[op.task]
        releasing = s.releasing[node]  # in place on the row's view
        releasing -= task.request
        if op.shared_undo is not None:
            op.shared_undo()
        s.status[op.task] = op.previous_status
        self._count(task, node, +1)

    def convert_to_pipelined(self, tasks: set[int]) -> None:
        """Mark placements of these tasks as pipelined (a gang is pipelined whole if any member is)."""
        s = self.session
        for i, op in enumerate(self._ops):
            if op.task in tasks and op.kind is Kind.BIND:
                s.status[op.task] = _PIPELINED
                self._ops[i] = msgspec.structs.replace(op, kind=Kind.PIPELINE)

    def label_evictions(self, checkpoint: int, message: Callable[[int], str]) -> None:
        """Give the evictions recorded since `checkpoint` their messages (`message(task)`), once the
        outcome they describe is known (the victim search learns it only by simulating)."""
        for i in range(checkpoint, len(self._ops)):
            op = self._ops[i]
            if op.kind is Kind.EVICT:
                self._ops[i] = msgspec.structs.replace(op, message=message(op.task))

    # ----------------------------------------------------------------- outcome
    def commit(self) -> None:
        s = self.session
        names = s.snapshot.nodes.names
        # a victim evicted and re-placed in the same statement is moved: the pod is evicted and its
        # replacement (recreated by its controller) is placed later, so only the eviction leaves
        evicted = {op.task for op in self._ops if op.kind is Kind.EVICT}
        for op in self._ops:
            task = s.snapshot.tasks[op.task]
            if op.kind is not Kind.EVICT and op.task in evicted:
                continue
            if op.kind is Kind.EVICT:
                job = s.snapshot.jobs[task.job]
                s.evictions.append(
                    Eviction(
                        pod=task.key,
                        podgroup=job.key,
                        node=names[op.node],
                        action=self.action,
                        preemptor=op.preemptor,
                        message=op.message,
                    )
                )
            else:
                s.placements.append(
                    Placement(
                        kind=op.kind,
                        pod=task.key,
                        node=names[op.node],
                        gpu_groups=op.groups,
                        gpu_portion=op.portion,
                        action=self.action,
                    )
                )
        self._ops.clear()
