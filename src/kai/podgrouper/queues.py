"""Which queue a PodGroup goes to, and why a queue cannot take it.

"My pod stays Pending" is the question KAI users ask most: the queue label is missing, misspelled,
uses the pre-v0.6.0 key ``runai/queue``, or names a parent queue. Resolution follows KAI's
``CalcPodGroupQueue`` with one addition, the legacy label; :func:`explain_missing_queue` turns the
scheduler's ``QueueDoesNotExist`` into a message that says what to do. Pure, no side effects.
"""

from __future__ import annotations

from collections.abc import Mapping

from kai.podgrouper import config as cfg
from kai.podgrouper import model, objects


def _label(obj: objects.RawObject, key: str) -> str:
    """A label value; an empty value counts as unset."""
    return objects.labels(obj).get(key, "")


def resolve_queue(
    *, base: objects.RawObject, pod: objects.RawObject, config: cfg.GrouperConfig
) -> tuple[str, tuple[model.GroupingWarning, ...]]:
    """The queue for a PodGroup based on ``base`` (normally the top owner) and the warnings to emit.

    Order, first match wins:
      1. the queue label (``config.queue_label_key``) on ``base``;
      2. the queue label on the pod;
      3. the legacy ``runai/queue`` label on ``base``, then on the pod (kai only; warns);
      4. the ``project`` label on ``base``, then on the pod, plus ``-<node pool>`` when the pod has
         the node-pool label;
      5. ``config.default_queue``.
    A legacy label that is present but overridden by step 1 or 2 also produces a warning.
    Pure, no side effects.
    """
    legacy_key = config.legacy_queue_label_key
    legacy: tuple[objects.RawObject, str] | None = None
    if legacy_key and legacy_key != config.queue_label_key:
        for holder in (base, pod):
            if _label(holder, legacy_key):
                legacy = (holder, _label(holder, legacy_key))
                break

    for holder in (base, pod):
        queue = _label(holder, config.queue_label_key)
        if queue:
            # The current queue label wins; a leftover legacy label is only reported.
            if legacy is not None and legacy[1] != queue:
                legacy_holder, legacy_queue = legacy
                return queue, (
                    model.GroupingWarning(
                        reason="DeprecatedQueueLabel",
                        message=(
                            f"label {legacy_key}={legacy_queue} on {objects.describe(legacy_holder)} is "
                            f"ignored because {config.queue_label_key}={queue} is set on "
                            f"{objects.describe(holder)}. To fix: remove the {legacy_key} label."
                        ),
                    ),
                )
            return queue, ()

    if legacy is not None:
        # Only the pre-v0.6.0 label is set: honour it, but tell the user to migrate.
        legacy_holder, legacy_queue = legacy
        return legacy_queue, (
            model.GroupingWarning(
                reason="DeprecatedQueueLabel",
                message=(
                    f"label {legacy_key}={legacy_queue} on {objects.describe(legacy_holder)} is deprecated "
                    f"(KAI stopped reading it in v0.6.0); kai still uses it for now. To fix: replace it "
                    f"with {config.queue_label_key}={legacy_queue}."
                ),
            ),
        )

    for holder in (base, pod):
        project = _label(holder, cfg.PROJECT_LABEL_KEY)
        if project:
            # Run:ai-style projects map to a queue per node pool.
            node_pool = _label(pod, config.node_pool_label_key)
            return (f"{project}-{node_pool}" if node_pool else project), ()

    return config.default_queue, ()


def missing_label_hint(
    *, base: objects.RawObject, pod: objects.RawObject, config: cfg.GrouperConfig
) -> model.GroupingWarning | None:
    """A warning for a workload that names no queue at all and so falls back to the default queue.

    This is the most common cause of "my pod stays Pending" in KAI's troubleshooting guides; the
    simulator records it as an event. None when a queue label (current or legacy) or a project label
    is present. Pure, no side effects.
    """
    keys = [config.queue_label_key, cfg.PROJECT_LABEL_KEY]
    if config.legacy_queue_label_key:
        keys.append(config.legacy_queue_label_key)
    if any(_label(holder, key) for holder in (base, pod) for key in keys):
        return None
    where = objects.describe(base) + ("" if base is pod else " or its pod")
    return model.GroupingWarning(
        reason="QueueLabelMissing",
        message=(
            f"Queue label missing: no {config.queue_label_key} label on {where}; it goes to "
            f"{config.default_queue}. To fix: add the label {config.queue_label_key}: <queue> to the "
            f"metadata of {objects.describe(base)}."
        ),
    )


def _leaves_under(queue: str, children: Mapping[str, list[str]], is_leaf: Mapping[str, bool]) -> list[str]:
    leaves: list[str] = []
    stack = [queue]
    seen: set[str] = set()
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        for child in children.get(current, []):
            if is_leaf.get(child, False):
                leaves.append(child)
            else:
                stack.append(child)
    return sorted(set(leaves))


def explain_missing_queue(
    *,
    queue: str,
    existing_queues: Mapping[str, bool],
    label_key: str = cfg.QUEUE_LABEL_KEY,
    parents: Mapping[str, str | None] | None = None,
) -> str:
    """Why a PodGroup's queue cannot take jobs and what to set instead; ``""`` if the queue is usable.

    ``existing_queues`` maps each Queue name to whether it is a leaf. ``parents`` (queue -> parent
    queue or None) lets the message name the child queues and the leaf queues below a parent queue;
    without it a non-leaf message lists every leaf queue. Only leaf queues are suggested, sorted by
    name. Pure, no side effects.
    """
    all_leaves = sorted(name for name, leaf in existing_queues.items() if leaf)
    if queue not in existing_queues:
        # The queue does not exist at all: suggest the queues that can take jobs.
        if not all_leaves:
            return (
                f'queue "{queue}" does not exist and there are no leaf queues; create a Queue and set '
                f"the {label_key} label to its name"
            )
        return (
            f'queue "{queue}" does not exist; create it or set the {label_key} label to one of: {", ".join(all_leaves)}'
        )
    if existing_queues[queue]:
        # A leaf queue can take jobs; nothing to explain.
        return ""
    children: dict[str, list[str]] = {}
    for child, parent in (parents or {}).items():
        if parent is not None:
            children.setdefault(parent, []).append(child)
    direct = sorted(children.get(queue, []))
    if not direct:
        # Without the hierarchy, offer every leaf queue.
        suggestion = ", ".join(all_leaves) if all_leaves else "(none exist; create one)"
        return (
            f'queue "{queue}" is not a leaf queue; only leaf queues take jobs. Set the {label_key} '
            f"label to one of the leaf queues: {suggestion}"
        )
    leaves = _leaves_under(queue, children, existing_queues)
    suggestion = ", ".join(leaves) if leaves else "(none exist; create one under it)"
    return (
        f'queue "{queue}" is not a leaf queue (it has child queues {", ".join(direct)}); set the '
        f"{label_key} label to one of its leaf queues: {suggestion}"
    )
