"""Sends the effects a cycle planned to the API server: the Kubernetes side of `kai.cluster.effects`.

Every write is the smallest that carries the change (merge patches, status subresources, the
binding subresource) and is sent only when the value differs from what the cache holds and from
what was last sent. Writes go through the writer's bounded workers, so the scheduling loop never
waits on them; what they decide is recorded in the cache at once (a bind is assumed done, an
eviction assumed under way) and undone if the write fails for good.

A gang is bound whole: when one binding of a gang fails for good, the pods of that gang bound in
the same cycle are evicted and the whole gang waits for the next cycle. A pod's `Scheduled` event is
written only once its gang is bound (a gang whose GPU reservation failed, or that was rolled back,
is not reported as assigned).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kai.api.fields import format_timestamp
from kai.cluster import effects as fx
from kai.core.decisions import Placement
from kai.kubernetes import resources
from kai.kubernetes.cache import ClusterCache, ObjectKey
from kai.kubernetes.writer import Outcome, Writer

log = logging.getLogger(__name__)

REPORTING_CONTROLLER = "kai-scheduler"
POD_SCHEDULED = "PodScheduled"


def _split(key: str) -> ObjectKey:
    namespace, name = key.split("/", 1)
    return (namespace, name)


class Counters(msgspec.Struct):
    """What the applier did, for metrics and tests."""

    binds: int = 0
    bind_failures: int = 0
    gang_rollbacks: int = 0
    evictions: int = 0
    status_writes: int = 0
    events: int = 0
    skipped_unchanged: int = 0


@dataclass(slots=True)
class EffectApplier:
    cache: ClusterCache
    writer: Writer
    identity: str
    eviction_mode: str = "delete"
    # Runs before a gang's bindings (GPU sharing: `kai.kubernetes.shared_binds`); False: bind none of it.
    prebind: Callable[[Sequence[fx.Bind]], Awaitable[bool]] | None = None
    counters: Counters = field(default_factory=Counters)
    _sent: dict[tuple[str, str, str], tuple[str, Any]] = field(default_factory=dict)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    # ----------------------------------------------------------------- entry point
    def apply(self, effects: Sequence[fx.Effect], *, now: float, bound_early: Collection[str] = ()) -> None:
        """Record every decision in the cache and queue its writes, bindings first; returns without
        waiting for them. The bindings of `bound_early` (pods, namespace/name) and their Scheduled
        events were handed to `bind_early` while the cycle ran, and are not sent again."""
        binds = [effect for effect in effects if isinstance(effect, fx.Bind)]
        held: dict[str, fx.RecordEvent] = {}  # each bound pod's Scheduled event, written once it is bound
        if binds:
            bound = {f"Pod/{bind.pod}" for bind in binds}
            held = {
                effect.object: effect
                for effect in effects
                if isinstance(effect, fx.RecordEvent) and effect.reason == fx.SCHEDULED and effect.object in bound
            }
            self._bind_gangs([b for b in binds if b.pod not in bound_early], held=held, now=now)
        unseen: set[str] = set()  # PodGroups not yet seen: their condition and its event wait a cycle
        for effect in effects:
            if isinstance(effect, fx.Bind):
                continue
            elif isinstance(effect, fx.Nominate):
                self.cache.nominate(_split(effect.pod), effect.node, effect.gpu_groups)
            elif isinstance(effect, fx.Evict):
                self._evict(effect, now=now)
            elif isinstance(effect, fx.AnnotatePodGroup):
                self._annotate_podgroup(effect)
            elif isinstance(effect, fx.SetPodGroupCondition):
                if not self._podgroup_condition(effect):
                    unseen.add(f"PodGroup/{effect.podgroup}")
            elif isinstance(effect, fx.MarkPodUnschedulable):
                self._pod_unschedulable(effect, now=now)
            elif isinstance(effect, fx.SetPodGroupResources):
                self._podgroup_resources(effect)
            elif isinstance(effect, fx.SetQueueStatus):
                self._queue_status(effect)
            elif (
                isinstance(effect, fx.RecordEvent)
                and held.get(effect.object) is not effect
                and effect.object not in unseen
            ):
                self._event(effect, now=now)

    def bind_early(self, placements: Sequence[Placement], *, now: float) -> None:
        """Bind pods a cycle still running has placed (`kai.kubernetes.early_binds`), gang by gang as
        `apply` does, each pod's Scheduled event once its gang is bound."""
        binds: list[fx.Bind] = []
        held: dict[str, fx.RecordEvent] = {}
        for placement in placements:
            for effect in fx.placement_effects(placement):
                if isinstance(effect, fx.Bind):
                    binds.append(effect)
                elif isinstance(effect, fx.RecordEvent):
                    held[effect.object] = effect
        if binds:
            self._bind_gangs(binds, held=held, now=now)

    async def drain(self) -> None:
        """Wait for every write queued so far (tests and shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ----------------------------------------------------------------- binding
    def _bind_gangs(self, binds: list[fx.Bind], *, held: Mapping[str, fx.RecordEvent], now: float) -> None:
        gangs: dict[str, list[fx.Bind]] = {}
        for bind in binds:
            key = _split(bind.pod)
            group = self.cache.pod_state(key).podgroup if key in self.cache.pods else None
            gangs.setdefault(f"{key[0]}/{group or key[1]}", []).append(bind)
            self.cache.assume_bound(key, bind.node, bind.gpu_groups, now)
        for gang in gangs.values():
            self._spawn(self._bind_gang(gang, held=held, now=now))

    async def _bind_gang(self, gang: list[fx.Bind], *, held: Mapping[str, fx.RecordEvent], now: float) -> None:
        if self.prebind is not None and not await self.prebind(gang):
            self.counters.bind_failures += len(gang)
            for bind in gang:
                self.cache.forget(_split(bind.pod))
            return
        outcomes = await asyncio.gather(*(self._bind_one(bind) for bind in gang))
        failed = [b for b, o in zip(gang, outcomes, strict=True) if not o.ok]
        if not failed:
            for bind in gang:
                event = held.get(f"Pod/{bind.pod}")
                if event is not None:
                    self._event(event, now=now)
            return
        self.counters.gang_rollbacks += 1
        for bind in gang:
            self.cache.forget(_split(bind.pod))
        for bind, outcome in zip(gang, outcomes, strict=True):
            if outcome.ok and not outcome.already_done:
                namespace, name = _split(bind.pod)
                cached = self.cache.pods.get((namespace, name))
                uid = cached.pod.meta.uid if cached else None
                log.warning("rolling back %s: another pod of its gang could not be bound", bind.pod)
                await self.writer.delete_pod(namespace, name, uid=uid, grace_seconds=None)

    async def _bind_one(self, bind: fx.Bind) -> Outcome:
        namespace, name = _split(bind.pod)
        cached = self.cache.pods.get((namespace, name))
        if cached is None:
            return Outcome(ok=False, code=404, message="pod is gone")
        if bind.labels:
            patch = {"metadata": {"labels": dict(bind.labels)}}
            outcome = await self.writer.patch(resources.PODS, namespace, name, patch, decision=True)
            if not outcome.ok:
                self.counters.bind_failures += 1
                return outcome
        outcome = await self.writer.bind(
            namespace, name, uid=cached.pod.meta.uid, node=bind.node, annotations=dict(bind.annotations)
        )
        if outcome.ok:
            self.counters.binds += 1
        else:
            self.counters.bind_failures += 1
            log.warning("binding %s to %s failed: %s", bind.pod, bind.node, outcome.message)
        return outcome

    # ----------------------------------------------------------------- eviction
    def _evict(self, effect: fx.Evict, *, now: float) -> None:
        key = _split(effect.pod)
        cached = self.cache.pods.get(key)
        if cached is None:
            return
        self.cache.assume_evicted(key, effect.node, now)
        self.counters.evictions += 1
        self._spawn(self._send_eviction(key, cached.pod.meta.uid, cached.pod.termination_grace_seconds))

    async def _send_eviction(self, key: ObjectKey, uid: str, grace: float) -> None:
        namespace, name = key
        if self.eviction_mode == "eviction":
            outcome = await self.writer.evict(namespace, name, uid=uid)
        else:
            outcome = await self.writer.delete_pod(namespace, name, uid=uid, grace_seconds=None)
        if not outcome.ok:
            log.warning("evicting %s/%s failed: %s", namespace, name, outcome.message)
            self.cache.forget(key)

    # ----------------------------------------------------------------- status and metadata
    def _changed(self, kind: str, key: str, field_name: str, desired: Any, current: Any, version: str) -> bool:
        """Whether a write is needed: the cache differs, and the same value was not already sent
        against the same version of the object."""
        if desired == current:
            self._sent.pop((kind, key, field_name), None)
            return False
        sent = self._sent.get((kind, key, field_name))
        if sent is not None and sent == (version, desired):
            self.counters.skipped_unchanged += 1
            return False
        self._sent[(kind, key, field_name)] = (version, desired)
        return True

    def _podgroup_raw(self, key: str) -> Mapping[str, Any] | None:
        return self.cache.podgroup_raw.get(_split(key))

    @staticmethod
    def _version(raw: Mapping[str, Any]) -> str:
        return str((raw.get("metadata") or {}).get("resourceVersion", ""))

    def _annotate_podgroup(self, effect: fx.AnnotatePodGroup) -> None:
        raw = self._podgroup_raw(effect.podgroup)
        if raw is None:
            return
        current = ((raw.get("metadata") or {}).get("annotations") or {}).get(effect.key)
        if not self._changed(
            "PodGroup", effect.podgroup, f"annotation:{effect.key}", effect.value, current, self._version(raw)
        ):
            return
        namespace, name = _split(effect.podgroup)
        patch = {"metadata": {"annotations": {effect.key: effect.value}}}
        self._spawn(self._write(self.writer.patch(resources.PODGROUPS, namespace, name, patch)))

    def _podgroup_condition(self, effect: fx.SetPodGroupCondition) -> bool:
        """Write the condition unless the PodGroup already shows it; False if the PodGroup is not seen
        yet (made by the pod grouper this cycle): the next cycle decides its condition again."""
        raw = self._podgroup_raw(effect.podgroup)
        if raw is None:
            return False
        desired = [effect.condition.as_status()] if effect.condition is not None else None
        current = (raw.get("status") or {}).get("schedulingConditions") or None
        if not self._changed("PodGroup", effect.podgroup, "schedulingConditions", desired, current, self._version(raw)):
            return True
        namespace, name = _split(effect.podgroup)
        patch = {"status": {"schedulingConditions": desired}}
        self.cache.assume_condition((namespace, name), effect.condition)
        pending = self.writer.patch(resources.PODGROUPS, namespace, name, patch, subresource="status")
        self._spawn(self._write_condition((namespace, name), effect.condition, pending))
        return True

    def _podgroup_resources(self, effect: fx.SetPodGroupResources) -> None:
        raw = self._podgroup_raw(effect.podgroup)
        if raw is None:
            return
        desired = {k: dict(v) for k, v in effect.resources.items()}
        current = (raw.get("status") or {}).get("resourcesStatus")
        if not self._changed("PodGroup", effect.podgroup, "resourcesStatus", desired, current, self._version(raw)):
            return
        namespace, name = _split(effect.podgroup)
        patch = {"status": {"resourcesStatus": desired}}
        self._spawn(self._write(self.writer.patch(resources.PODGROUPS, namespace, name, patch, subresource="status")))

    def _queue_status(self, effect: fx.SetQueueStatus) -> None:
        raw = self.cache.queue_raw.get(effect.queue)
        if raw is None:
            return
        status = raw.get("status") or {}
        desired = dict(effect.status)
        current = {k: status.get(k) for k in desired}
        if current.get("childQueues") is None and desired.get("childQueues") == []:
            current["childQueues"] = []
        if not self._changed("Queue", effect.queue, "status", desired, current, self._version(raw)):
            return
        patch = {"status": desired}
        self._spawn(self._write(self.writer.patch(resources.QUEUES, None, effect.queue, patch, subresource="status")))

    def _pod_unschedulable(self, effect: fx.MarkPodUnschedulable, *, now: float) -> None:
        key = _split(effect.pod)
        cached = self.cache.pods.get(key)
        if cached is None:
            return
        conditions = (cached.raw.get("status") or {}).get("conditions") or []
        current = next((c for c in conditions if isinstance(c, Mapping) and c.get("type") == POD_SCHEDULED), None)
        desired = ("False", effect.reason, effect.message)
        seen = (current.get("status"), current.get("reason"), current.get("message")) if current else None
        if not self._changed("Pod", effect.pod, "PodScheduled", desired, seen, self._version(cached.raw)):
            return
        condition = {
            "type": POD_SCHEDULED,
            "status": "False",
            "reason": effect.reason,
            "message": effect.message,
            "lastTransitionTime": format_timestamp(now),
        }
        patch = {"status": {"conditions": [condition]}}
        self._spawn(
            self._write(self.writer.patch(resources.PODS, key[0], key[1], patch, subresource="status", strategic=True))
        )

    # ----------------------------------------------------------------- events
    def _event(self, effect: fx.RecordEvent, *, now: float) -> None:
        kind, _, rest = effect.object.partition("/")
        namespace, _, name = rest.rpartition("/")
        regarding: dict[str, Any] = {"kind": kind, "namespace": namespace, "name": name}
        if kind == "Pod":
            cached = self.cache.pods.get((namespace, name))
            regarding.update(apiVersion="v1", uid=cached.pod.meta.uid if cached else "")
        elif kind == "PodGroup":
            raw = self.cache.podgroup_raw.get((namespace, name)) or {}
            regarding.update(apiVersion=resources.PODGROUPS.api_version, uid=(raw.get("metadata") or {}).get("uid", ""))
        elif kind == "Queue":
            regarding = {"kind": kind, "name": rest, "apiVersion": resources.QUEUES.api_version}
            namespace = "default"
        micro = datetime.datetime.fromtimestamp(now, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{uuid.uuid4().hex[:12]}", "namespace": namespace or "default"},
            "eventTime": micro,
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self.identity,
            "action": "Scheduling",
            "reason": effect.reason,
            "type": effect.type,
            "note": effect.message[:1024],
            "regarding": regarding,
        }
        self.counters.events += 1
        self._spawn(self._write(self.writer.create(resources.EVENTS, namespace or "default", body)))

    async def _write(self, pending: Any) -> bool:
        outcome: Outcome = await pending
        self.counters.status_writes += 1
        if not outcome.ok:
            log.warning("write failed: %s", outcome.message)
        return outcome.ok

    async def _write_condition(self, key: tuple[str, str], condition: fx.Condition | None, pending: Any) -> None:
        ok = await self._write(pending)
        self.cache.condition_written(key, condition, ok=ok)
