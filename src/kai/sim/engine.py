"""The simulated cluster: a virtual clock, an object store and the loop that runs scheduling cycles.

Each cycle at virtual time `now`:
1. create objects whose `sim.kai.scheduler/create-at` time has come;
2. finish timed transitions (releasing pods leave, pods whose duration ran out succeed);
3. let the emulated controllers create or recreate their pods;
4. group new pods into PodGroups (the pod grouper);
5. build a snapshot, run the scheduling cycle, apply its decisions (an eviction also stamps its
   PodGroup's kai.scheduler/last-eviction-timestamp, which re-arms the PodGroup's preemption delay);
6. advance the clock by the schedule period.

Besides the events of the contract (`totals.events`), the simulation keeps a `timeline`: every
event plus the moments the events leave out (an object created, a pod pipelined), in the order
they happened, for people who want to read the story (`kai sim --timeline`).
"""

from __future__ import annotations

import copy
import hashlib
import heapq
import itertools
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

import msgspec

from kai.api import pod as api_pod
from kai.api.errors import InputError
from kai.api.fields import format_timestamp, parse_duration, parse_timestamp
from kai.api.manifest import ApiObject, ConfigMap, Namespace, Workload, group_of
from kai.api.node import Node
from kai.api.pod import Pod
from kai.api.podgroup import (
    LAST_START_ANNOTATION,
    STALE_TIMESTAMP_ANNOTATION,
    PodGroup,
)
from kai.api.priority import PriorityClass
from kai.api.queue import Queue
from kai.cluster import collector, effects, explaining
from kai.cluster import pods as cluster_pods
from kai.cluster.state import cycle_snapshot
from kai.core.decisions import CycleResult, Event, QueueFigures
from kai.core.model import Snapshot, TaskStatus
from kai.core.session import SchedulerConfig, Session
from kai.core.snapshot_builder import BuiltSnapshot, PodState
from kai.explain.model import Explanation
from kai.explain.render import not_our_scheduler
from kai.scheduler.cycle import close_session, run_actions
from kai.sim import binder, controllers, defaults, grouping, reconcile
from kai.sim.state import SimPod, SimPodGroup, stamped_document

SCHEDULER_NAME = "kai-scheduler"
DURATION_ANNOTATION = "sim.kai.scheduler/duration"
CREATE_AT_ANNOTATION = "sim.kai.scheduler/create-at"
_FINISHED = (TaskStatus.SUCCEEDED, TaskStatus.FAILED)


class EvictionRecord(msgspec.Struct, frozen=True, kw_only=True):
    time: float
    pod: str
    podgroup: str
    action: str
    preemptor: str | None


class EventRecord(msgspec.Struct):
    """An event, or a moment of the timeline (a Struct: the store records one per object it creates)."""

    time: float
    type: str
    reason: str
    object: str
    message: str


class Totals(msgspec.Struct):
    cycles: int = 0
    evictions: list[EvictionRecord] = msgspec.field(default_factory=list)
    events: list[EventRecord] = msgspec.field(default_factory=list)


def _uid(sequence: int, seed: str) -> str:
    """A deterministic UUID-shaped uid. It starts with the creation sequence number, so objects
    created at the same instant order by uid as they came in (earlier documents are older)."""
    digest = hashlib.sha1(seed.encode()).hexdigest()
    return f"{sequence:08x}-{digest[8:12]}-4{digest[13:16]}-8{digest[17:20]}-{digest[20:32]}"


class Simulation:
    """An embedded cluster that applies the same YAML a user would `kubectl apply`."""

    def __init__(
        self,
        objects: Sequence[tuple[ApiObject, Mapping[str, Any]]],
        *,
        config: SchedulerConfig,
        start_time: float | None = None,
    ) -> None:
        self.config = config
        # one walk over the input for what the store needs to know of it as a whole (most objects are pods)
        latest: float | None = None  # the latest creation time given
        delayed = False  # whether an object has a create-at annotation
        workloads: list[Workload] = []
        has_nodes = has_default_queue = False
        priority_classes: set[str] = set()
        for obj, _ in objects:
            meta = obj.meta
            created = meta.creation_timestamp
            if created is not None and (latest is None or created > latest):
                latest = created
            if CREATE_AT_ANNOTATION in meta.annotations:
                delayed = True
            if type(obj) is Pod:
                continue
            if isinstance(obj, Workload):
                workloads.append(obj)
            elif isinstance(obj, Node):
                has_nodes = True
            elif isinstance(obj, PriorityClass):
                priority_classes.add(meta.name)
            elif isinstance(obj, Queue) and meta.name == defaults.DEFAULT_QUEUE:
                has_default_queue = True
        self.start = (
            start_time
            if start_time is not None
            else (latest if latest is not None else parse_timestamp(defaults.DEFAULT_START))
        )
        self.now = self.start
        self.nodes: dict[str, Node] = {}
        self.queues: dict[str, Queue] = {}
        self.priority_classes: dict[str, PriorityClass] = {}
        self.podgroups: dict[tuple[str, str], SimPodGroup] = {}
        self.pods: dict[str, SimPod] = {}
        self._pod_keys: list[str] | None = None  # sorted(self.pods), until a pod comes or goes
        self._ordered_pods: tuple[list[str] | None, list[tuple[str, SimPod]]] = (None, [])  # for those keys
        self.workloads: dict[tuple[str, str, str], Workload] = {}
        # ns, group, kind, name -> the document as stored (pods: `SimPod.raw`)
        self.raw_objects: dict[tuple[str, str, str, str], Mapping[str, Any]] = {}
        self.names = controllers.SeededNameSource(seed="kai-sim")
        self.ledger = binder.DeviceLedger()
        self.configmaps: dict[tuple[str, str], ConfigMap] = {}
        self.totals = Totals()
        self.timeline: list[EventRecord] = []  # events plus creations and pipelining, in order
        self.wakeups: dict[tuple[str, str, str], float] = {}  # controllers' requeue times (a CronJob's next run)
        self.queue_figures: dict[str, QueueFigures] = {}  # as the last cycle left them
        self.last_cycle: tuple[Snapshot, Session] | None = None  # its snapshot and session, for `kai explain`
        self.explanations: dict[str, Explanation] = {}  # why the last cycle's waiting PodGroups wait
        self.fixes = explaining.FixMemory()  # what the cycles at rest found (`explaining.cycle_explanations`)
        self.seeks_fixes = True  # whether its cycles' conditions carry verified fixes (not in a `fork`)
        self.warnings: list[str] = []
        self._uid_counter = itertools.count(1)
        self._pending: list[tuple[float, int, ApiObject, Mapping[str, Any]]] = []
        self._seq = itertools.count()
        self._last_messages: dict[str, str] = {}
        for workload in workloads:
            reconcile.validate_workload(workload)
        due: Sequence[tuple[ApiObject, Mapping[str, Any]]] = objects  # without create-at, all of it, in order
        if delayed:
            due = self._arrivals(objects)
        if not has_nodes:
            for node in defaults.default_nodes():
                self.nodes[node.name] = node
        for pc in defaults.default_priority_classes():
            if pc.name not in priority_classes:  # KAI's Helm chart installs each of the four
                self.priority_classes[pc.name] = pc
        if not has_default_queue:
            for q in defaults.default_queues(created=self.start - 1):
                self.queues[q.name] = q
        for obj, raw in due:
            self.create(obj, raw)
        # the pods the input has on nodes hold devices, bound in the order of their keys
        bound = sorted(
            [
                key
                for key, sim in self.pods.items()
                if sim.node is not None and sim.status in (TaskStatus.RUNNING, TaskStatus.RELEASING)
            ]
        )
        for key in bound:
            loaded = self.pods[key]
            labels, annotations = effects.bind_metadata(loaded.gpu_groups)
            loaded.labels.update(labels)
            loaded.annotations.update(annotations)
            self._bind_devices(loaded)

    def _arrivals(
        self, objects: Sequence[tuple[ApiObject, Mapping[str, Any]]]
    ) -> list[tuple[ApiObject, Mapping[str, Any]]]:
        """The objects due now, in order of time, then input (as popped from the heap); the others (their
        create-at time to come) go to `_pending`."""
        arrivals: list[tuple[float, int, ApiObject, Mapping[str, Any]]] = []
        for i, (obj, raw) in enumerate(objects):
            delay_text = obj.meta.annotations.get(CREATE_AT_ANNOTATION)
            at = self.start
            if delay_text:
                try:
                    at = self.start + parse_duration(delay_text)
                except ValueError as exc:
                    raise InputError(
                        source=getattr(obj, "source", None),
                        kind=type(obj).__name__,
                        name=obj.meta.name,
                        field=f"metadata.annotations.{CREATE_AT_ANNOTATION}",
                        problem=str(exc),
                    ) from None
            arrivals.append((at, i, obj, raw))
        due = sorted(a for a in arrivals if a[0] <= self.now + 1e-9)
        self._pending = [a for a in arrivals if a[0] > self.now + 1e-9]
        heapq.heapify(self._pending)
        return [(obj, raw) for _, _, obj, raw in due]

    # ----------------------------------------------------------------- object creation
    def _stamp(self, obj: ApiObject, raw: Mapping[str, Any]) -> tuple[ApiObject, dict[str, Any] | None]:
        """Give an object the uid and creation time the API server would; with its stored document, except
        for a pod (`SimPod.raw` makes a pod's when it is read)."""
        old = obj.meta
        uid = old.uid or _uid(next(self._uid_counter), f"{old.namespace}/{old.name}")
        created = old.creation_timestamp if old.creation_timestamp is not None else self.now
        stamped = old.stamped(uid=uid, created=created)
        if isinstance(obj, Pod):
            return msgspec.structs.replace(obj, meta=stamped), None
        body = stamped_document(raw, stamped)
        if isinstance(obj, Workload):
            return msgspec.structs.replace(obj, meta=stamped, raw=body), body
        return msgspec.structs.replace(obj, meta=stamped), body

    def _create_due(self) -> None:
        while self._pending and self._pending[0][0] <= self.now + 1e-9:
            _, _, obj, raw = heapq.heappop(self._pending)
            self.create(obj, raw)

    def create(self, obj: ApiObject, raw: Mapping[str, Any]) -> None:
        """Store an object as the API server would (`_stamp`)."""
        obj, body = self._stamp(obj, raw)
        meta = obj.meta
        if body is None:  # a pod (of kind Pod in group ""): found by `lookup` among the pods
            assert isinstance(obj, Pod)
            self._note("Created", f"Pod/{meta.namespace}/{meta.name}" if meta.namespace else f"Pod/{meta.name}", "")
            self._add_pod(obj, raw)
            return
        kind = str(body.get("kind", ""))
        self.raw_objects[(meta.namespace, group_of(str(body.get("apiVersion", ""))), kind, meta.name)] = body
        if isinstance(obj, PodGroup | Workload) or self.now > self.start:
            self._note(
                "Created", f"{kind}/{meta.namespace}/{meta.name}" if meta.namespace else f"{kind}/{meta.name}", ""
            )
        if isinstance(obj, Node):
            self.nodes[obj.name] = obj
        elif isinstance(obj, Queue):
            self.queues[obj.name] = obj
        elif isinstance(obj, PriorityClass):
            self.priority_classes[obj.name] = obj
        elif isinstance(obj, PodGroup):
            self.podgroups[(meta.namespace, obj.name)] = SimPodGroup(podgroup=obj)
        elif isinstance(obj, Workload):
            self.workloads[(obj.group_kind, meta.namespace, obj.name)] = obj
        elif isinstance(obj, ConfigMap):
            self.configmaps[(meta.namespace, meta.name)] = obj
        elif isinstance(obj, Namespace):
            pass

    def _add_pod(self, pod: Pod, source: Mapping[str, Any]) -> None:
        ours = pod.scheduler_name == SCHEDULER_NAME
        observed = cluster_pods.observe(pod)
        status, node = observed.status, observed.node
        if status in _FINISHED:
            node = None
        duration = None
        if DURATION_ANNOTATION in pod.meta.annotations:
            try:
                duration = parse_duration(pod.meta.annotations[DURATION_ANNOTATION])
            except ValueError as exc:
                raise InputError(
                    source=None,
                    kind="Pod",
                    name=pod.key,
                    field=f"metadata.annotations.{DURATION_ANNOTATION}",
                    problem=str(exc),
                ) from None
        groups = cluster_pods.gpu_groups(pod.meta.labels)
        sim = SimPod(
            pod=pod,
            source=source,
            ours=ours,
            status=status,
            node=node,
            duration=duration,
            gpu_groups=groups,
            labels=dict(pod.meta.labels),
            annotations=dict(pod.meta.annotations),
        )
        if node is not None:  # running or releasing (the only pods left with a node; most pods read are pending)
            sim.start_time = pod.meta.creation_timestamp
            if status == TaskStatus.RUNNING:
                if duration is not None:
                    sim.finish_at = self.now + duration
            else:  # releasing: gone at its deletionTimestamp, and seen by at least one cycle before that
                deadline = pod.meta.deletion_timestamp or self.now
                sim.release_at = max(deadline, self.now + self.config.schedule_period)
        elif not ours and status == TaskStatus.PENDING:
            sim.reason = "NotOurScheduler"
            sim.message = not_our_scheduler(pod.scheduler_name, SCHEDULER_NAME)
        self.pods[pod.key] = sim
        self._pod_keys = None

    # ----------------------------------------------------------------- grouping
    # ----------------------------------------------------------------- store operations (controllers)
    def pod_keys(self) -> list[str]:
        """The pods' keys in order (a cycle walks them several times; they change only as pods come
        and go). The list is replaced, never changed, so a walk may add or remove pods."""
        if self._pod_keys is None:
            self._pod_keys = sorted(self.pods)
        return self._pod_keys

    def ordered_pods(self) -> list[tuple[str, SimPod]]:
        """(key, pod) of every pod in the order of `pod_keys`: a walk over all of them looks none up (at
        50,000 pods, a lookup per pod was half of such a walk). Replaced, never changed, as `pod_keys`."""
        keys = self.pod_keys()
        if self._ordered_pods[0] is not keys:
            self._ordered_pods = (keys, [(key, self.pods[key]) for key in keys])
        return self._ordered_pods[1]

    def record_event(self, type_: str, reason: str, obj: str, message: str) -> None:
        self._event(type_, reason, obj, message)

    def lookup(self, namespace: str, api_version: str, kind: str, name: str) -> Mapping[str, Any] | None:
        """An object by namespace, group (from `api_version`) and kind, as the pod grouper asks for it."""
        group = group_of(api_version)
        if kind == "Pod" and group == "":
            pod = self.pods.get(f"{namespace}/{name}")
            if pod is None and namespace:
                pod = self.pods.get(f"/{name}")
            return None if pod is None else pod.raw
        found = self.raw_objects.get((namespace, group, kind, name))
        if found is None and namespace:
            found = self.raw_objects.get(("", group, kind, name))
        return found

    def _bind_devices(self, sim: SimPod) -> None:
        """Record what the binder writes on a bound pod: device indices, group label, env, annotation."""
        assert sim.node is not None
        node = self.nodes.get(sim.node)
        capacity = int(node.allocatable.get(api_pod.GPU_RESOURCE, 0)) if node is not None else 0
        binding = self.ledger.bind(
            node=sim.node,
            capacity=capacity,
            pod=sim.pod.key,
            whole_gpus=int(sim.pod.requests.get(api_pod.GPU_RESOURCE, 0)),
            groups=sim.gpu_groups,
            portion=sim.gpu_portion,
        )
        sim.env = binding.env
        sim.gpu_devices = binding.devices

    def _unbind_devices(self, sim: SimPod) -> None:
        """The pod no longer holds devices (gone or finished); shared groups live while others use them."""
        if sim.node is None:
            return
        live = {
            g
            for other in self.pods.values()
            if other is not sim
            and other.node == sim.node
            and other.status in (TaskStatus.RUNNING, TaskStatus.RELEASING)
            for g in other.gpu_groups
        }
        self.ledger.release(node=sim.node, pod=sim.pod.key, live_groups=live)

    def _forget_pod(self, key: str) -> None:
        self._unbind_devices(self.pods[key])
        sim = self.pods.pop(key)
        self._pod_keys = None
        self._collect_garbage(sim.pod.meta.uid, f"Pod {sim.pod.name}")  # e.g. an LWS leader's worker StatefulSet

    def delete_pod(self, key: str, *, reason: str) -> None:
        """Delete a pod as the API server would: a running pod terminates over its grace period."""
        sim = self.pods[key]
        if sim.status == TaskStatus.RUNNING:
            sim.move(TaskStatus.RELEASING)
            sim.release_at = self.now + sim.pod.termination_grace_seconds
            self._event("Normal", "Killing", f"Pod/{key}", f"stopping pod: {reason}")
        elif sim.status != TaskStatus.RELEASING:
            self._forget_pod(key)

    def delete_workload(self, key: tuple[str, str, str]) -> None:
        """Delete a controller-managed object and, by garbage collection, everything it owns."""
        workload = self.workloads.pop(key, None)
        if workload is None:
            return
        group = key[0].split("/", 1)[0]
        self.raw_objects.pop((workload.meta.namespace, group, workload.kind, workload.name), None)
        self._collect_garbage(workload.meta.uid, f"{workload.kind} {workload.name}")

    def _collect_garbage(self, uid: str, owner: str) -> None:
        """Delete every pod, workload and PodGroup that names the deleted `owner` (by `uid`) among its
        owners (the pod grouper's PodGroup goes with its top owner: a bare pod's with the pod)."""

        def owned(raw: Mapping[str, Any]) -> bool:
            refs = (raw.get("metadata") or {}).get("ownerReferences") or []
            return bool(uid) and any(ref.get("uid") == uid for ref in refs)

        for pod_key in self.pod_keys():
            pod = self.pods.get(pod_key)  # an earlier deletion may have taken it
            if pod is not None and uid and any(ref.uid == uid for ref in pod.pod.meta.owner_references):
                self.delete_pod(pod_key, reason=f"its owner {owner} was deleted")
        for other in sorted(self.workloads):
            if other in self.workloads and owned(self.workloads[other].raw):
                self.delete_workload(other)
        for key in sorted(self.podgroups):
            group = self.podgroups[key]
            if uid and uid in (group.owner_uid, *(ref.uid for ref in group.podgroup.meta.owner_references)):
                del self.podgroups[key]
                self.raw_objects.pop((key[0], "scheduling.run.ai", "PodGroup", key[1]), None)

    def set_workload_status(self, key: tuple[str, str, str], status: Mapping[str, Any]) -> None:
        workload = self.workloads[key]
        raw = dict(workload.raw)
        raw["status"] = copy.deepcopy(dict(status))
        self.workloads[key] = msgspec.structs.replace(workload, raw=raw)
        group = key[0].split("/", 1)[0]
        self.raw_objects[(workload.meta.namespace, group, workload.kind, workload.name)] = raw

    def _event(self, type_: str, reason: str, obj: str, message: str) -> None:
        """Record an event, once per object and message (as the API server would aggregate them)."""
        if self._last_messages.get(obj + reason) == message:
            return
        self._last_messages[obj + reason] = message
        record = EventRecord(time=self.now, type=type_, reason=reason, object=obj, message=message)
        self.totals.events.append(record)
        self.timeline.append(record)

    def _note(self, reason: str, obj: str, message: str) -> None:
        """Record a moment of the story that is no Kubernetes event (timeline only, not in the JSON)."""
        self.timeline.append(EventRecord(time=self.now, type="Normal", reason=reason, object=obj, message=message))

    # ----------------------------------------------------------------- timed transitions
    def _advance_pods(self) -> None:
        keys = self.pod_keys()
        for key, sim in self.ordered_pods():
            if self._pod_keys is not keys and self.pods.get(key) is not sim:
                continue  # deleted in this walk, with an owner pod that went before it
            if sim.status == TaskStatus.RELEASING and sim.release_at is not None and sim.release_at <= self.now + 1e-9:
                self._forget_pod(key)
                self._event("Normal", "Killing", f"Pod/{key}", "pod deleted after its termination grace period")
            elif sim.status == TaskStatus.RUNNING and sim.finish_at is not None and sim.finish_at <= self.now + 1e-9:
                self.finish_pod(key)

    def pod_end(self, key: str) -> float | None:
        """When a running pod succeeds by itself (its `sim.kai.scheduler/duration`); None if it never does."""
        sim = self.pods.get(key)
        return sim.finish_at if sim is not None and sim.status == TaskStatus.RUNNING else None

    def finish_pod(self, key: str, *, failed: bool = False) -> None:
        """A running pod's containers exit, as the kubelet reports it: the pod Succeeded (or Failed, with
        `failed`), keeps its name and no longer holds devices. Its controller reacts in the next cycle."""
        sim = self.pods[key]
        sim.move(TaskStatus.FAILED if failed else TaskStatus.SUCCEEDED)
        self._unbind_devices(sim)
        if failed:
            self._event("Warning", "Failed", f"Pod/{key}", "pod failed")
        else:
            self._event("Normal", "Completed", f"Pod/{key}", "pod succeeded")

    def next_timed_event(self) -> float | None:
        times = [t for t, *_ in self._pending]
        for sim in self.pods.values():
            if sim.status == TaskStatus.RELEASING and sim.release_at is not None:
                times.append(sim.release_at)
            if sim.status == TaskStatus.RUNNING and sim.finish_at is not None:
                times.append(sim.finish_at)
        grace = self.config.staleness_grace_period
        if grace >= 0:
            times.extend(g.stale_since + grace for g in self.podgroups.values() if g.stale_since is not None)
        times.extend(t for key, t in self.wakeups.items() if key in self.workloads)
        return min(times) if times else None

    # ----------------------------------------------------------------- the cycle
    def step(self) -> bool:
        """Run one cycle at the current time, then advance the clock. Returns whether anything changed."""
        with collector.paused(freeze=False):  # the cycle's garbage is collected after it
            self._create_due()
            self._advance_pods()
            controllers_changed = reconcile.reconcile_all(self, self.names)
            grouping.group_new_pods(self)
            result = self._schedule()
            changed = self._apply(result) or controllers_changed
        self.totals.cycles += 1
        self.now += self.config.schedule_period
        return changed

    # ----------------------------------------------------------------- the cluster-state protocol
    def node_objects(self) -> Collection[Node]:
        return self.nodes.values()

    def queue_objects(self) -> Collection[Queue]:
        return self.queues.values()

    def priority_class_objects(self) -> Mapping[str, PriorityClass]:
        return self.priority_classes

    def podgroup_objects(self) -> Collection[PodGroup]:
        return [g.podgroup for g in self.podgroups.values()]

    def pod_states(self) -> tuple[Sequence[PodState], Sequence[PodState]]:
        ours: list[PodState] = []
        foreign: list[PodState] = []
        for _, sim in self.ordered_pods():
            # a pipelined pod is placed anew each cycle, as KAI re-places pipelined tasks
            status = TaskStatus.PENDING if sim.status == TaskStatus.PIPELINED else sim.status
            state = PodState(
                pod=sim.pod,
                status=status,
                node=sim.node,
                nominated_node=sim.nominated_node,
                gpu_groups=sim.gpu_groups,
                start_time=sim.start_time,
                podgroup=sim.podgroup,
            )
            (ours if sim.ours else foreign).append(state)
        return ours, foreign

    def list_pods(self, namespace: str, match_labels: Mapping[str, str]) -> Sequence[Mapping[str, Any]]:
        out: list[Mapping[str, Any]] = []
        for key in self.pod_keys():
            pod = self.pods[key]
            if pod.pod.namespace == namespace and all(pod.labels.get(k) == v for k, v in match_labels.items()):
                out.append(pod.raw)
        return out

    # ----------------------------------------------------------------- the effects planner's view
    def waiting_pods(self) -> Mapping[str, Sequence[str]]:
        by_group: dict[tuple[str, str], list[str]] = {}  # (namespace, PodGroup): a gang's pods are one entry
        pending = TaskStatus.PENDING
        for key, sim in self.ordered_pods():
            if sim.podgroup is not None and sim.status == pending:
                group = (sim.pod.meta.namespace, sim.podgroup)
                members = by_group.get(group)
                if members is None:
                    by_group[group] = [key]
                else:
                    members.append(key)
        return {f"{namespace}/{name}": keys for (namespace, name), keys in by_group.items()}

    def podgroup_exists(self, key: str) -> bool:
        namespace, name = key.split("/", 1)
        return (namespace, name) in self.podgroups

    def podgroup_condition(self, key: str) -> effects.Condition | None:
        namespace, name = key.split("/", 1)
        group = self.podgroups.get((namespace, name))
        return group.condition if group is not None else None

    def queue_children(self) -> Mapping[str, Sequence[str]]:
        children: dict[str, list[str]] = {}
        for q in self.queues.values():
            if q.parent is not None:
                children.setdefault(q.parent, []).append(q.name)
        return children

    def snapshot(self) -> BuiltSnapshot:
        """The snapshot the next cycle would see (pure with respect to the store)."""
        return cycle_snapshot(self, now=self.now, config=self.config)

    def _schedule(self) -> CycleResult:
        built = self.snapshot()
        for problem in built.queue_problems:
            self._event("Warning", "InvalidQueue", f"Queue/{problem.queue}", problem.message)
        session = run_actions(built.snapshot, self.config)
        self.last_cycle = (built.snapshot, session)
        self.explanations = explaining.cycle_explanations(
            self,
            self.config,
            built.snapshot,
            session,
            pod_end=self.pod_end,
            lazy_owners=True,
            fixes=self.fixes,
            seek_fixes=self.seeks_fixes,
        )
        return close_session(session)

    def _apply(self, result: CycleResult) -> bool:
        """Apply the planned effects to the store; returns whether any pod changed state."""
        self.queue_figures = result.queues
        changed = False
        mark = effects.MarkPodUnschedulable
        for effect in effects.plan(result, self, now=self.now, explanations=self.explanations):
            if type(effect) is mark:  # one per waiting pod: most of a large cycle's effects
                sim = self.pods[effect.pod]
                sim.reason, sim.message = effect.reason, effect.message
                continue
            changed = self._apply_effect(effect) or changed
        return changed

    def _apply_effect(self, effect: effects.Effect) -> bool:
        if isinstance(effect, effects.Bind):
            sim = self.pods[effect.pod]
            sim.move(TaskStatus.RUNNING)
            sim.node, sim.nominated_node = effect.node, None
            sim.gpu_groups, sim.gpu_portion = effect.gpu_groups, effect.gpu_portion
            sim.labels.update(effect.labels)
            sim.annotations.update(effect.annotations)
            sim.start_time = self.now
            sim.reason = sim.message = None
            self._bind_devices(sim)
            if sim.duration is not None:
                sim.finish_at = self.now + sim.duration
            return True
        if isinstance(effect, effects.Nominate):
            sim = self.pods[effect.pod]
            changed = sim.status != TaskStatus.PIPELINED or sim.nominated_node != effect.node
            if changed:
                self._note("Pipelined", f"Pod/{effect.pod}", effect.message)
            sim.move(TaskStatus.PIPELINED)
            sim.nominated_node = effect.node
            sim.gpu_groups, sim.gpu_portion = effect.gpu_groups, effect.gpu_portion
            sim.reason, sim.message = "Pipelined", effect.message
            return changed
        if isinstance(effect, effects.Evict):
            sim = self.pods[effect.pod]
            sim.move(TaskStatus.RELEASING)
            sim.release_at = self.now + sim.pod.termination_grace_seconds
            self.totals.evictions.append(
                EvictionRecord(
                    time=self.now,
                    pod=effect.pod,
                    podgroup=effect.podgroup,
                    action=effect.action,
                    preemptor=effect.preemptor,
                )
            )
            return True
        if isinstance(effect, effects.AnnotatePodGroup):
            ns, name = effect.podgroup.split("/", 1)
            group = self.podgroups.get((ns, name))
            if group is not None:
                self._annotate(group, effect.key, effect.value)
                if effect.key == LAST_START_ANNOTATION:
                    group.last_start = self.now
                elif effect.key == STALE_TIMESTAMP_ANNOTATION:
                    group.stale_since = parse_timestamp(effect.value) if effect.value is not None else None
            return False
        if isinstance(effect, effects.SetPodGroupCondition):
            ns, name = effect.podgroup.split("/", 1)
            self.podgroups[(ns, name)].condition = effect.condition
            return False
        if isinstance(effect, effects.MarkPodUnschedulable):
            sim = self.pods[effect.pod]
            sim.reason, sim.message = effect.reason, effect.message
            return False
        if isinstance(effect, effects.RecordEvent):
            self._event(effect.type, effect.reason, effect.object, effect.message)
            return False
        return False  # resource figures: the output reads them from the cycle (queue_figures)

    @staticmethod
    def _annotate(group: SimPodGroup, key: str, value: str | None) -> None:
        """Write (or remove, for None) an annotation the scheduler keeps on a PodGroup."""
        meta = group.podgroup.meta
        annotations = dict(meta.annotations)
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value
        group.podgroup = msgspec.structs.replace(
            group.podgroup, meta=msgspec.structs.replace(meta, annotations=annotations)
        )

    def run(
        self,
        *,
        cycles: int | None,
        until_idle: bool,
        max_time: float,
        pauses: Sequence[float] = (),
        on_pause: Callable[[float], None] | None = None,
    ) -> None:
        """Run `cycles` cycles (default 1), or with `until_idle` until nothing changes and no timed event
        is due; no cycle starts at or after `max_time` seconds after the start.

        `on_pause(t)` is called once for each `t` of `pauses` (seconds after the start) with the store as
        it is at that virtual time, after every cycle that began before it; a pause after the run's end
        sees the final state.
        """
        waiting = sorted(self.start + t for t in pauses)

        def reach(time: float) -> None:
            while waiting and waiting[0] <= time + 1e-9:
                moment = waiting.pop(0)
                if on_pause is not None:
                    on_pause(moment - self.start)

        reach(self.now)
        for _ in self.cycles(cycles=cycles, until_idle=until_idle, until=self.start + max_time):
            reach(self.now)  # the clock is now where the next cycle starts
        reach(float("inf"))

    def cycles(self, *, cycles: int | None, until_idle: bool, until: float) -> Iterator[bool]:
        """Run cycles, yielding after each whether it changed anything: `cycles` of them (default 1), or
        with `until_idle` until nothing changes and no timed event is due, skipping the idle time to the
        next timed event. No cycle starts at or after `until`, and the clock never jumps past it. When a
        cycle is yielded the clock already stands where the next one would start."""
        if not until_idle:
            for _ in range(cycles or 1):
                yield self.step()
            return
        while self.now < until - 1e-9:
            changed = self.step()
            upcoming = None if changed else self.next_timed_event()
            if upcoming is not None and upcoming > self.now:
                period = self.config.schedule_period
                steps = max(0, int((upcoming - self.now) // period))
                target = self.now + steps * period
                if target < upcoming - 1e-9:
                    target += period
                self.now = min(target, until)  # a timed event past the bound is never reached
            yield changed
            if not changed and upcoming is None:
                return

    def fork(self) -> Simulation:
        """A copy that runs on by itself with no new arrivals (what `kai explain` simulates forward on)."""
        fork = copy.deepcopy(self)
        fork._pending = []
        fork.seeks_fixes = False  # what it says of its waiting groups is never shown: no dry run for their fixes
        return fork

    def clock_text(self) -> str:
        return format_timestamp(self.now)


__all__ = ["Event", "Simulation"]
