"""The KAI Queue (`scheduling.run.ai/v2`): quota, limit and over-quota weight per resource.

Units are the CRD's: gpu in devices (fractions allowed), cpu in millicores, memory in megabytes.
Unset numeric fields read as 0, as in KAI (plain float64 fields without omitempty). KAI's CRD types
quota, limit and overQuotaWeight as plain numbers without bounds and its admission checks only that
`resources` is present, so every finite number loads; the scheduler gives each value KAI's meaning
(-1 quota or limit: unlimited; a negative weight counts in KAI's weight sums as it is).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from kai.api.errors import Source
from kai.api.fields import Reader
from kai.api.meta import ObjectMeta, read_meta

DEFAULT_QUEUE_PRIORITY = 100
UNLIMITED = -1.0  # a quota or limit of -1: no bound
QUEUE_RESOURCE_KEYS = ("gpu", "cpu", "memory")


class QueueResource(msgspec.Struct, frozen=True, kw_only=True):
    quota: float
    limit: float
    over_quota_weight: float


class Queue(msgspec.Struct, frozen=True, kw_only=True):
    meta: ObjectMeta
    display_name: str
    parent: str | None
    priority: int
    resources: Mapping[str, QueueResource]  # keyed gpu, cpu, memory
    preempt_min_runtime: float | None
    reclaim_min_runtime: float | None
    unset: tuple[str, ...] = ()  # resource values the manifest leaves out ("cpu", "gpu.limit"), read as 0

    @property
    def name(self) -> str:
        return self.meta.name


_FIELDS = (("quota", "quota"), ("limit", "limit"), ("overQuotaWeight", "over_quota_weight"))


def _queue_number(res: Reader, key: str) -> float:
    """A quota, limit or weight: any finite JSON number, as KAI's CRD types them (no bounds); unset is 0."""
    value = res.raw.get(key)
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float):
        hint = " (a string: write it without quotes)" if isinstance(value, str) else ""
        raise res.error(key, f"must be a number, got {_show(value)}{hint}")
    number = float(value)
    if not math.isfinite(number):
        raise res.error(key, f"must be a finite number, got {value}")
    return number


def _show(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def parse_queue(raw: Mapping[str, Any], *, source: Source | None) -> Queue:
    """A Queue as KAI reads it: every number KAI's CRD accepts, with KAI's meaning.

    KAI's admission refuses a Queue without `spec.resources`, and so does kai. A resource section or
    value left out reads as 0, as KAI's Go structs read it (see `queue_warnings` for what that does).
    """
    meta = read_meta(raw, source=source, kind="Queue", namespaced=False)
    spec = Reader(raw, source=source, kind="Queue", name=meta.name).child("spec")
    if not spec.has("resources"):
        raise spec.error(
            "resources",
            "is missing; KAI's admission refuses a Queue without resources (give gpu, cpu and memory each a "
            "quota, limit and overQuotaWeight; -1 means unlimited)",
        )
    resources = spec.child("resources")
    parsed: dict[str, QueueResource] = {}
    unset: list[str] = []
    for key in QUEUE_RESOURCE_KEYS:
        if not resources.has(key):
            unset.append(key)
        res = resources.child(key)
        values = {}
        for field, attr in _FIELDS:
            if resources.has(key) and not res.has(field):
                unset.append(f"{key}.{field}")
            values[attr] = _queue_number(res, field)
        parsed[key] = QueueResource(**values)
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
        unset=tuple(unset),
    )


UNSET_RESOURCE = "QueueResourceUnset"
QUOTA_ABOVE_LIMIT = "QueueQuotaAboveLimit"


def queue_warnings(queue: Queue) -> list[tuple[str, str, str]]:
    """(field, reason, message) for values that load but likely do not do what was meant.

    A left-out resource value is 0 in KAI. A limit of 0 refuses every pod that asks for the resource
    (OverLimit), in the queue and in every queue under it; a quota of 0 keeps non-preemptible jobs that
    ask for it from running (NonPreemptibleOverQuota); an overQuotaWeight of 0 gives the queue no share
    of the resource beyond its quota. A quota above the limit can never be reached.
    """
    out: list[tuple[str, str, str]] = []
    unlimited = "{quota: -1, limit: -1, overQuotaWeight: 1}"
    for key in QUEUE_RESOURCE_KEYS:
        if key in queue.unset:
            out.append(
                (
                    f"spec.resources.{key}",
                    UNSET_RESOURCE,
                    f"is not set, so KAI reads quota 0, limit 0 and overQuotaWeight 0 for {key}: every pod that "
                    f"requests {key} is refused (OverLimit), in this queue and every queue under it; set "
                    f"{key}: {unlimited} to leave {key} unlimited",
                )
            )
            continue
        effects = {
            "limit": f"limit 0 refuses every pod that requests {key} (OverLimit), in this queue and every queue "
            "under it; set limit: -1 for no limit",
            "quota": f"quota 0 keeps non-preemptible jobs that request {key} from running "
            "(NonPreemptibleOverQuota); set quota: -1 to make all of it deserved",
            "overQuotaWeight": f"overQuotaWeight 0 gives the queue no share of {key} beyond its quota; "
            "set overQuotaWeight: 1 for an equal share",
        }
        for field, effect in effects.items():
            if f"{key}.{field}" in queue.unset:
                out.append((f"spec.resources.{key}.{field}", UNSET_RESOURCE, f"is not set, so KAI reads 0: {effect}"))
        res = queue.resources[key]
        if res.limit != UNLIMITED and res.quota > res.limit and res.limit >= 0:
            out.append(
                (
                    f"spec.resources.{key}.quota",
                    QUOTA_ABOVE_LIMIT,
                    f"is {res.quota:g}, above the limit {res.limit:g}: the queue can never use more than the limit",
                )
            )
    return out


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


def cycle_problem(cycle: tuple[str, ...]) -> str:
    """What is wrong with a loop of parent queues (as `parent_cycles` gives it), in the words kai sim
    and the Queue admission webhook both use."""
    loop = " -> ".join((*cycle, cycle[0]))
    return (
        f"the parent queues form a cycle: {loop} (queues {', '.join(cycle)}); no queue in a cycle can take jobs: "
        "give one of them no parentQueue or another parent"
    )
