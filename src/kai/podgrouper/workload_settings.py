"""Per-workload scheduling settings a user sets as annotations on a workload or its pods.

KAI's pod grouper reads three annotations and writes them into the PodGroup spec it creates:

* ``kai.scheduler/preemption-delay`` -> ``spec.preemptionDelay`` (a non-negative Go duration);
* ``kai.scheduler/staleness-grace-period`` -> ``spec.stalenessGracePeriod`` (a Go duration;
  negative: never evict the gang as stale);
* ``kai.scheduler/safe-to-consolidate`` -> ``spec.safeToConsolidate`` (``"true"`` / ``"false"``).

Each is looked up on the owners (the base owner first, then the others nearest first), then on the
pod; the first *valid* value wins, so the workload object's value beats its pods'. An invalid value
(a unit-less number such as ``"30"``, a negative delay, ``"maybe"``) is ignored and reported as a
Warning event on the pod, as KAI logs and ignores it. Pure, no side effects.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import msgspec

from kai.api import podgroup as api_podgroup
from kai.podgrouper import model, objects

INVALID_ANNOTATION = "InvalidAnnotation"

T = TypeVar("T")


class WorkloadSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The settings found; None where no valid annotation sets one (the PodGroup default applies)."""

    preemption_delay: float | None = None
    staleness_grace_period: float | None = None
    safe_to_consolidate: bool | None = None
    warnings: tuple[model.GroupingWarning, ...] = ()


def _holders(owners: Sequence[objects.RawObject], pod: objects.RawObject) -> list[objects.RawObject]:
    out = [owner for owner in owners if owner is not pod]
    out.append(pod)
    return out


def _first_valid(
    holders: Sequence[objects.RawObject],
    key: str,
    parse: Callable[[str], T],
    fix: str,
    warnings: list[model.GroupingWarning],
) -> T | None:
    for holder in holders:
        value = objects.annotations(holder).get(key)
        if value is None:
            continue
        try:
            return parse(value)
        except ValueError as exc:
            warnings.append(
                model.GroupingWarning(
                    reason=INVALID_ANNOTATION,
                    message=(f"annotation {key} on {objects.describe(holder)} is ignored: {exc}. To fix: {fix}."),
                )
            )
    return None


def resolve(*, owners: Sequence[objects.RawObject], pod: objects.RawObject) -> WorkloadSettings:
    """The workload's settings from the annotations of ``owners`` (base first) and then ``pod``."""
    holders = _holders(owners, pod)
    warnings: list[model.GroupingWarning] = []
    delay = _first_valid(
        holders,
        api_podgroup.PREEMPTION_DELAY_ANNOTATION,
        api_podgroup.parse_preemption_delay,
        'use a non-negative duration with a unit, such as "30s", "5m" or "1h"',
        warnings,
    )
    grace = _first_valid(
        holders,
        api_podgroup.STALENESS_GRACE_PERIOD_ANNOTATION,
        api_podgroup.parse_staleness_grace_period,
        'use a duration with a unit, such as "30s" or "5m" ("-1s" never evicts the gang as stale)',
        warnings,
    )
    safe = _first_valid(
        holders,
        api_podgroup.SAFE_TO_CONSOLIDATE_ANNOTATION,
        api_podgroup.parse_bool,
        'set it to "true" or "false"',
        warnings,
    )
    return WorkloadSettings(
        preemption_delay=delay,
        staleness_grace_period=grace,
        safe_to_consolidate=safe,
        warnings=tuple(warnings),
    )
