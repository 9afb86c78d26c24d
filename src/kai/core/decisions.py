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


@dataclass(frozen=True, kw_only=True, slots=True)
class CycleResult:
    placements: tuple[Placement, ...]
    evictions: tuple[Eviction, ...]
    conditions: tuple[JobCondition, ...]
    events: tuple[Event, ...]
    starts: tuple[JobStart, ...]
    stale_marks: tuple[StaleMark, ...]
    fair_share: dict[str, tuple[float, float, float]]  # queue -> (gpu, cpu millicores, memory bytes)
