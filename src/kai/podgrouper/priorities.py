"""A PodGroup's PriorityClass and preemptibility, from labels, the pod spec and per-kind defaults.

KAI (``defaultgrouper.calcPriorityClassWithDefaults``) takes the first *valid* name among owner
labels, pod label and ``pod.spec.priorityClassName``, silently skipping names that do not exist,
then the defaults ConfigMap, then the grouper's default (``train``; ``inference`` for Deployments,
``build`` for Notebooks). kai differs on purpose: a name that does not exist is an error the user
sees (``PriorityClassNotFound``), never a silent fallback to another priority. Pure, no side effects.
"""

from __future__ import annotations

from collections.abc import Sequence

from kai.podgrouper import config as cfg
from kai.podgrouper import model, objects


def _holders(owners: Sequence[objects.RawObject], pod: objects.RawObject) -> tuple[tuple[objects.RawObject, str], ...]:
    """Objects whose labels count, in order, with how to name them; the pod last and only once."""
    ordered = [(owner, objects.describe(owner)) for owner in owners if owner is not pod]
    return (*ordered, (pod, objects.describe(pod)))


def _check_exists(name: str, source: str, config: cfg.GrouperConfig) -> str | model.GroupingError:
    known = config.priority_classes
    if known is None or name in known:
        return name
    choices = ", ".join(sorted(known)) or "(none exist)"
    return model.GroupingError(
        reason="PriorityClassNotFound",
        message=(
            f'priority class "{name}" ({source}) does not exist. To fix: use one of {choices}, '
            f'or create the PriorityClass "{name}".'
        ),
    )


def resolve_priority_class(
    *,
    owners: Sequence[objects.RawObject],
    pod: objects.RawObject,
    config: cfg.GrouperConfig,
    kind_default: str,
    override: tuple[str, str] | None = None,
) -> str | model.GroupingError:
    """The PriorityClass name of a PodGroup, or a ``PriorityClassNotFound`` error.

    ``owners`` is the base owner first (normally the top owner), then the other owners nearest
    first. Order, first present wins:
      1. ``override`` as ``(name, source)``: a kind-specific label that KAI applies above all others
         (Ray's ``ray.io/priority-class-name`` on the top owner);
      2. the ``priorityClassName`` label on each of ``owners`` in order, then on the pod;
      3. the pod's ``spec.priorityClassName``;
      4. the defaults ConfigMap entry of the first owner's kind that has one;
      5. ``kind_default`` (``train``, ``inference`` for Deployments, ``build`` for Notebooks).
    Whatever wins must be a known PriorityClass (``config.priority_classes``).
    """
    if override is not None:
        # A kind-specific override label outranks everything, as in KAI's Ray grouper.
        return _check_exists(override[0], override[1], config)
    for holder, described in _holders(owners, pod):
        name = objects.labels(holder).get(cfg.PRIORITY_LABEL_KEY, "")
        if name:
            # An explicit label on the workload or the pod.
            return _check_exists(name, f"from the {cfg.PRIORITY_LABEL_KEY} label on {described}", config)
    spec_name = objects.get_str(pod, "spec", "priorityClassName", owner=pod)
    if spec_name:
        # The pod template's own priorityClassName.
        return _check_exists(spec_name, f"from spec.priorityClassName of {objects.describe(pod)}", config)
    for holder in owners or (pod,):
        entry = config.kind_default(group=objects.group_of(objects.api_version(holder)), kind=objects.kind(holder))
        if entry is not None and entry.priority_name:
            # An administrator's per-kind default.
            group = objects.group_of(objects.api_version(holder))
            group_kind = f"{objects.kind(holder)}.{group}" if group else objects.kind(holder)
            source = f"from the defaults ConfigMap entry for {group_kind}"
            return _check_exists(entry.priority_name, source, config)
    return _check_exists(kind_default, f"the default for {objects.describe(owners[0] if owners else pod)}", config)


def resolve_preemptibility(
    *, owners: Sequence[objects.RawObject], pod: objects.RawObject, config: cfg.GrouperConfig
) -> model.Preemptibility | model.GroupingError | None:
    """``preemptible``, ``non-preemptible`` or None (the scheduler then decides by priority < 100).

    Order: the ``kai.scheduler/preemptibility`` label on each of ``owners`` (base first, then
    nearest first), then on the pod, then the defaults ConfigMap entry of the first owner's kind
    that sets one. An invalid label value is an ``InvalidPreemptibility`` error (KAI logs and
    ignores it, which silently changes whether the job can be preempted).
    """
    for holder, described in _holders(owners, pod):
        value = objects.labels(holder).get(cfg.PREEMPTIBILITY_LABEL_KEY, "")
        if not value:
            continue
        if value == "preemptible":
            return "preemptible"
        if value == "non-preemptible":
            return "non-preemptible"
        return model.GroupingError(
            reason="InvalidPreemptibility",
            message=(
                f"label {cfg.PREEMPTIBILITY_LABEL_KEY}={value} on {described} is not valid. To fix: "
                f"set it to preemptible or non-preemptible, or remove it."
            ),
        )
    for holder in owners or (pod,):
        entry = config.kind_default(group=objects.group_of(objects.api_version(holder)), kind=objects.kind(holder))
        if entry is not None and entry.preemptibility is not None:
            # An administrator's per-kind default.
            return entry.preemptibility
    return None
