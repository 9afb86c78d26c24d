"""The pod grouper's output: PodGroup metadata for one pod, or a grouping error, plus user events.

These are plain values. Whoever applies them (the simulator or the Kubernetes adapter) creates or
updates the ``PodGroup`` (``scheduling.run.ai/v2alpha2``), annotates the pod with ``pod-group-name``
and labels it with ``kai.scheduler/subgroup-name``, and records the events on the pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import msgspec

Preemptibility = Literal["preemptible", "non-preemptible"]


class GroupingWarning(msgspec.Struct, frozen=True, kw_only=True):
    """A Warning event for the user, recorded on the pod (e.g. a deprecated label that still works)."""

    reason: str
    message: str


class GroupingError(msgspec.Struct, frozen=True, kw_only=True):
    """Why no PodGroup could be derived; the pod stays Pending and the message goes into a Warning event.

    KAI records every such failure with reason ``PodGrouperWarning``; our reasons are finer-grained
    (``OwnerNotFound``, ``PriorityClassNotFound``, ...) and the message ends with a "To fix:" hint.
    """

    reason: str
    message: str
    warnings: tuple[GroupingWarning, ...] = ()


class TopologyConstraint(msgspec.Struct, frozen=True, kw_only=True):
    """``topologyConstraint`` of a PodGroup or subgroup: a Topology CR name and the placement levels."""

    topology: str = ""
    required_level: str = ""
    preferred_level: str = ""


class SubGroup(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of ``PodGroup.spec.subGroups``: a gang inside the gang (e.g. Ray head, worker group)."""

    name: str
    min_member: int
    parent: str | None = None
    topology: TopologyConstraint | None = None


class OwnerReference(msgspec.Struct, frozen=True, kw_only=True):
    """The PodGroup's owner reference (normally the top owner; a pod for Deployments)."""

    api_version: str
    kind: str
    name: str
    uid: str


class PodGroupMetadata(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the pod grouper decides for one pod's PodGroup.

    ``min_member`` is the gang size: the scheduler starts none of the pods until that many fit. For
    elastic workloads it is the minimum (e.g. a PyTorchJob's ``elasticPolicy.minReplicas``); the
    scheduler grows the group pod by pod beyond it. ``pod_sub_group`` names the entry of
    ``sub_groups`` the pod belongs to, or None. ``preemption_delay``, ``staleness_grace_period``
    (seconds) and ``safe_to_consolidate`` become the PodGroup's ``spec.preemptionDelay``,
    ``spec.stalenessGracePeriod`` and ``spec.safeToConsolidate``; None leaves the field unset.
    """

    name: str
    namespace: str
    min_member: int
    queue: str
    priority_class_name: str
    preemptibility: Preemptibility | None
    owner: OwnerReference
    sub_groups: tuple[SubGroup, ...] = ()
    pod_sub_group: str | None = None
    labels: Mapping[str, str] = msgspec.field(default_factory=dict)
    annotations: Mapping[str, str] = msgspec.field(default_factory=dict)
    topology: TopologyConstraint | None = None
    preemption_delay: float | None = None
    staleness_grace_period: float | None = None
    safe_to_consolidate: bool | None = None
    warnings: tuple[GroupingWarning, ...] = ()


GroupingResult = PodGroupMetadata | GroupingError
