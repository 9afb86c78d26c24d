"""Shared GPU devices inside a session: which groups exist on a node and how full they are.

A shared device (GPU group) takes one whole GPU of its node; fractional tasks take portions of
it. Group ids are derived from the node, the cycle time and the first task, so the same input
always yields the same ids (the binder reports them in the `runai-gpu-group` label).
"""

from __future__ import annotations

import hashlib
import math

import msgspec

from kai.core.model import Snapshot, Task

EPS = 1e-9


class SharedDevice(msgspec.Struct):
    group: str
    used: float  # portion held by alive and releasing tasks
    releasing: float  # portion held by releasing tasks
    tasks: set[int] = msgspec.field(default_factory=set)

    def room_now(self) -> float:
        return 1.0 - self.used

    def room_later(self) -> float:
        return 1.0 - self.used + self.releasing

    @property
    def all_releasing(self) -> bool:
        return self.used > 0 and abs(self.used - self.releasing) < EPS


class DeviceChoice(msgspec.Struct, frozen=True, kw_only=True):
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

    Candidates are existing shared devices with room once their releasing holders leave (devices
    whose holders are all leaving are not candidates: they count as releasing whole GPUs) and whole
    GPUs (idle now, or releasing). As KAI's GPU order functions:

    * pack (gpupack) scores a shared device by its used portion (releasing and pipelined holders
      included) and a whole GPU 0: the fullest shared device wins even when the task must wait for
      its releasing holders (it is then pipelined there rather than opening a new GPU);
    * spread (gpuspread) scores a whole GPU 1 and a shared device 1 - used: idle GPUs first, then the
      emptiest shared device that has room now, then devices and GPUs that free up later.

    Ties break on the group id. The choice is pipelined if any chosen device lacks room now.
    """
    fitting: list[tuple[float, str, bool]] = []  # (used, group, has room now)
    for dev in devices.values():
        if dev.all_releasing or dev.room_later() + EPS < portion:
            continue
        fitting.append((dev.used, dev.group, dev.room_now() + EPS >= portion))
    # whole GPUs beyond `count` of either kind can never be chosen (a node may declare any number)
    whole_now = int(idle_gpus + EPS)
    whole_later = min(count, int(idle_gpus + releasing_gpus + EPS) - whole_now)
    whole_now = min(count, whole_now)
    # ordered candidates: (existing group or None for a new device, pipelined)
    order: list[tuple[str | None, bool]] = []
    if pack:
        fitting.sort(key=lambda c: (-c[0], c[1]))
        order += [(group, not now) for _, group, now in fitting]
        order += [(None, False)] * whole_now + [(None, True)] * whole_later
    else:
        fitting.sort(key=lambda c: (c[0], c[1]))
        order += [(None, False)] * whole_now
        order += [(group, False) for _, group, now in fitting if now]
        order += [(group, True) for _, group, now in fitting if not now]
        order += [(None, True)] * whole_later
    if len(order) < count:
        return None
    chosen = order[:count]
    return DeviceChoice(
        existing=tuple(group for group, _ in chosen if group is not None),
        new_devices=sum(1 for group, _ in chosen if group is None),
        pipelined=any(pipelined for _, pipelined in chosen),
    )
