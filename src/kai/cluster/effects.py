"""The effects planner: from a cycle's decisions to the writes a cluster must see.

Pure. The simulator applies the effects to its store; the Kubernetes adapter sends them to the
API server (`kai.kubernetes.writes`). Planning in one place is what keeps `kai sim` and a real
cluster from ever disagreeing about what a decision means.

Effects, in the order they are planned:
* `Bind`: bind a pod to a node, with the labels and annotations KAI's binder writes first;
* `Nominate`: a pipelined pod waits for resources being released on a node;
* `Evict`: evict a pod (it terminates over its grace period);
* `AnnotatePodGroup`: the scheduler's timestamps on a PodGroup (last start, last eviction, stale);
* `SetPodGroupCondition`: the PodGroup's unschedulable condition, or None to clear it;
* `MarkPodUnschedulable`: a waiting pod's `PodScheduled=False` reason and message;
* `SetPodGroupResources` / `SetQueueStatus`: resource figures in KAI's units;
* `RecordEvent`: an Event on a pod or PodGroup (evictions; a group's reason when it changes, not
  when only its numbers do).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Protocol

import msgspec

from kai.api.fields import format_timestamp
from kai.api.podgroup import LAST_EVICTION_ANNOTATION, LAST_START_ANNOTATION, STALE_TIMESTAMP_ANNOTATION
from kai.cluster.pods import group_labels
from kai.core.decisions import CycleResult, JobFigures, Kind, Placement, QueueFigures, Triple
from kai.core.resources import MB
from kai.explain import model

UNSCHEDULABLE_ON_NODE_POOL = "UnschedulableOnNodePool"
DEFAULT_NODE_POOL = "default"
RECEIVED_RESOURCE_TYPE = "received-resource-type"
GPU_RESOURCE = "nvidia.com/gpu"
PODGROUP_NOT_FOUND = "PodGroupNotFound"
SCHEDULED = "Scheduled"  # the event of a pod placed on a node (on a cluster: written once it is bound)


class Bind(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Bind a pod to its node. This and the other effects made per pod (`MarkPodUnschedulable`,
    `RecordEvent`) are msgspec Structs: a cycle plans one or two per pod, and a Struct is built several
    times faster than a frozen dataclass. None of them is tracked by the garbage collector (`gc=False`):
    they hold strings and mappings of strings, which never lead back to them."""

    pod: str  # namespace/name
    node: str
    gpu_groups: tuple[str, ...]
    gpu_portion: float
    labels: Mapping[str, str]  # written on the pod before the binding
    annotations: Mapping[str, str]


class Nominate(msgspec.Struct, frozen=True, kw_only=True):
    pod: str
    node: str
    gpu_groups: tuple[str, ...]
    gpu_portion: float
    message: str


class Evict(msgspec.Struct, frozen=True, kw_only=True):
    pod: str
    podgroup: str
    node: str
    action: str
    preemptor: str | None
    message: str


class AnnotatePodGroup(msgspec.Struct, frozen=True, kw_only=True):
    podgroup: str
    key: str
    value: str | None  # None removes the annotation


class Condition(msgspec.Struct, frozen=True, kw_only=True):
    """A PodGroup's scheduling condition as KAI writes it in `status.schedulingConditions`."""

    reason: str
    message: str
    transition_id: int
    last_transition: float
    # every reason that holds, dominant first (`kai.explain`'s tokens); empty: only `reason`
    reasons: tuple[tuple[str, str], ...] = ()
    queue_details: Mapping[str, object] | None = None  # KAI's QuotaDetails of the blocking queue

    @property
    def explained(self) -> tuple[tuple[str, str], ...]:
        return self.reasons or ((self.reason, self.message),)

    @property
    def dominant(self) -> tuple[str, str]:
        """The condition's reason and the dominant reason of the explanation behind it: what a Warning
        event announces when it changes."""
        return (self.reason, self.explained[0][0])

    def _reason(self, reason: str, message: str) -> dict[str, object]:
        entry: dict[str, object] = {"reason": reason, "message": message}
        if reason == self.reason and self.queue_details is not None:
            entry["details"] = {"queueDetails": dict(self.queue_details)}
        return entry

    def as_status(self) -> dict[str, object]:
        return {
            "type": UNSCHEDULABLE_ON_NODE_POOL,
            "nodePool": DEFAULT_NODE_POOL,
            "status": "True",
            "reason": self.reason,
            "message": self.message,
            "reasons": [self._reason(reason, message) for reason, message in self.explained],
            "transitionID": str(self.transition_id),
            "lastTransitionTime": format_timestamp(self.last_transition),
        }


class SetPodGroupCondition(msgspec.Struct, frozen=True, kw_only=True):
    podgroup: str
    condition: Condition | None  # None: the group schedules, clear it


class MarkPodUnschedulable(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    pod: str
    reason: str
    message: str


class SetPodGroupResources(msgspec.Struct, frozen=True, kw_only=True):
    podgroup: str
    resources: Mapping[str, Mapping[str, str]]  # allocated, allocatedNonPreemptible, requested


class SetQueueStatus(msgspec.Struct, frozen=True, kw_only=True):
    queue: str
    status: Mapping[str, object]  # allocated, allocatedNonPreemptible, requested, fairShare, childQueues


class RecordEvent(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    type: str  # Normal or Warning
    reason: str
    object: str  # Kind/namespace/name
    message: str


Effect = (
    Bind
    | Nominate
    | Evict
    | AnnotatePodGroup
    | SetPodGroupCondition
    | MarkPodUnschedulable
    | SetPodGroupResources
    | SetQueueStatus
    | RecordEvent
)


class PlanView(Protocol):
    """What the planner reads of the cluster besides the decisions."""

    def waiting_pods(self) -> Mapping[str, Sequence[str]]:
        """Pods of ours that wait for a node (pending, not pipelined), by PodGroup namespace/name."""
        ...

    def podgroup_exists(self, key: str) -> bool: ...

    def podgroup_condition(self, key: str) -> Condition | None:
        """The PodGroup's current scheduling condition."""
        ...

    def queue_children(self) -> Mapping[str, Sequence[str]]: ...


@functools.lru_cache(maxsize=8192)  # every cycle formats every PodGroup's figures: few distinct values
def _quantity(value: float, unit: str) -> str:
    rounded = round(value, 3)
    text = f"{rounded:.3f}".rstrip("0").rstrip(".") if rounded != int(rounded) else str(int(rounded))
    return f"{text}{unit}"


def resource_list(values: Triple) -> dict[str, str]:
    """Queue-space figures as a Kubernetes resource list in KAI's units: GPU devices (fractions
    allowed), CPU millicores, memory megabytes; -1 (unlimited) stays -1."""
    gpu, cpu, memory = values
    return {
        "cpu": _quantity(cpu, "m") if cpu != -1 else "-1",
        "memory": _quantity(memory / MB, "M") if memory != -1 else "-1",
        GPU_RESOURCE: _quantity(gpu, ""),
    }


def queue_details(queue: str, figures: QueueFigures, job: JobFigures | None) -> dict[str, object]:
    """KAI's QuotaDetails of a blocking queue, for the PodGroup's scheduling condition."""
    details: dict[str, object] = {
        "name": queue,
        "queueRequestedResources": resource_list(figures.requested),
        "queueDeservedResources": resource_list(figures.quota),
        "queueAllocatedResources": resource_list(figures.allocated),
        "queueAllocatedNonPreemptibleResources": resource_list(figures.allocated_non_preemptible),
        "queueResourceLimits": resource_list(figures.limit),
    }
    if job is not None:
        details["podGroupRequestedResources"] = resource_list(job.requested)
    return details


def queue_status(figures: QueueFigures, children: Sequence[str]) -> dict[str, object]:
    return {
        "allocated": resource_list(figures.allocated),
        "allocatedNonPreemptible": resource_list(figures.allocated_non_preemptible),
        "requested": resource_list(figures.requested),
        "fairShare": resource_list(figures.fair_share),
        "childQueues": sorted(children),
    }


def podgroup_resources(figures: JobFigures) -> dict[str, dict[str, str]]:
    return {
        "allocated": resource_list(figures.allocated),
        "allocatedNonPreemptible": resource_list(figures.allocated_non_preemptible),
        "requested": resource_list(figures.requested),
    }


def bind_metadata(gpu_groups: tuple[str, ...]) -> tuple[dict[str, str], dict[str, str]]:
    """Labels and annotations KAI's binder writes on a pod before binding it."""
    kind = "Fraction" if gpu_groups else "Regular"
    return group_labels(gpu_groups), {RECEIVED_RESOURCE_TYPE: kind}


def podgroup_not_found_message(namespace: str, name: str) -> str:
    return (
        f'PodGroup "{name}" named by the pod-group-name annotation does not exist in namespace '
        f'"{namespace}"; create it or remove the annotation to let the pod grouper make one'
    )


def placement_effects(placement: Placement) -> tuple[Bind, RecordEvent] | tuple[Nominate]:
    """A placement's effects: its binding and the pod's `Scheduled` event, or its nomination."""
    if placement.kind is Kind.BIND:
        labels, annotations = bind_metadata(placement.gpu_groups)
        bind = Bind(
            pod=placement.pod,
            node=placement.node,
            gpu_groups=placement.gpu_groups,
            gpu_portion=placement.gpu_portion,
            labels=labels,
            annotations=annotations,
        )
        scheduled = RecordEvent(
            type="Normal",
            reason=SCHEDULED,
            object=f"Pod/{placement.pod}",
            message=f"Successfully assigned {placement.pod} to {placement.node}",
        )
        return (bind, scheduled)
    nominate = Nominate(
        pod=placement.pod,
        node=placement.node,
        gpu_groups=placement.gpu_groups,
        gpu_portion=placement.gpu_portion,
        message=f"waiting for resources being released on {placement.node}",
    )
    return (nominate,)


def plan(
    result: CycleResult,
    view: PlanView,
    *,
    now: float,
    explanations: Mapping[str, model.Explanation] | None = None,
) -> tuple[Effect, ...]:
    """Every write the cycle's decisions call for, in a fixed order.

    `explanations` (by PodGroup namespace/name, from `kai.cluster.explaining`) give a waiting group's
    condition, pod messages and event the explanation's words: the dominant reason and the first
    verified fix, with every reason that holds in the condition's `reasons`.
    """
    effects: list[Effect] = []
    for placement in result.placements:
        effects.extend(placement_effects(placement))
    stamp = format_timestamp(now)
    for eviction in result.evictions:
        effects.append(
            Evict(
                pod=eviction.pod,
                podgroup=eviction.podgroup,
                node=eviction.node,
                action=eviction.action,
                preemptor=eviction.preemptor,
                message=eviction.message,
            )
        )
        effects.append(
            RecordEvent(type="Warning", reason="Evicted", object=f"Pod/{eviction.pod}", message=eviction.message)
        )
        # every evicted PodGroup is stamped: it re-arms the group's preemption delay
        effects.append(AnnotatePodGroup(podgroup=eviction.podgroup, key=LAST_EVICTION_ANNOTATION, value=stamp))
    for start in result.starts:
        effects.append(AnnotatePodGroup(podgroup=start.podgroup, key=LAST_START_ANNOTATION, value=stamp))
    for mark in result.stale_marks:
        value = format_timestamp(mark.since) if mark.since is not None else None
        effects.append(AnnotatePodGroup(podgroup=mark.podgroup, key=STALE_TIMESTAMP_ANNOTATION, value=value))
    effects.extend(_conditions(result, view, now=now, explanations=explanations or {}))
    for event in result.events:
        effects.append(RecordEvent(type=event.type, reason=event.reason, object=event.object, message=event.message))
    for key in sorted(result.jobs):
        effects.append(SetPodGroupResources(podgroup=key, resources=podgroup_resources(result.jobs[key])))
    children = view.queue_children()
    for name in sorted(result.queues):
        effects.append(SetQueueStatus(queue=name, status=queue_status(result.queues[name], children.get(name, ()))))
    return tuple(effects)


def _decided(result: CycleResult, explanations: Mapping[str, model.Explanation]) -> dict[str, Condition]:
    """The condition each PodGroup should have after the cycle (transition fields still to set).

    The cycle's own reason stays the condition's `reason` (KAI's tokens); an explanation supplies the
    message and the reasons, and a group the cycle left without a condition (a gang still missing
    pods) gets its explanation's dominant reason.
    """
    out: dict[str, Condition] = {}
    for c in result.conditions:
        figures = result.queues.get(c.queue) if c.queue is not None else None
        details = (
            queue_details(c.queue, figures, result.jobs.get(c.podgroup))
            if c.queue is not None and figures is not None
            else None
        )
        out[c.podgroup] = Condition(
            reason=c.reason, message=c.message, transition_id=0, last_transition=0.0, queue_details=details
        )
    for key, explanation in explanations.items():
        dominant = explanation.reason
        if dominant is None:
            continue
        reasons = tuple((r.token, r.message) for r in explanation.reasons)
        cycle = out.get(key)
        out[key] = Condition(
            reason=cycle.reason if cycle is not None else dominant.token,
            message=explanation.message,
            transition_id=0,
            last_transition=0.0,
            reasons=reasons,
            queue_details=cycle.queue_details if cycle is not None else None,
        )
    return out


def _conditions(
    result: CycleResult, view: PlanView, *, now: float, explanations: Mapping[str, model.Explanation]
) -> list[Effect]:
    effects: list[Effect] = []
    conditions = _decided(result, explanations)
    waiting = view.waiting_pods()
    for key in sorted(result.jobs):
        current = view.podgroup_condition(key)
        decided = conditions.get(key)
        if decided is None:
            if current is not None:
                effects.append(SetPodGroupCondition(podgroup=key, condition=None))
            continue
        if current is None or (current.reason, current.message) != (decided.reason, decided.message):
            previous_id = current.transition_id if current is not None else -1
            condition = msgspec.structs.replace(decided, transition_id=previous_id + 1, last_transition=now)
            effects.append(SetPodGroupCondition(podgroup=key, condition=condition))
            if current is None or current.dominant != decided.dominant:
                # an event says a new reason; the same reason in other numbers only updates the condition
                effects.append(
                    RecordEvent(
                        type="Warning", reason=decided.reason, object=f"PodGroup/{key}", message=decided.message
                    )
                )
        for pod in waiting.get(key, ()):
            effects.append(MarkPodUnschedulable(pod=pod, reason="Unschedulable", message=decided.message))
    for key in sorted(waiting):
        if not view.podgroup_exists(key):
            namespace, name = key.split("/", 1)
            message = podgroup_not_found_message(namespace, name)
            for pod in waiting[key]:
                effects.append(MarkPodUnschedulable(pod=pod, reason=PODGROUP_NOT_FOUND, message=message))
    return effects
