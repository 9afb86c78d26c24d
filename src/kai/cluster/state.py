"""The cluster-state protocol: the objects a scheduling cycle needs, indexed as it looks them up.

Both adapters implement it: the simulator's store (`kai.sim.engine.Simulation`) and the
Kubernetes cache fed by watches (`kai.kubernetes.cache.ClusterCache`). The snapshot of a cycle
and the pod grouper's lookups are built from it the same way for both.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

from kai.api.node import Node
from kai.api.podgroup import PodGroup
from kai.api.priority import PriorityClass
from kai.api.queue import Queue
from kai.cluster import gpu_sharing
from kai.core.session import SchedulerConfig
from kai.core.snapshot_builder import BuiltSnapshot, PodState, build_snapshot


class ClusterState(Protocol):
    """What a cycle reads. Collections are views of the adapter's current state, not copies."""

    def node_objects(self) -> Collection[Node]: ...

    def queue_objects(self) -> Collection[Queue]: ...

    def priority_class_objects(self) -> Mapping[str, PriorityClass]: ...

    def podgroup_objects(self) -> Collection[PodGroup]: ...

    def pod_states(self) -> tuple[Sequence[PodState], Sequence[PodState]]:
        """The pods this scheduler schedules, and the others (which only use their nodes)."""
        ...

    def lookup(self, namespace: str, api_version: str, kind: str, name: str) -> Mapping[str, Any] | None:
        """An object as the API server returns it, by namespace, group (from `api_version`), kind and name."""
        ...

    def list_pods(self, namespace: str, match_labels: Mapping[str, str]) -> Sequence[Mapping[str, Any]]:
        """The pods of a namespace whose labels include `match_labels`, as the API server returns them."""
        ...


def cycle_snapshot(state: ClusterState, *, now: float, config: SchedulerConfig) -> BuiltSnapshot:
    """The snapshot one cycle works on, taken from the cluster state at `now` (a shared device and its
    reservation pod count once: `kai.cluster.gpu_sharing.account_reservations`)."""
    ours, foreign = state.pod_states()
    return build_snapshot(
        now=now,
        nodes=list(state.node_objects()),
        pods=ours,
        foreign_pods=gpu_sharing.account_reservations(ours, foreign),
        podgroups=list(state.podgroup_objects()),
        queues=list(state.queue_objects()),
        priority_classes=state.priority_class_objects(),
        queue_label_key=config.queue_label_key,
    )
