"""Where can a task go? Vectorized node filtering with the reasons the others were ruled out.

A node fits *now* if the task's request fits its idle resources, and *later* if it fits idle plus
releasing resources (the task is then pipelined). Shared-GPU tasks also need devices with room.
Fit errors are counted per reason so a user reads `0/4 nodes: 3 insufficient nvidia.com/gpu,
1 node selector mismatch`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection

import msgspec
import numpy as np
import numpy.typing as npt

from kai.core import constraints as constraint_lib
from kai.core import gpu_devices
from kai.core.model import BoolVector, Matrix, Task
from kai.core.resources import GPU, PODS, Vector
from kai.core.session import Session

EPS = 1e-9


class Fit(msgspec.Struct, frozen=True, kw_only=True):
    """Where a task fits. For shared-GPU tasks the devices on a node are chosen on demand."""

    session: Session
    task: Task
    now: BoolVector  # nodes where the task fits on idle resources
    later: BoolVector  # nodes where it fits once releasing resources are gone (includes `now`)
    # shared-GPU tasks: an existing shared device fits the task, now or once its releasing holders
    # leave (KAI's gpusharingorder condition)
    shares_existing: BoolVector

    def choice(self, node: int) -> gpu_devices.DeviceChoice | None:
        """The shared devices the task would use on `node` (None for tasks that do not share GPUs)."""
        if not self.task.is_shared_gpu:
            return None
        s = self.session
        return gpu_devices.choose_devices(
            devices=s.devices.get(node, {}),
            portion=gpu_devices.task_portion(self.task, int(s.snapshot.nodes.gpu_memory_mib[node])),
            count=max(1, self.task.gpu_devices),
            idle_gpus=float(max(0.0, s.idle[node, GPU])),
            releasing_gpus=float(max(0.0, s.releasing[node, GPU])),
            pack=s.config.gpu_device_policy != "spread",
        )


def predicate_mask(session: Session, task: Task) -> BoolVector:
    """Nodes the predicates admit (constraints, cordons, plugin predicates), before resources."""
    snap = session.snapshot
    mask = snap.constraint_masks[task.constraint] & snap.nodes.schedulable
    for predicate in session.predicates:
        mask = mask & predicate(session, task)
    return mask


def _portions(session: Session, task: Task) -> Vector | float:
    """The portion of a device the task takes on each node (a memory request depends on the node)."""
    if task.gpu_portion > 0:
        return task.gpu_portion
    memory = session.snapshot.nodes.gpu_memory_mib.astype(np.float64)
    return np.asarray(np.ceil(task.gpu_memory_mib / memory * 100.0) / 100.0, dtype=np.float64)


def find_fit(session: Session, task: Task) -> Fit:
    mask = predicate_mask(session, task)
    room_now, room_later = _room(session, task, slice(None))
    now = mask & room_now
    later = mask & room_later
    shares = np.zeros(session.snapshot.nodes.count, dtype=np.bool_)
    if task.is_shared_gpu:
        portion = _portions(session, task)
        fits_device = np.broadcast_to(np.asarray(portion) <= 1.0 + EPS, now.shape)
        if max(1, task.gpu_devices) == 1:
            # One device: vectorized over the session's per-node best room on shared devices.
            whole_now = session.idle[:, GPU] >= 1.0 - EPS
            whole_later = session.idle[:, GPU] + session.releasing[:, GPU] >= 1.0 - EPS
            shares_now = session.shared_room_now >= portion - EPS
            shares = session.shared_room_later >= portion - EPS
            now &= fits_device & (shares_now | whole_now)
            later &= fits_device & (shares | whole_later)
            if session.config.gpu_device_policy != "spread":
                # gpupack takes the fullest device that fits once its releasing holders leave, even with
                # room elsewhere: where that device lacks room now the task is pipelined, not placed now.
                # Only nodes where something is being released can hold such a device.
                releasing_here = np.any(session.releasing > EPS, axis=1)
                waiting = now & shares & (releasing_here | (session.shared_room_later > session.shared_room_now + EPS))
                partial = Fit(session=session, task=task, now=now, later=later, shares_existing=shares)
                for n in np.flatnonzero(waiting):
                    choice = partial.choice(int(n))
                    if choice is not None and choice.pipelined:
                        now[n] = False
        else:
            # Several devices: ask the device chooser per candidate node.
            partial = Fit(session=session, task=task, now=now, later=later, shares_existing=shares)
            for n in np.flatnonzero(later):
                node = int(n)
                choice = partial.choice(node) if fits_device[node] else None
                if choice is None:
                    later[node] = now[node] = False
                elif choice.pipelined:
                    now[node] = False
            shares = later & _shares_later(session, portion)
    return Fit(session=session, task=task, now=now, later=later, shares_existing=shares & later)


_FEW = 4  # up to this many changed nodes, refitting node by node in Python floats beats numpy's per-call cost


def refit_nodes(session: Session, fit: Fit, nodes: Collection[int], task: Task) -> Fit:
    """`fit` for `task` (a task with the same request and constraint as `fit.task`, sharing no GPU)
    after `nodes` changed: `find_fit` again, computed for those nodes only (no other node changed)."""
    assert not task.is_shared_gpu and not session.predicates
    now, later = fit.now.copy(), fit.later.copy()
    if len(nodes) <= _FEW:
        for node in nodes:
            now[node], later[node] = _fits_one(session, task, node)
    else:
        changed = np.fromiter(nodes, dtype=np.int64, count=len(nodes))
        now[changed], later[changed] = _fits_at(session, task, changed)
    return Fit(session=session, task=task, now=now, later=later, shares_existing=fit.shares_existing)


def fits_now_at(session: Session, task: Task, node: int) -> bool:
    """Whether `task` (sharing no GPU, no plugin predicates) fits `node`'s idle resources: `find_fit`'s
    `now` for that node."""
    return _admits(session, task, node) and bool(_room_for(session.idle[node], task.request))


def _fits_one(session: Session, task: Task, node: int) -> tuple[bool, bool]:
    """`_fits_at` on one node (now, later), with `_room_for`'s one-node comparisons in Python floats."""
    if not _admits(session, task, node):
        return False, False
    idle = session.idle[node]
    return bool(_room_for(idle, task.request)), bool(_room_for(idle + session.releasing[node], task.request))


def _admits(session: Session, task: Task, node: int) -> bool:
    """Whether the task's constraint admits `node` and the node is schedulable (no plugin predicates)."""
    snap = session.snapshot
    return bool(snap.constraint_masks[task.constraint][node] and snap.nodes.schedulable[node])


def _fits_at(session: Session, task: Task, nodes: npt.NDArray[np.int64]) -> tuple[BoolVector, BoolVector]:
    """`find_fit`'s now and later on `nodes` only, for a task sharing no GPU without plugin predicates."""
    snap = session.snapshot
    admitted = snap.constraint_masks[task.constraint][nodes] & snap.nodes.schedulable[nodes]
    room_now, room_later = _room(session, task, nodes)
    return admitted & room_now, admitted & room_later


def _room(session: Session, task: Task, nodes: npt.NDArray[np.int64] | slice) -> tuple[BoolVector, BoolVector]:
    """Whether the task's request fits the idle resources of `nodes` (now), and idle plus releasing (later)."""
    asked = np.flatnonzero(task.request > 0)  # only these columns are read: `_room_for`'s rule
    need = task.request[asked]
    idle = session.idle[nodes][:, asked]
    return _room_for(idle, need), _room_for(idle + session.releasing[nodes][:, asked], need)


_YES, _NO = np.asarray(True), np.asarray(False)  # `_room_for` of one node (read-only)
_YES.flags.writeable = _NO.flags.writeable = False


def _room_for(free: Matrix | Vector, request: Vector) -> BoolVector:
    """Whether `request` fits `free` (one node's row, or rows [nodes, resources]). As kube-scheduler: only
    the resources asked for are checked (an overcommitted resource the task does not use does not rule a
    node out)."""
    if free.ndim == 1:  # one node: the same comparisons in Python floats, without numpy's per-call cost
        for have, need in zip(free.tolist(), request.tolist(), strict=True):
            if need > 0 and not have >= need - EPS:
                return _NO
        return _YES
    asked = request > 0
    if not asked.all():
        free, request = free[..., asked], request[asked]
    fits: BoolVector = np.asarray((free >= request - EPS).all(axis=-1))
    return fits


def _shares_later(session: Session, portion: Vector | float) -> BoolVector:
    """Nodes with a shared device the portion fits on once releasing holders leave (KAI's group fit)."""
    return np.asarray(session.shared_room_later >= np.asarray(portion) - EPS, dtype=np.bool_)


def fit_errors(session: Session, task: Task, fit: Fit) -> str:
    """A kube-scheduler-style summary of why nodes were ruled out (vectorized; one reason per node)."""
    snap = session.snapshot
    nodes = snap.nodes
    reasons: Counter[str] = Counter()
    constraint = snap.constraints[task.constraint]
    remaining = ~fit.later
    unschedulable = remaining & ~nodes.schedulable
    if unschedulable.any():
        reasons["node is unschedulable or not ready"] += int(unschedulable.sum())
    remaining &= nodes.schedulable
    rejected = remaining & ~snap.constraint_masks[task.constraint]
    for n in np.flatnonzero(rejected):
        why = constraint_lib.selector_mismatch(constraint, labels=nodes.labels[n], node_name=nodes.names[n])
        if why is None:
            taint = constraint_lib.untolerated_taint(constraint, nodes.taints[n])
            why = f"untolerated taint {taint.key}" if taint is not None else "node affinity mismatch"
        reasons[why] += 1
    remaining &= ~rejected
    short = ((session.idle + session.releasing) < task.request - EPS) & (task.request > 0)  # [N, R]
    names = snap.resources.names
    order = [GPU] + [r for r in range(len(names)) if r != GPU]
    for r in order:
        hit = remaining & short[:, r]
        if hit.any():
            reasons["too many pods" if r == PODS else f"insufficient {names[r]}"] += int(hit.sum())
            remaining &= ~hit
    if remaining.any() and task.is_shared_gpu and task.gpu_memory_mib > 0:
        too_big = remaining & (nodes.gpu_memory_mib < task.gpu_memory_mib)
        if too_big.any():
            largest = int(nodes.gpu_memory_mib.max())
            reasons[
                f"gpu-memory {task.gpu_memory_mib} MiB is more than the node's GPU memory (largest {largest} MiB)"
            ] += int(too_big.sum())
            remaining &= ~too_big
    if remaining.any():
        count = int(remaining.sum())
        if task.is_shared_gpu:
            reasons["no GPU with enough free memory for the fraction"] += count
        else:
            reasons["rejected by a scheduling plugin"] += count
    parts = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items(), key=lambda rc: (-rc[1], rc[0])))
    return f"0/{nodes.count} nodes: {parts}" if parts else f"0/{nodes.count} nodes"
