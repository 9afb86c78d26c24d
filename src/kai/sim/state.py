"""The simulated cluster's mutable state: pods with their lifecycle, PodGroups with their status.

Pod lifecycle in the simulator (every edge a named transition):
Pending -> Running (bind), Pending -> Pipelined (nominated onto releasing resources),
Pipelined -> Pending (re-placed next cycle), Running -> Releasing (evicted),
Releasing -> gone (grace period over), Running -> Succeeded (duration elapsed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from kai.api.fields import format_timestamp
from kai.api.meta import ObjectMeta
from kai.api.pod import Pod
from kai.api.podgroup import PodGroup
from kai.cluster.effects import Condition
from kai.core.model import TaskStatus

TRANSITIONS: dict[TaskStatus, frozenset[TaskStatus]] = {
    TaskStatus.PENDING: frozenset({TaskStatus.RUNNING, TaskStatus.PIPELINED}),
    TaskStatus.PIPELINED: frozenset({TaskStatus.PENDING, TaskStatus.RUNNING, TaskStatus.PIPELINED}),
    TaskStatus.RUNNING: frozenset({TaskStatus.RELEASING, TaskStatus.SUCCEEDED, TaskStatus.FAILED}),
    TaskStatus.RELEASING: frozenset(),
    TaskStatus.SUCCEEDED: frozenset(),
    TaskStatus.FAILED: frozenset(),
}


def stamped_document(raw: Mapping[str, Any], meta: ObjectMeta) -> dict[str, Any]:
    """The document as the API server stores it: with the uid and creation time it gave the object (`meta`,
    as the store stamped it) and the namespace it defaulted. Shallow: only `metadata` is a new mapping,
    the nested parts are the applied document's and are never mutated."""
    body = dict(raw)
    metadata = dict(body.get("metadata") or {})
    metadata["uid"] = meta.uid
    if meta.namespace:
        metadata["namespace"] = meta.namespace  # the API server defaults it, so the grouper sees it
    assert meta.creation_timestamp is not None
    metadata["creationTimestamp"] = format_timestamp(meta.creation_timestamp)
    body["metadata"] = metadata
    return body


class SimPod(msgspec.Struct):
    """A pod in the store. A msgspec Struct rather than a dataclass: the store makes one per pod it reads
    (50,000 at target 1's size), and a Struct of twenty fields is built several times faster."""

    pod: Pod
    source: Mapping[str, Any]  # the document as applied; `raw` is it as stored (read by few, so made on demand)
    ours: bool
    status: TaskStatus
    node: str | None = None
    nominated_node: str | None = None
    gpu_groups: tuple[str, ...] = ()
    gpu_portion: float = 0.0
    gpu_devices: tuple[int, ...] = ()  # physical GPU indices on the node (the binder's choice)
    env: dict[str, str] = msgspec.field(default_factory=dict)  # NVIDIA_VISIBLE_DEVICES, GPU_PORTION, ...
    start_time: float | None = None
    finish_at: float | None = None
    release_at: float | None = None
    duration: float | None = None
    podgroup: str | None = None
    reason: str | None = None
    message: str | None = None
    owner: tuple[str, str] | None = None  # top owner (kind, name)
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    _raw: dict[str, Any] | None = None

    @property
    def raw(self) -> dict[str, Any]:
        """The pod's document as the API server stores it (`stamped_document`; the store never changes a
        pod's uid, namespace or creation time), as the pod grouper and the controllers read it."""
        if self._raw is None:
            self._raw = stamped_document(self.source, self.pod.meta)
        return self._raw

    def move(self, to: TaskStatus) -> None:
        if to not in TRANSITIONS[self.status]:
            raise ValueError(f"pod {self.pod.key}: invalid transition {self.status} -> {to}")
        self.status = to


class SimPodGroup(msgspec.Struct):
    podgroup: PodGroup
    condition: Condition | None = None  # the scheduling condition of the last cycle
    last_start: float | None = None
    stale_since: float | None = None
    derived: bool = False  # made by the pod grouper rather than applied by the user
    owner_uid: str = ""  # the pod grouper's: its top owner, with which garbage collection deletes it
