"""The KAI PodGroup (`scheduling.run.ai/v2alpha2`): a gang of pods with a queue and a priority."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kai.api.errors import Source
from kai.api.fields import Reader
from kai.api.meta import ObjectMeta, read_meta

PREEMPTIBLE = "preemptible"
NON_PREEMPTIBLE = "non-preemptible"
STALE_TIMESTAMP_ANNOTATION = "kai.scheduler/stale-podgroup-timestamp"
LAST_START_ANNOTATION = "kai.scheduler/last-start-timestamp"


@dataclass(frozen=True, kw_only=True, slots=True)
class SubGroup:
    name: str
    min_member: int
    parent: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class PodGroup:
    meta: ObjectMeta
    min_member: int
    queue: str
    priority_class_name: str
    preemptibility: str | None  # None: derived from the priority (< 100 is preemptible)
    sub_groups: tuple[SubGroup, ...]

    @property
    def name(self) -> str:
        return self.meta.name


def parse_podgroup(raw: Mapping[str, Any], *, source: Source | None) -> PodGroup:
    meta = read_meta(raw, source=source, kind="PodGroup", namespaced=True)
    spec = Reader(raw, source=source, kind="PodGroup", name=meta.name).child("spec")
    min_member = spec.integer("minMember", 1)
    if min_member < 1:
        raise spec.error("minMember", f"must be at least 1, got {min_member}")
    preemptibility = spec.text("preemptibility") or None
    if preemptibility not in (None, PREEMPTIBLE, NON_PREEMPTIBLE):
        raise spec.error(
            "preemptibility", f'must be "preemptible" or "non-preemptible", got "{preemptibility}"'
        )
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
        sub_groups.append(SubGroup(name=name, min_member=sub_min, parent=sub.text("parent") or None))
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
    return PodGroup(
        meta=meta,
        min_member=min_member,
        queue=spec.text("queue"),
        priority_class_name=spec.text("priorityClassName"),
        preemptibility=preemptibility,
        sub_groups=tuple(sub_groups),
    )
