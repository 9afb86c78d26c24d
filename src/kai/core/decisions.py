"""Decisions leave the core as data: binds, pipelines, evictions, job conditions and events.

The adapter (simulator or Kubernetes) applies them; the core never performs an effect itself.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Kind(enum.StrEnum):
    BIND = "Bind"
    PIPELINE = "Pipeline"
    EVICT = "Evict"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, kw_only=True, slots=True)
class Placement:
    """Bind a pod to a node (or nominate it there, for a pipelined pod)."""

    kind: Kind  # BIND or PIPELINE
    pod: str  # namespace/name
    node: str
    gpu_groups: tuple[str, ...]
    gpu_portion: float  # portion of each shared device; 0 for whole-GPU or CPU pods
    action: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Eviction:
    pod: str
    podgroup: str  # namespace/name
    node: str
    action: str
    preemptor: str | None  # namespace/name of the PodGroup the eviction makes room for
    message: str


@dataclass(frozen=True, kw_only=True, slots=True)
class JobCondition:
    """Why a PodGroup did not (fully) schedule in this cycle."""

    podgroup: str
    reason: str  # OverLimit, NonPreemptibleOverQuota, QueueDoesNotExist, Unschedulable, ...
    message: str
    queue: str | None = None  # the queue whose limit or quota blocks the group (capacity reasons)


@dataclass(frozen=True, kw_only=True, slots=True)
class Event:
    type: str  # Normal or Warning
    reason: str
    object: str  # Kind/namespace/name
    message: str


@dataclass(frozen=True, kw_only=True, slots=True)
class JobStart:
    """A job that became running in this cycle (its last-start timestamp is now)."""

    podgroup: str


@dataclass(frozen=True, kw_only=True, slots=True)
class StaleMark:
    """Set (since=time) or clear (since=None) a PodGroup's stale timestamp."""

    podgroup: str
    since: float | None


Triple = tuple[float, float, float]  # (gpu devices, cpu millicores, memory bytes)


@dataclass(frozen=True, kw_only=True, slots=True)
class QueueFigures:
    """A queue's numbers as the cycle leaves them, rolled up from its descendants.

    `allocated` and `allocated_non_preemptible` hold the pods bound once the cycle's decisions are
    applied (pipelined and releasing pods excluded); `requested` adds the pods still waiting.
    """

    fair_share: Triple
    allocated: Triple
    allocated_non_preemptible: Triple
    requested: Triple
    quota: Triple = (0.0, 0.0, 0.0)  # -1: unlimited
    limit: Triple = (-1.0, -1.0, -1.0)  # -1: none


@dataclass(frozen=True, kw_only=True, slots=True)
class JobFigures:
    """A PodGroup's resources as the cycle leaves them (same rules as `QueueFigures`)."""

    allocated: Triple
    allocated_non_preemptible: Triple
    requested: Triple


@dataclass(frozen=True, kw_only=True, slots=True)
class CycleResult:
    placements: tuple[Placement, ...]
    evictions: tuple[Eviction, ...]
    conditions: tuple[JobCondition, ...]
    events: tuple[Event, ...]
    starts: tuple[JobStart, ...]
    stale_marks: tuple[StaleMark, ...]
    queues: dict[str, QueueFigures]  # by queue name, every queue of the snapshot
    jobs: dict[str, JobFigures]  # by PodGroup namespace/name

    @property
    def fair_share(self) -> dict[str, Triple]:
        return {name: figures.fair_share for name, figures in self.queues.items()}
