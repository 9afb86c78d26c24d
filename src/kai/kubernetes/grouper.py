"""The pod grouper on a cluster: a PodGroup for every pod of ours that has none.

The rules are the cluster-generic ones (`kai.cluster.grouping`): a pod that names its PodGroup
keeps it; any other pod's top owner (fetched by owner reference from the cache, uid checked)
gives the PodGroup, which is created once, with an owner reference to the top owner, and the pod
gets its `pod-group-name` annotation (and subgroup label). PodGroups users create themselves are
never changed. Warnings and grouping errors become Events on the pod, once each.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from kai.cluster import grouping
from kai.cluster.effects import MarkPodUnschedulable, RecordEvent
from kai.kubernetes import resources
from kai.kubernetes.apply import EffectApplier
from kai.kubernetes.cache import ClusterCache, ObjectKey
from kai.kubernetes.writer import Outcome, Writer

log = logging.getLogger(__name__)

OWNER_NOT_FOUND = "OwnerNotFound"
OWNER_GRACE = 10.0  # seconds a new pod's owner may take to reach the cache before it is reported missing


@dataclass(slots=True)
class PodGrouper:
    cache: ClusterCache
    writer: Writer
    applier: EffectApplier
    queue_label_key: str
    _in_flight: dict[ObjectKey, str] = field(default_factory=dict)  # pod -> resourceVersion when patched
    _created: set[ObjectKey] = field(default_factory=set)
    _reported: dict[ObjectKey, str] = field(default_factory=dict)

    def run(self, *, now: float) -> int:
        """Group every ungrouped pending pod of ours (the cache keeps them apart, so a cycle with
        nothing to group costs nothing); returns how many pods were grouped."""
        config = None
        grouped = 0
        for key in [k for k in self._in_flight if k not in self.cache.ungrouped]:
            del self._in_flight[key]  # annotated (or gone): the patch came back
        for key in sorted(self.cache.ungrouped):
            cached = self.cache.pods[key]
            version = str((cached.raw.get("metadata") or {}).get("resourceVersion", ""))
            if self._in_flight.get(key) == version:
                continue  # our patch is on its way
            if config is None:
                config = grouping.config_for(self.queue_label_key, self.cache.priority_classes)
            outcome = grouping.derive(cached.raw, state=self.cache, config=config, now=now)
            pod_name = f"{key[0]}/{key[1]}"
            if isinstance(outcome, grouping.NotGrouped):
                created = cached.pod.meta.creation_timestamp or now
                if outcome.reason == OWNER_NOT_FOUND and now - created < OWNER_GRACE:
                    continue  # the owner's watch event may simply not have arrived yet
                if self._reported.get(key) != outcome.message:
                    self._reported[key] = outcome.message
                    self.applier.apply(
                        (
                            RecordEvent(
                                type="Warning", reason=outcome.reason, object=f"Pod/{pod_name}", message=outcome.message
                            ),
                            MarkPodUnschedulable(pod=pod_name, reason=outcome.reason, message=outcome.message),
                        ),
                        now=now,
                    )
                continue
            pg = outcome.podgroup
            pg_key = (pg.meta.namespace, pg.name)
            if pg_key not in self.cache.podgroups and pg_key not in self._created:
                self._created.add(pg_key)
                manifest = grouping.podgroup_manifest(outcome, queue_label_key=self.queue_label_key)
                self._spawn(self._create(pg_key, manifest))
            if self._reported.get(key) != "grouped":
                self._reported[key] = "grouped"
                self.applier.apply(
                    tuple(
                        RecordEvent(type="Warning", reason=w.reason, object=f"Pod/{pod_name}", message=w.message)
                        for w in outcome.warnings
                    ),
                    now=now,
                )
            self.cache.assume_grouped(key, pg, outcome.subgroup)
            self._in_flight[key] = version
            self._spawn(self._patch(key, grouping.pod_patch(outcome)))
            grouped += 1
        return grouped

    def _spawn(self, coro: object) -> None:
        self.applier._spawn(coro)

    async def _create(self, key: ObjectKey, manifest: dict[str, object]) -> None:
        outcome: Outcome = await self.writer.create(resources.PODGROUPS, key[0], manifest)
        if not outcome.ok and outcome.code != 409:
            log.warning("creating PodGroup %s/%s failed: %s", key[0], key[1], outcome.message)
            self._created.discard(key)

    async def _patch(self, key: ObjectKey, patch: dict[str, object]) -> None:
        # in the decisions' lane: queued before the pod's binding (same object, first come first
        # served), so a pod is never seen bound without its `pod-group-name`, as with KAI's grouper
        outcome = await self.writer.patch(resources.PODS, key[0], key[1], patch, decision=True)
        if not outcome.ok:
            log.warning("annotating pod %s/%s with its PodGroup failed: %s", key[0], key[1], outcome.message)
            self._in_flight.pop(key, None)

    def forget(self, key: ObjectKey) -> None:
        self._in_flight.pop(key, None)
        self._reported.pop(key, None)


__all__ = ["PodGrouper"]
