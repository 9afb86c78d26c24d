"""PriorityClasses and KAI's four defaults (train 50, build-preemptible 75, build 100, inference 125)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from kai.api.errors import Source
from kai.api.fields import Reader
from kai.api.meta import ObjectMeta, read_meta

PREEMPTIBLE_BELOW = 100  # a priority under this value is preemptible unless stated otherwise
DEFAULT_PRIORITY_CLASSES: Mapping[str, int] = {
    "train": 50,
    "build-preemptible": 75,
    "build": 100,
    "inference": 125,
}
DEFAULT_PRIORITY_CLASS = "train"


class PriorityClass(msgspec.Struct, frozen=True, kw_only=True):
    meta: ObjectMeta
    value: int
    preemption_policy: str  # PreemptLowerPriority or Never

    @property
    def name(self) -> str:
        return self.meta.name


def parse_priority_class(raw: Mapping[str, Any], *, source: Source | None) -> PriorityClass:
    meta = read_meta(raw, source=source, kind="PriorityClass", namespaced=False)
    top = Reader(raw, source=source, kind="PriorityClass", name=meta.name)
    if not top.has("value"):
        raise top.error("value", "is missing")
    policy = top.text("preemptionPolicy", "PreemptLowerPriority")
    if policy not in ("PreemptLowerPriority", "Never"):
        raise top.error("preemptionPolicy", f'must be PreemptLowerPriority or Never, got "{policy}"')
    return PriorityClass(meta=meta, value=top.integer("value", 0), preemption_policy=policy)


def default_priority_class(name: str, value: int) -> PriorityClass:
    return PriorityClass(meta=ObjectMeta(name=name), value=value, preemption_policy="PreemptLowerPriority")
