"""The simulated cluster's mutable state: pods with their lifecycle, PodGroups with their status.

Pod lifecycle in the simulator (every edge a named transition):
Pending -> Running (bind), Pending -> Pipelined (nominated onto releasing resources),
Pipelined -> Pending (re-placed next cycle), Running -> Releasing (evicted),
Releasing -> gone (grace period over), Running -> Succeeded (duration elapsed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kai.api.pod import Pod
from kai.api.podgroup import PodGroup
from kai.cluster.effects import Condition
from kai.core.model import TaskStatus

TRANSITIONS: dict[TaskStatus, frozenset[TaskStatus]] = {
    TaskStatus.PENDING: frozenset({TaskStatus.RUNNING, TaskStatus.PIPELINED}),
    TaskStatus.PIPELINED: frozenset({TaskStatus.PENDING, TaskStatus.RUNNING, TaskStatus.PIPELINED}),
    TaskStatus.RUNNING: frozenset({TaskStatus.RELEASING, TaskStatus.SUCCEEDED, TaskStatus.FAILED}),
    TaskStatus.RELEASING: frozenset(),
    TaskStatus.SUCCEEDED: frozenset(),
    TaskStatus.FAILED: frozenset(),
}


@dataclass(slots=True)
class SimPod:
    pod: Pod
    raw: dict[str, Any]
    ours: bool
    status: TaskStatus
    node: str | None = None
    nominated_node: str | None = None
    gpu_groups: tuple[str, ...] = ()
    gpu_portion: float = 0.0
    gpu_devices: tuple[int, ...] = ()  # physical GPU indices on the node (the binder's choice)
    env: dict[str, str] = field(default_factory=dict)  # NVIDIA_VISIBLE_DEVICES, GPU_PORTION, ...
    start_time: float | None = None
    finish_at: float | None = None
    release_at: float | None = None
    duration: float | None = None
    podgroup: str | None = None
    reason: str | None = None
    message: str | None = None
    owner: tuple[str, str] | None = None  # top owner (kind, name)
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    def move(self, to: TaskStatus) -> None:
        if to not in TRANSITIONS[self.status]:
            raise ValueError(f"pod {self.pod.key}: invalid transition {self.status} -> {to}")
        self.status = to


@dataclass(slots=True)
class SimPodGroup:
    podgroup: PodGroup
    condition: Condition | None = None  # the scheduling condition of the last cycle
    last_start: float | None = None
    stale_since: float | None = None
    derived: bool = False  # made by the pod grouper rather than applied by the user
    owner_uid: str = ""  # the pod grouper's: its top owner, with which garbage collection deletes it
