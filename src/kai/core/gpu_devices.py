"""Shared GPU devices inside a session: which groups exist on a node and how full they are.

A shared device (GPU group) takes one whole GPU of its node; fractional tasks take portions of
it. Group ids are derived from the node, the cycle time and the first task, so the same input
always yields the same ids (the binder reports them in the `runai-gpu-group` label).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

from kai.core.model import Snapshot, Task

EPS = 1e-9


@dataclass(slots=True)
class SharedDevice:
    group: str
    used: float  # portion held by alive and releasing tasks
    releasing: float  # portion held by releasing tasks
    tasks: set[int] = field(default_factory=set)

    def room_now(self) -> float:
        return 1.0 - self.used

    def room_later(self) -> float:
        return 1.0 - self.used + self.releasing

    @property
    def all_releasing(self) -> bool:
        return self.used > 0 and abs(self.used - self.releasing) < EPS


@dataclass(frozen=True, kw_only=True, slots=True)
class DeviceChoice:
    """Devices picked for a shared-GPU task on one node: existing groups and new whole GPUs."""

    existing: tuple[str, ...]
    new_devices: int
    pipelined: bool


def task_portion(task: Task, gpu_memory_mib: int) -> float:
    """The portion of one device a shared-GPU task takes on a node with the given GPU memory (MiB)."""
    if task.gpu_portion > 0:
        return task.gpu_portion
    return math.ceil(task.gpu_memory_mib / gpu_memory_mib * 100) / 100


def initial_devices(snapshot: Snapshot) -> dict[int, dict[str, SharedDevice]]:
    devices: dict[int, dict[str, SharedDevice]] = {}
    for g in snapshot.shared_gpus:
        devices.setdefault(g.node, {})[g.group] = SharedDevice(
            group=g.group, used=g.portion_used, releasing=g.portion_releasing, tasks=set(g.tasks)
        )
    return devices


def new_group_id(*, node: str, now: float, task_key: str, ordinal: int) -> str:
    """A deterministic UUID-shaped id for a new shared device."""
    digest = hashlib.sha1(f"{node}|{now!r}|{task_key}|{ordinal}".encode()).hexdigest()
    return f"{digest[0:8]}-{digest[8:12]}-4{digest[13:16]}-8{digest[17:20]}-{digest[20:32]}"


def choose_devices(
    *,
    devices: dict[str, SharedDevice],
    portion: float,
    count: int,
    idle_gpus: float,
    releasing_gpus: float,
    pack: bool,
) -> DeviceChoice | None:
    """Pick `count` devices for a task taking `portion` of each, or None if the node cannot host it.

    Candidates are existing shared devices with room (now, or once releasing tasks leave) and
    whole GPUs (idle now, or releasing). `pack` (gpupack) prefers the fullest shared device, spread
    (gpuspread) prefers whole idle GPUs. Ties break on the group id.
    """
    now_fit: list[tuple[float, str]] = []
    later_fit: list[tuple[float, str]] = []
    for dev in devices.values():
        if dev.all_releasing:
            continue
        if dev.room_now() + EPS >= portion:
            now_fit.append((dev.used, dev.group))
        elif dev.room_later() + EPS >= portion:
            later_fit.append((dev.used, dev.group))
    whole_now = int(idle_gpus + EPS)
    whole_later = int(idle_gpus + releasing_gpus + EPS) - whole_now
    if pack:
        now_fit.sort(key=lambda c: (-c[0], c[1]))
    else:
        now_fit.sort(key=lambda c: (c[0], c[1]))
    later_fit.sort(key=lambda c: (-c[0], c[1]))
    existing: list[str] = []
    new = 0
    pipelined = False
    # immediate candidates first, in policy order
    if pack:
        for _, group in now_fit:
            if len(existing) < count:
                existing.append(group)
        new = min(count - len(existing), whole_now)
    else:
        new = min(count, whole_now)
        for _, group in now_fit:
            if len(existing) + new < count:
                existing.append(group)
    missing = count - len(existing) - new
    if missing > 0:
        pipelined = True
        for _, group in later_fit:
            if missing > 0:
                existing.append(group)
                missing -= 1
        extra = min(missing, whole_later)
        new += extra
        missing -= extra
    if missing > 0:
        return None
    return DeviceChoice(existing=tuple(existing), new_devices=new, pipelined=pipelined)
