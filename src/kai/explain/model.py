"""The explanation's data: reason tokens in their precedence, suggestions with patches, positions.

Reason tokens are those of the `kai explain` contract. When several hold, the dominant one comes
first: every reason that holds "until something changes" (`never`) before every reason about
capacity now or queue order, and inside each of the two groups the order of `PRECEDENCE`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kai.core.model import Job

NOT_OUR_SCHEDULER = "NotOurScheduler"
QUEUE_DOES_NOT_EXIST = "QueueDoesNotExist"
QUEUE_NOT_LEAF = "QueueNotLeaf"
QUEUE_LABEL_MISSING = "QueueLabelMissing"
PRIORITY_CLASS_NOT_FOUND = "PriorityClassNotFound"
INVALID_GPU_SHARING = "InvalidGpuSharing"
GANG_INCOMPLETE = "GangIncomplete"
POD_TOO_LARGE = "PodTooLarge"
NO_MATCHING_NODES = "NoMatchingNodes"
OVER_LIMIT = "OverLimit"
NON_PREEMPTIBLE_OVER_QUOTA = "NonPreemptibleOverQuota"
GANG_DOES_NOT_FIT = "GangDoesNotFit"
FRAGMENTED = "Fragmented"
WAITING_FOR_VICTIMS = "WaitingForVictims"
QUEUED_BEHIND = "QueuedBehind"
PREEMPTION_DELAY_NOT_ELAPSED = "PreemptionDelayNotElapsed"

PRECEDENCE: tuple[str, ...] = (
    NOT_OUR_SCHEDULER,
    QUEUE_DOES_NOT_EXIST,
    QUEUE_NOT_LEAF,
    QUEUE_LABEL_MISSING,
    PRIORITY_CLASS_NOT_FOUND,
    INVALID_GPU_SHARING,
    GANG_INCOMPLETE,
    POD_TOO_LARGE,
    NO_MATCHING_NODES,
    OVER_LIMIT,
    NON_PREEMPTIBLE_OVER_QUOTA,
    GANG_DOES_NOT_FIT,
    FRAGMENTED,
    WAITING_FOR_VICTIMS,
    QUEUED_BEHIND,
    PREEMPTION_DELAY_NOT_ELAPSED,
)

# Phases of a PodGroup as explained (the sim contract's phases, with Pipelined for a gang that
# holds its nodes only as resources being released).
PENDING = "Pending"
PIPELINED = "Pipelined"
RUNNING = "Running"
SUCCEEDED = "Succeeded"
FAILED = "Failed"

Evidence = Mapping[str, object]  # JSON values only


class Reason(msgspec.Struct, frozen=True, kw_only=True):
    """One reason a workload waits: its token, a line a person reads and the numbers behind it."""

    token: str
    message: str
    evidence: Evidence = msgspec.field(default_factory=dict)
    never: bool = False  # holds until something changes (as opposed to capacity now or queue order)

    @property
    def rank(self) -> tuple[int, int]:
        order = PRECEDENCE.index(self.token) if self.token in PRECEDENCE else len(PRECEDENCE)
        return (0 if self.never else 1, order)


def dominant_first(reasons: Sequence[Reason]) -> list[Reason]:
    """Reasons in precedence order, one per token (the first found of a token is kept)."""
    seen: set[str] = set()
    unique = []
    for reason in reasons:
        if reason.token not in seen:
            seen.add(reason.token)
            unique.append(reason)
    return sorted(unique, key=lambda r: r.rank)


class Patch(msgspec.Struct, frozen=True, kw_only=True):
    """An RFC 7386 merge patch on one input object (namespace None for cluster-scoped objects); a patch
    that is None (JSON null) deletes the object (RFC 7386: the result is null)."""

    api_version: str
    kind: str
    namespace: str | None
    name: str
    merge_patch: Mapping[str, object] | None


# a dataclass, not a msgspec Struct: `fixed` takes no part in equality or repr, which a Struct cannot say
@dataclass(frozen=True, kw_only=True, slots=True)
class Suggestion:
    """A change that was applied to a copy of the snapshot and then let the workload run."""

    change: str
    patches: tuple[Patch, ...]
    verified: bool
    size: tuple[int, float]  # (kind of change, how much it changes): smallest first
    # the job as the change leaves it (where a job with no usable queue would stand once fixed)
    fixed: Job | None = field(default=None, compare=False, repr=False)


class Ahead(msgspec.Struct, frozen=True, kw_only=True):
    podgroup: str  # namespace/name
    workload: str
    gpu: float
    priority: int
    created: float


class Position(msgspec.Struct, frozen=True, kw_only=True):
    """Where a waiting job stands in its leaf queue's order, and what that order is made of."""

    in_queue: int  # 1 = next in its queue
    ahead: tuple[Ahead, ...]
    factors: Evidence
    # where a job that waits in no queue (its queue or priority class is unusable) would stand once
    # its fix is made: the queue, and that fix
    queue: str | None = None
    after_fix: str | None = None


NEVER_STARTS = "none: it does not start unless something changes"  # an estimate with no start
NO_FIX = "no single change was found that makes it run"


class Estimate(msgspec.Struct, frozen=True, kw_only=True):
    """When a waiting job would start, as the adapter tells it: a time (None when there is none), how
    it was estimated (or why there is none), and the fix it assumes made now (its `change`; None when
    the job starts as things are)."""

    start: float | None
    text: str
    after_fix: str | None = None


class Explanation(msgspec.Struct, frozen=True, kw_only=True):
    """Everything `kai explain` says about one PodGroup (the pod view is built on it)."""

    namespace: str
    name: str
    workload: str
    queue: str
    phase: str
    reasons: tuple[Reason, ...]  # dominant first; empty when it runs
    suggestions: tuple[Suggestion, ...]  # verified, smallest first
    position: Position | None
    estimated_start: float | None = None
    estimate: str = ""
    estimate_after_fix: str | None = None  # the fix the estimate assumes made now (its change), if any

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def reason(self) -> Reason | None:
        return self.reasons[0] if self.reasons else None

    @property
    def message(self) -> str:
        """The dominant reason and the first suggestion: the words of conditions, events and tables."""
        if not self.reasons:
            return ""
        text = self.reasons[0].message
        if self.suggestions:
            text += f"; to run it: {self.suggestions[0].change}"
        return text


class ObjectKey(msgspec.Struct, frozen=True, kw_only=True):
    """An input object, as a merge patch addresses it."""

    api_version: str
    kind: str
    namespace: str  # "" for cluster-scoped objects
    name: str


class WorkloadFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What the snapshot does not say about a PodGroup's workload, supplied by the adapter."""

    owner: ObjectKey | None  # the top owner (the object the user applied); None if unknown
    podgroup_is_input: bool  # the user wrote the PodGroup (else the pod grouper derived it)
    queue_label_missing: bool  # no queue label anywhere: the PodGroup went to the default queue
    preemptibility_set: bool  # preemptibility is stated (label or spec), not derived from the priority


class PriorityClassFacts(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    value: int
    preempts: bool  # preemptionPolicy is not Never


ObjectLookup = Callable[[ObjectKey], "Mapping[str, Any] | None"]
PodEnd = Callable[[str], "float | None"]  # pod namespace/name -> when it ends by itself; None: unknown
OwnerLookup = Callable[[str], "ObjectKey | None"]  # pod namespace/name -> its top owner; None: unknown


def no_known_end(pod: str) -> float | None:
    """A live cluster's pods: none is known to end at any time."""
    return None


def no_owner_lookup(pod: str) -> ObjectKey | None:
    """No top owner beyond those `Facts.pod_owners` holds."""
    return None


class Facts(msgspec.Struct, frozen=True, kw_only=True):
    """The engine's inputs beyond the snapshot: workloads, pod owners, priority classes, objects.

    `objects` returns an object as the user applied it (the simulator's store, or the cluster's
    cache): suggestions become merge patches on those objects, and a change no object can
    express is not suggested.
    """

    workloads: Mapping[str, WorkloadFacts]  # by PodGroup namespace/name
    pod_owners: Mapping[str, ObjectKey]  # by pod namespace/name: the top owner
    priority_classes: Mapping[str, PriorityClassFacts]
    objects: ObjectLookup
    queue_label_key: str = "kai.scheduler/queue"
    default_queue: str = "default-queue"
    pod_end: PodEnd = no_known_end  # when a running pod ends by itself (the simulator knows durations)
    # the top owner of a pod `pod_owners` leaves out, found when asked (an adapter whose state cannot
    # change meanwhile: the simulator)
    find_owner: OwnerLookup = no_owner_lookup

    def owner_of(self, pod: str) -> ObjectKey | None:
        """A pod's top owner (namespace/name): the object a patch that deletes the pod deletes."""
        return self.pod_owners.get(pod) or self.find_owner(pod)
