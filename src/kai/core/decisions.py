"""Decisions leave the core as data: binds, pipelines, evictions, job conditions and events.

The adapter (simulator or Kubernetes) applies them; the core never performs an effect itself.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import msgspec


class Kind(enum.StrEnum):
    BIND = "Bind"
    PIPELINE = "Pipeline"
    EVICT = "Evict"

    def __str__(self) -> str:
        return self.value


class Placement(msgspec.Struct, frozen=True, kw_only=True):
    """Bind a pod to a node (or nominate it there, for a pipelined pod)."""

    kind: Kind  # BIND or PIPELINE
    pod: str  # namespace/name
    node: str
    gpu_groups: tuple[str, ...]
    gpu_portion: float  # portion of each shared device; 0 for whole-GPU or CPU pods
    action: str


class Eviction(msgspec.Struct, frozen=True, kw_only=True):
    pod: str
    podgroup: str  # namespace/name
    node: str
    action: str
    preemptor: str | None  # namespace/name of the PodGroup the eviction makes room for
    message: str


class JobCondition(msgspec.Struct, frozen=True, kw_only=True):
    """Why a PodGroup did not (fully) schedule in this cycle."""

    podgroup: str
    reason: str  # OverLimit, NonPreemptibleOverQuota, QueueDoesNotExist, Unschedulable, ...
    message: str
    queue: str | None = None  # the queue whose limit or quota blocks the group (capacity reasons)


class Event(msgspec.Struct, frozen=True, kw_only=True):
    type: str  # Normal or Warning
    reason: str
    object: str  # Kind/namespace/name
    message: str


class JobStart(msgspec.Struct, frozen=True, kw_only=True):
    """A job that became running in this cycle (its last-start timestamp is now)."""

    podgroup: str


class StaleMark(msgspec.Struct, frozen=True, kw_only=True):
    """Set (since=time) or clear (since=None) a PodGroup's stale timestamp."""

    podgroup: str
    since: float | None


Triple = tuple[float, float, float]  # (gpu devices, cpu millicores, memory bytes)


class QueueFigures(msgspec.Struct, frozen=True, kw_only=True):
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


class JobFigures(msgspec.Struct, frozen=True, kw_only=True):
    """A PodGroup's resources as the cycle leaves them (same rules as `QueueFigures`)."""

    allocated: Triple
    allocated_non_preemptible: Triple
    requested: Triple


class SearchReport(msgspec.Struct, frozen=True, kw_only=True):
    """How one action's victim searches ended in a cycle (what KAI's scenario-search metrics count).

    Per job attempt: `solved` (a valid scenario was found), `failed` (none was), `remembered` (of the
    failed: not searched again, because the same search failed in an earlier cycle and nothing has
    changed since), `not_attempted` (left when the action's scenario budget ran out, the search it cut
    short included). `scenarios`: scenarios charged to the budget (a remembered search is charged what
    it cost when it ran); `budget_exhausted`: the budget ran out and the action stopped there.
    """

    action: str
    solved: int = 0
    failed: int = 0
    remembered: int = 0
    not_attempted: int = 0
    scenarios: int = 0
    budget_exhausted: bool = False


SearchKey = tuple[str, str, tuple[object, ...]]  # (action, PodGroup namespace/name, the attempt's signature)


class HopelessSearches(msgspec.Struct, frozen=True, kw_only=True):
    """The job attempts whose victim search failed in a cycle, each with the scenarios it cost.

    While the cluster is exactly as the cycle saw it and no clock rule has changed an outcome (the
    clock is in [since, until): minimum runtimes, preemption delays and staleness grace periods
    end at `until` at the earliest), a next cycle replays this one up to each of these attempts, so
    each would fail again: the next cycle may skip them (`kai.scheduler.cycle.run_actions`). Only an
    adapter that knows nothing changed since this cycle's snapshot may pass them on.
    """

    attempts: Mapping[SearchKey, int] = msgspec.field(default_factory=dict)
    since: float = 0.0
    until: float = float("inf")


class CycleResult(msgspec.Struct, frozen=True, kw_only=True):
    placements: tuple[Placement, ...]
    evictions: tuple[Eviction, ...]
    conditions: tuple[JobCondition, ...]
    events: tuple[Event, ...]
    starts: tuple[JobStart, ...]
    stale_marks: tuple[StaleMark, ...]
    queues: dict[str, QueueFigures]  # by queue name, every queue of the snapshot
    jobs: dict[str, JobFigures]  # by PodGroup namespace/name
    searches: tuple[SearchReport, ...] = ()  # per action that searched for victims, in the order they ran
    hopeless: HopelessSearches = msgspec.field(default_factory=HopelessSearches)

    @property
    def fair_share(self) -> dict[str, Triple]:
        return {name: figures.fair_share for name, figures in self.queues.items()}
