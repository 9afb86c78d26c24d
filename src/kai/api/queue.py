"""The KAI Queue (`scheduling.run.ai/v2`): quota, limit and over-quota weight per resource.

Units are the CRD's: gpu in devices (fractions allowed), cpu in millicores, memory in megabytes.
Unset numeric fields read as 0, as in KAI (plain float64 fields without omitempty).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kai.api.errors import Source
from kai.api.fields import Reader
from kai.api.meta import ObjectMeta, read_meta

DEFAULT_QUEUE_PRIORITY = 100
QUEUE_RESOURCE_KEYS = ("gpu", "cpu", "memory")


@dataclass(frozen=True, kw_only=True, slots=True)
class QueueResource:
    quota: float
    limit: float
    over_quota_weight: float


@dataclass(frozen=True, kw_only=True, slots=True)
class Queue:
    meta: ObjectMeta
    display_name: str
    parent: str | None
    priority: int
    resources: Mapping[str, QueueResource]  # keyed gpu, cpu, memory
    preempt_min_runtime: float | None
    reclaim_min_runtime: float | None

    @property
    def name(self) -> str:
        return self.meta.name


def parse_queue(raw: Mapping[str, Any], *, source: Source | None) -> Queue:
    meta = read_meta(raw, source=source, kind="Queue", namespaced=False)
    spec = Reader(raw, source=source, kind="Queue", name=meta.name).child("spec")
    resources = spec.child("resources")
    parsed: dict[str, QueueResource] = {}
    for key in QUEUE_RESOURCE_KEYS:
        res = resources.child(key)
        quota = res.number("quota", 0.0, problem="must be a number >= 0 or -1")
        limit = res.number("limit", 0.0, problem="must be a number >= 0 or -1")
        weight = res.number("overQuotaWeight", 0.0, problem="must be a number >= 0")
        if quota < 0 and quota != -1:
            raise res.error("quota", f"must be a number >= 0 or -1, got {quota:g}")
        if limit < 0 and limit != -1:
            raise res.error("limit", f"must be a number >= 0 or -1, got {limit:g}")
        if weight < 0:
            raise res.error("overQuotaWeight", f"must be a number >= 0, got {weight:g}")
        if limit >= 0 and quota > limit:
            raise res.error("quota", f"must not exceed limit ({limit:g}), got {quota:g}")
        parsed[key] = QueueResource(quota=quota, limit=limit, over_quota_weight=weight)
    parent = spec.text("parentQueue") or None
    if parent == meta.name:
        raise spec.error("parentQueue", "a queue cannot be its own parent")
    return Queue(
        meta=meta,
        display_name=spec.text("displayName"),
        parent=parent,
        priority=spec.integer("priority", DEFAULT_QUEUE_PRIORITY),
        resources=parsed,
        preempt_min_runtime=spec.duration("preemptMinRuntime"),
        reclaim_min_runtime=spec.duration("reclaimMinRuntime"),
    )


def parent_cycles(queues: Sequence[Queue]) -> list[tuple[str, ...]]:
    """Every loop of `parentQueue` references, each once: its queues in parent order from the smallest name.

    A queue whose parent chain only leads into a loop is not part of it. Runs in time linear in the
    number of queues, without recursion.
    """
    parent = {q.name: q.parent for q in queues}
    state: dict[str, int] = {}  # 1: on the path being walked, 2: finished
    cycles: list[tuple[str, ...]] = []
    for start in sorted(parent):
        path: list[str] = []
        cursor: str | None = start
        while cursor is not None and cursor in parent and state.get(cursor) is None:
            state[cursor] = 1
            path.append(cursor)
            cursor = parent[cursor]
        if cursor is not None and state.get(cursor) == 1:
            loop = path[path.index(cursor) :]
            first = loop.index(min(loop))
            cycles.append(tuple(loop[first:] + loop[:first]))
        for name in path:
            state[name] = 2
    return sorted(cycles)
