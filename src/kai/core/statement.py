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
from kai.core.resources import GPU
from kai.core.session import Session


class _Op(msgspec.Struct, frozen=True, kw_only=True):
    """One logged operation and its exact inverse (a msgspec Struct: one is made per placement)."""

    kind: Kind
    task: int
    node: int
    groups: tuple[str, ...]
    portion: float
    preemptor: str | None
    message: str
    undo: Callable[[], None]


class Statement:
    """An operation log over a session; see the module docstring."""

    def __init__(self, session: Session, *, action: str) -> None:
        self.session = session
        self.action = action
        self._ops: list[_Op] = []

    def checkpoint(self) -> int:
        return len(self._ops)

    def rollback(self, checkpoint: int) -> None:
        while len(self._ops) > checkpoint:
            self._ops.pop().undo()

    def discard(self) -> None:
        self.rollback(0)

    # ----------------------------------------------------------------- operations
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
        created: list[str] = []
        extra_idle_gpu = 0.0
        extra_rel_gpu = 0.0
        if task.is_shared_gpu and choice is not None:
            portion = gpu_devices.task_portion(task, int(s.snapshot.nodes.gpu_memory_mib[node]))
            devs = s.devices.setdefault(node, {})
            for g in choice.existing:
                devs[g].used += portion
                devs[g].tasks.add(task.index)
            for k in range(choice.new_devices):
                gid = gpu_devices.new_group_id(
                    node=s.snapshot.nodes.names[node], now=s.now, task_key=task.key, ordinal=k
                )
                devs[gid] = gpu_devices.SharedDevice(group=gid, used=portion, releasing=0.0, tasks={task.index})
                created.append(gid)
                if s.idle[node, GPU] >= 1.0 - gpu_devices.EPS:
                    s.idle[node, GPU] -= 1.0
                    extra_idle_gpu += 1.0
                else:
                    s.releasing[node, GPU] -= 1.0
                    extra_rel_gpu += 1.0
            groups = tuple(choice.existing) + tuple(created)
            s.refresh_shared_rooms(node)
        status = TaskStatus.PIPELINED if pipelined else TaskStatus.ALLOCATED
        job = s.snapshot.jobs[task.job]
        previous_status = int(s.status[task.index])
        previous_node = int(s.node[task.index])
        previous_groups = s.gpu_groups[task.index]
        s.status[task.index] = status
        s.node[task.index] = node
        s.gpu_groups[task.index] = groups
        s.podset_alive[task.job][task.podset] += 1
        s.job_version[task.job] += 1
        s.node_version[node] += 1
        s.node_changes += 1
        charge = s.task_charge[task.index]
        s._charge_queue(job, charge, +1.0)

        def undo() -> None:
            s.idle[node] += from_idle
            if from_releasing is not None:
                s.releasing[node] += from_releasing
            if task.is_shared_gpu and choice is not None:
                devs = s.devices[node]
                for g in choice.existing:
                    devs[g].used -= portion
                    devs[g].tasks.discard(task.index)
                for g in created:
                    del devs[g]
                s.idle[node, GPU] += extra_idle_gpu
                s.releasing[node, GPU] += extra_rel_gpu
                s.refresh_shared_rooms(node)
            s.status[task.index] = previous_status
            s.node[task.index] = previous_node
            s.gpu_groups[task.index] = previous_groups
            s.podset_alive[task.job][task.podset] -= 1
            s.job_version[task.job] += 1
            s.node_version[node] += 1
            s.node_changes += 1
            s._charge_queue(job, charge, -1.0)

        kind = Kind.PIPELINE if pipelined else Kind.BIND
        self._ops.append(
            _Op(
                kind=kind,
                task=task.index,
                node=node,
                groups=groups,
                portion=portion,
                preemptor=None,
                message="",
                undo=undo,
            )
        )

    def evict(self, task: Task, *, preemptor: str | None, message: str) -> None:
        """Evict a running task: its resources become releasing and its queue stops paying for it."""
        s = self.session
        node = int(s.node[task.index])
        previous_status = int(s.status[task.index])
        assert previous_status in (TaskStatus.RUNNING, TaskStatus.ALLOCATED), "only placed tasks are evicted"
        job = s.snapshot.jobs[task.job]
        req = task.request
        s.releasing[node] += req
        moved_gpu = 0.0
        shared_changes: list[tuple[str, float]] = []
        if task.is_shared_gpu:
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
        s.status[task.index] = TaskStatus.RELEASING
        s.podset_alive[task.job][task.podset] -= 1
        s.job_version[task.job] += 1
        s.node_version[node] += 1
        s.node_changes += 1
        charge = s.task_charge[task.index]
        s._charge_queue(job, charge, -1.0)

        def undo() -> None:
            s.releasing[node] -= req
            s.releasing[node, GPU] -= moved_gpu
            devs = s.devices.get(node, {})
            for g, portion in shared_changes:
                devs[g].releasing -= portion
            if shared_changes:
                s.refresh_shared_rooms(node)
            s.status[task.index] = previous_status
            s.podset_alive[task.job][task.podset] += 1
            s.job_version[task.job] += 1
            s.node_version[node] += 1
            s.node_changes += 1
            s._charge_queue(job, charge, +1.0)

        self._ops.append(
            _Op(
                kind=Kind.EVICT,
                task=task.index,
                node=node,
                groups=s.gpu_groups[task.index],
                portion=0.0,
                preemptor=preemptor,
                message=message,
                undo=undo,
            )
        )

    def convert_to_pipelined(self, tasks: set[int]) -> None:
        """Mark placements of these tasks as pipelined (a gang is pipelined whole if any member is)."""
        s = self.session
        for i, op in enumerate(self._ops):
            if op.task in tasks and op.kind is Kind.BIND:
                s.status[op.task] = TaskStatus.PIPELINED
                inner = op.undo

                def undo(inner: Callable[[], None] = inner) -> None:
                    inner()

                self._ops[i] = _Op(
                    kind=Kind.PIPELINE,
                    task=op.task,
                    node=op.node,
                    groups=op.groups,
                    portion=op.portion,
                    preemptor=None,
                    message="",
                    undo=undo,
                )

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
