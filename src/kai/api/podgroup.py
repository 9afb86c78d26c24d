"""The KAI PodGroup (`scheduling.run.ai/v2alpha2`): a gang of pods with a queue and a priority.

Besides the gang, a PodGroup carries per-workload scheduling knobs: `preemptionDelay` (how long a
pending job waits before it may trigger evictions), `stalenessGracePeriod` (how long a gang may stay
below its minimum before it is evicted) and `safeToConsolidate` (whether consolidation may move it).
The pod grouper fills them from the `kai.scheduler/*` annotations of a workload's pods or owners;
the parsers for those annotation values live here so both sides read them the same way.

Subgroups form a tree (`parent`). A leaf subgroup needs `minMember` pods; a subgroup with children
(and the PodGroup itself, for its top-level subgroups) may instead set `minSubGroup`: it is then
satisfied once that many of its direct children are. Without `minSubGroup` every child is needed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import msgspec

from kai.api.errors import Source
from kai.api.fields import Reader, parse_duration
from kai.api.meta import ObjectMeta, read_meta

PREEMPTIBLE = "preemptible"
NON_PREEMPTIBLE = "non-preemptible"
STALE_TIMESTAMP_ANNOTATION = "kai.scheduler/stale-podgroup-timestamp"
LAST_START_ANNOTATION = "kai.scheduler/last-start-timestamp"
LAST_EVICTION_ANNOTATION = "kai.scheduler/last-eviction-timestamp"
PREEMPTION_DELAY_ANNOTATION = "kai.scheduler/preemption-delay"
STALENESS_GRACE_PERIOD_ANNOTATION = "kai.scheduler/staleness-grace-period"
SAFE_TO_CONSOLIDATE_ANNOTATION = "kai.scheduler/safe-to-consolidate"
# Written by the pod grouper on the PodGroups it makes: the top owner's identity, as YAML lines.
TOP_OWNER_METADATA_ANNOTATION = "kai.scheduler/top-owner-metadata"

# Go's strconv.ParseBool, which KAI uses for boolean annotation values.
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_preemption_delay(text: str) -> float:
    """A preemption delay (a non-negative Go duration) in seconds; ValueError if invalid or negative."""
    seconds = parse_duration(text)
    if seconds < 0:
        raise ValueError(f'must not be negative, got "{text}"')
    return seconds


def parse_staleness_grace_period(text: str) -> float:
    """A staleness grace period (a Go duration; negative: never evict as stale) in seconds."""
    return parse_duration(text)


def parse_bool(text: str) -> bool:
    """A boolean annotation value as Go's strconv.ParseBool reads it; ValueError otherwise."""
    value = text.strip()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f'must be "true" or "false", got "{text}"')


def format_duration(seconds: float) -> str:
    """Seconds as Go prints a time.Duration: `30s`, `5m0s`, `1h0m0s`, `1.5s`, `250ms`, `0s`."""
    nanos = round(seconds * 1e9)
    if nanos == 0:
        return "0s"
    sign = "-" if nanos < 0 else ""
    nanos = abs(nanos)
    if nanos < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if nanos >= size:
                return f"{sign}{_decimal(nanos, size)}{unit}"
    hours, rest = divmod(nanos, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    text = f"{_decimal(rest, 1_000_000_000)}s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    if hours:
        text = f"{hours}h{text}"
    return sign + text


def _decimal(value: int, unit: int) -> str:
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{str(frac).rjust(digits, '0').rstrip('0')}"


class SubGroup(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    min_member: int
    parent: str | None
    min_sub_group: int | None = None  # children that must be satisfied; None: all of them


class PodGroup(msgspec.Struct, frozen=True, kw_only=True):
    meta: ObjectMeta
    min_member: int
    queue: str
    priority_class_name: str
    preemptibility: str | None  # None: derived from the priority (< 100 is preemptible)
    sub_groups: tuple[SubGroup, ...]
    preemption_delay: float | None = None  # seconds; None or 0: may trigger evictions at once
    staleness_grace_period: float | None = None  # seconds; None: the scheduler's global period
    safe_to_consolidate: bool = True
    min_sub_group: int | None = None  # top-level subgroups that must be satisfied; None: minMember rules

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def has_subgroup_tree(self) -> bool:
        """True when some level asks for only part of its children (`minSubGroup`)."""
        return self.min_sub_group is not None or any(s.min_sub_group is not None for s in self.sub_groups)


def top_owner_fields(pg: PodGroup) -> dict[str, str]:
    """The fields of the `kai.scheduler/top-owner-metadata` annotation (name, uid, group, version, kind)."""
    fields: dict[str, str] = {}
    for line in pg.meta.annotations.get(TOP_OWNER_METADATA_ANNOTATION, "").splitlines():
        key, _, value = line.partition(": ")
        if value.startswith('"'):  # the grouper double-quotes scalars that would not read back plain
            try:
                value = str(json.loads(value))
            except ValueError:
                continue
        fields[key.strip()] = value.strip()
    return fields


def workload_of(pg: PodGroup) -> str:
    """The workload as its user named it: `Kind/name` of the top owner the pod grouper recorded, else
    `PodGroup/name` for a PodGroup the user wrote."""
    fields = top_owner_fields(pg)
    if fields.get("kind") and fields.get("name"):
        return f"{fields['kind']}/{fields['name']}"
    return f"PodGroup/{pg.name}"


def tree_min_pods(sub_groups: tuple[SubGroup, ...], min_sub_group: int | None) -> int:
    """The fewest pods that satisfy the subgroup tree: per level, the cheapest children it needs."""
    children: dict[str | None, list[SubGroup]] = {}
    for s in sub_groups:
        children.setdefault(s.parent, []).append(s)

    def level(kids: list[SubGroup], needed: int | None) -> int:
        costs = sorted(need(k) for k in kids)
        return sum(costs[: len(costs) if needed is None else needed])

    def need(group: SubGroup) -> int:
        kids = children.get(group.name)
        return level(kids, group.min_sub_group) if kids else group.min_member

    return level(children.get(None, []), min_sub_group)


def parse_podgroup(raw: Mapping[str, Any], *, source: Source | None) -> PodGroup:
    meta = read_meta(raw, source=source, kind="PodGroup", namespaced=True)
    spec = Reader(raw, source=source, kind="PodGroup", name=meta.name).child("spec")
    min_member = spec.integer("minMember", 1)
    if min_member < 1:
        raise spec.error("minMember", f"must be at least 1, got {min_member}")
    min_sub_group: int | None = None
    if spec.has("minSubGroup"):
        if spec.has("minMember"):
            raise spec.error(
                "minSubGroup",
                "cannot be combined with minMember (they are mutually exclusive): set minMember for a fixed "
                "number of pods, or minSubGroup for a number of top-level subgroups",
            )
        min_sub_group = spec.integer("minSubGroup", 1)
        if min_sub_group < 1:
            raise spec.error("minSubGroup", f"must be at least 1, got {min_sub_group}")
    preemptibility = spec.text("preemptibility") or None
    if preemptibility not in (None, PREEMPTIBLE, NON_PREEMPTIBLE):
        raise spec.error("preemptibility", f'must be "preemptible" or "non-preemptible", got "{preemptibility}"')
    preemption_delay = spec.duration("preemptionDelay")
    if preemption_delay is not None and preemption_delay < 0:
        raise spec.error("preemptionDelay", f'must not be negative, got "{spec.text("preemptionDelay")}"')
    staleness_grace_period = spec.duration("stalenessGracePeriod")
    safe_to_consolidate = spec.flag("safeToConsolidate", True)
    sub_groups = []
    seen: set[str] = set()
    for sub in spec.children("subGroups"):
        name = sub.text("name")
        if not name:
            raise sub.error("name", "is missing")
        if name in seen:
            raise sub.error("name", f'duplicate subgroup name "{name}"')
        seen.add(name)
        sub_min = sub.integer("minMember", 1)
        if sub_min < 0:
            raise sub.error("minMember", f"must be at least 0, got {sub_min}")
        sub_k: int | None = None
        if sub.has("minSubGroup"):
            if sub.has("minMember"):
                raise sub.error(
                    "minSubGroup",
                    f'cannot be combined with minMember in subgroup "{name}" (they are mutually exclusive)',
                )
            sub_k = sub.integer("minSubGroup", 1)
            if sub_k < 1:
                raise sub.error("minSubGroup", f"must be at least 1, got {sub_k}")
        sub_groups.append(
            SubGroup(name=name, min_member=sub_min, parent=sub.text("parent") or None, min_sub_group=sub_k)
        )
    by_name = {s.name: s for s in sub_groups}
    for i, group in enumerate(sub_groups):
        if group.parent is not None and group.parent not in by_name:
            raise spec.error(f"subGroups[{i}].parent", f'names unknown subgroup "{group.parent}"')
        seen_chain = {group.name}
        cursor = group.parent
        while cursor is not None:
            if cursor in seen_chain:
                raise spec.error(f"subGroups[{i}].parent", "subgroup parents form a cycle")
            seen_chain.add(cursor)
            cursor = by_name[cursor].parent
    child_count: dict[str | None, int] = {}
    for group in sub_groups:
        child_count[group.parent] = child_count.get(group.parent, 0) + 1
    for i, group in enumerate(sub_groups):
        if group.min_sub_group is None:
            continue
        kids = child_count.get(group.name, 0)
        if kids == 0:
            raise spec.error(
                f"subGroups[{i}].minSubGroup",
                f'subgroup "{group.name}" has no child subgroups; a leaf subgroup sets minMember instead',
            )
        if group.min_sub_group > kids:
            raise spec.error(
                f"subGroups[{i}].minSubGroup",
                f'is {group.min_sub_group} but subgroup "{group.name}" has only {kids} child subgroups',
            )
    if min_sub_group is not None:
        top = child_count.get(None, 0)
        if top == 0:
            raise spec.error("minSubGroup", "needs subGroups: it counts the PodGroup's top-level subgroups")
        if min_sub_group > top:
            raise spec.error("minSubGroup", f"is {min_sub_group} but the PodGroup has only {top} top-level subgroups")
    if min_sub_group is not None or any(s.min_sub_group is not None for s in sub_groups):
        # as in KAI, the subgroup tree alone decides; minMember becomes the fewest pods that satisfy it
        min_member = tree_min_pods(tuple(sub_groups), min_sub_group)
    return PodGroup(
        meta=meta,
        min_member=min_member,
        queue=spec.text("queue"),
        priority_class_name=spec.text("priorityClassName"),
        preemptibility=preemptibility,
        sub_groups=tuple(sub_groups),
        preemption_delay=preemption_delay,
        staleness_grace_period=staleness_grace_period,
        safe_to_consolidate=safe_to_consolidate,
        min_sub_group=min_sub_group,
    )
