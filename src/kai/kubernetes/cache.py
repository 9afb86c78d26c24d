"""The cluster as `kai run` knows it: every object its informers deliver, kept current by events.

`ClusterCache` implements the cluster-state protocol (`kai.cluster.state.ClusterState`) that the
simulator implements too, so a cycle's snapshot is built the same way from either. Watch events
update it incrementally: each object is parsed once when it changes, never per cycle. An object
that cannot be parsed is reported (`problems`) and left out; it never stops the scheduler.

Besides what the API server says, the cache holds what the scheduler itself has decided but not
yet seen come back through a watch, as kube-scheduler's "assumed" pods:
* a pod whose binding was sent counts as running on its node until the watch shows it bound (or
  the binding fails for good and the pod is forgotten);
* a pod whose eviction was sent counts as releasing until the watch shows it terminating or gone;
* a pipelined pod keeps its nominated node until it is bound or gone.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import msgspec

from kai.api import pod as api_pod
from kai.api.errors import InputError, Source
from kai.api.fields import parse_timestamp
from kai.api.manifest import group_of
from kai.api.node import Node, parse_node
from kai.api.pod import PHASES, POD_GROUP_ANNOTATION, SUBGROUP_LABEL, Pod, parse_pod
from kai.api.podgroup import PodGroup, parse_podgroup
from kai.api.priority import PriorityClass, parse_priority_class
from kai.api.queue import Queue, parse_queue
from kai.cluster import pods as cluster_pods
from kai.cluster.effects import Condition
from kai.core.model import TaskStatus
from kai.core.snapshot_builder import PodState
from kai.scheduler.cycle import CLOCK_ANNOTATIONS

ObjectKey = tuple[str, str]  # (namespace, name)


class CachedPod(msgspec.Struct):
    pod: Pod
    raw: Mapping[str, Any]
    ours: bool
    observed: cluster_pods.ObservedPod
    gpu_groups: tuple[str, ...]


class Assumed(msgspec.Struct, frozen=True):
    """A decision sent to the API server whose result the watch has not shown yet."""

    status: TaskStatus  # RUNNING (bind sent) or RELEASING (eviction sent)
    node: str
    gpu_groups: tuple[str, ...] = ()
    since: float = 0.0


class Nomination(msgspec.Struct, frozen=True):
    node: str
    gpu_groups: tuple[str, ...]


class PlanSnapshot(msgspec.Struct, frozen=True):
    """What the effects planner reads of the cluster, taken together with the cycle's snapshot."""

    waiting: Mapping[str, Sequence[str]]
    podgroups: frozenset[str]
    conditions: Mapping[str, Condition]
    children: Mapping[str, Sequence[str]]

    def waiting_pods(self) -> Mapping[str, Sequence[str]]:
        return self.waiting

    def podgroup_exists(self, key: str) -> bool:
        return key in self.podgroups

    def podgroup_condition(self, key: str) -> Condition | None:
        return self.conditions.get(key)

    def queue_children(self) -> Mapping[str, Sequence[str]]:
        return self.children


def _key(obj: Mapping[str, Any]) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def _source(kind: str, key: ObjectKey) -> Source:
    return Source(file=f"{kind} {key[0]}/{key[1]}" if key[0] else f"{kind} {key[1]}", index=0)


# What of a pod's metadata `parse_pod` reads; everything else there (resourceVersion, managedFields,
# generation) changes without changing the parsed pod.
_POD_META_READ = (
    "name",
    "namespace",
    "uid",
    "labels",
    "ownerReferences",
    "creationTimestamp",
    "deletionTimestamp",
)
_POD_ANNOTATIONS_READ = (api_pod.GPU_FRACTION, api_pod.GPU_MEMORY, api_pod.GPU_FRACTION_NUM_DEVICES)


def _put(index: dict[Any, Any], key: Any, value: Any) -> bool:
    """Store `value` under `key`; whether it differs from what was there."""
    changed = bool(index.get(key) != value)
    index[key] = value
    return changed


def _without_clocks(podgroup: PodGroup) -> PodGroup:
    """The PodGroup without the scheduler's clock annotations (`kai.scheduler.cycle.CLOCK_ANNOTATIONS`):
    a settled cycle does not read them, so their changes alone do not move the version."""
    annotations = podgroup.meta.annotations
    if not any(k in CLOCK_ANNOTATIONS for k in annotations):
        return podgroup
    kept = {k: v for k, v in annotations.items() if k not in CLOCK_ANNOTATIONS}
    return msgspec.structs.replace(podgroup, meta=msgspec.structs.replace(podgroup.meta, annotations=kept))


def _same_for_cycle(before: PodState, after: PodState) -> bool:
    """Whether a cycle reads the two states of a pod alike. The snapshot takes a pod's status and node
    from its state, never from `spec.nodeName` or `status.phase`, and its PodGroup and GPU share from
    the state and the parsed pod, never from the annotations themselves; so a watch event that
    confirms an assumed binding (with the binding's annotations), or the kubelet's phase report,
    changes nothing for it."""
    if before is after:
        return True
    if (
        before.status != after.status
        or before.node != after.node
        or before.nominated_node != after.nominated_node
        or before.gpu_groups != after.gpu_groups
        or before.start_time != after.start_time
        or before.podgroup != after.podgroup
    ):
        return False
    old, new = before.pod, after.pod
    if old is new:
        return True
    meta = msgspec.structs.replace(new.meta, annotations=old.meta.annotations)
    return msgspec.structs.replace(new, meta=meta, node_name=old.node_name, phase=old.phase) == old


def _reparsed(pod: Pod, old: Mapping[str, Any], new: Mapping[str, Any]) -> Pod | None:
    """The parsed pod for `new` without parsing it again, when it differs from `old` (which parsed to
    `pod`) only where `parse_pod` does not look, in `status.phase`, or in a first `spec.nodeName` (a
    binding); else None.

    Most pod events are bindings and the kubelet's status reports: this keeps them cheap."""
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    if any(old_meta.get(k) != new_meta.get(k) for k in _POD_META_READ):
        return None
    meta = pod.meta
    annotations = new_meta.get("annotations") or {}
    if annotations != (old_meta.get("annotations") or {}):
        # a binding's own annotations (received-resource-type): parse_pod reads only the GPU-sharing
        # ones beyond the map itself
        old_annotations = old_meta.get("annotations") or {}
        if not isinstance(annotations, Mapping) or any(
            annotations.get(k) != old_annotations.get(k) for k in _POD_ANNOTATIONS_READ
        ):
            return None
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in annotations.items()):
            return None  # parsing says what is wrong with it
        meta = msgspec.structs.replace(meta, annotations=dict(annotations))
    node_name, phase = pod.node_name, pod.phase
    new_phase = (new.get("status") or {}).get("phase")
    if (old.get("status") or {}).get("phase") != new_phase:
        if new_phase not in PHASES:
            return None  # parsing says what is wrong with it
        phase = str(new_phase)
    old_spec, new_spec = old.get("spec"), new.get("spec")
    if old_spec != new_spec:
        if not isinstance(old_spec, Mapping) or not isinstance(new_spec, Mapping):
            return None
        node = new_spec.get("nodeName")
        if not isinstance(node, str) or old_spec.get("nodeName"):
            return None  # only a first binding is taken this way
        unbound = dict(new_spec)
        del unbound["nodeName"]
        if unbound != old_spec:
            return None
        node_name = node
    if (meta, node_name, phase) == (pod.meta, pod.node_name, pod.phase):
        return pod
    return msgspec.structs.replace(pod, meta=meta, node_name=node_name, phase=phase)


def read_condition(status: Mapping[str, Any] | None) -> Condition | None:
    """A PodGroup's current scheduling condition, as kai (or KAI) wrote it in its status."""
    for item in (status or {}).get("schedulingConditions") or ():
        if not isinstance(item, Mapping):
            continue
        try:
            transition = int(str(item.get("transitionID", "0")))
        except ValueError:
            transition = 0
        try:
            when = parse_timestamp(str(item.get("lastTransitionTime")))
        except ValueError:
            when = 0.0
        reasons = tuple(
            (str(r.get("reason", "")), str(r.get("message", "")))
            for r in item.get("reasons") or ()
            if isinstance(r, Mapping)
        )
        return Condition(
            reason=str(item.get("reason", "")),
            message=str(item.get("message", "")),
            transition_id=transition,
            last_transition=when,
            reasons=reasons,
        )
    return None


class ClusterCache:
    """Objects by kind, parsed once per change; the scheduler's assumptions on top."""

    def __init__(self, *, scheduler_name: str) -> None:
        self.scheduler_name = scheduler_name
        self.nodes: dict[str, Node] = {}
        self.queues: dict[str, Queue] = {}
        self.priority_classes: dict[str, PriorityClass] = {}
        self.podgroups: dict[ObjectKey, PodGroup] = {}
        self.podgroup_raw: dict[ObjectKey, Mapping[str, Any]] = {}
        self.queue_raw: dict[str, Mapping[str, Any]] = {}
        self.pods: dict[ObjectKey, CachedPod] = {}
        self.objects: dict[tuple[str, str, str, str], Mapping[str, Any]] = {}  # (ns, group, kind, name)
        self.problems: dict[tuple[str, str, str], str] = {}  # (kind, namespace, name) -> why it is left out
        self.assumed: dict[ObjectKey, Assumed] = {}
        self.nominated: dict[ObjectKey, Nomination] = {}
        self.bind_times: dict[ObjectKey, float] = {}
        self.assumed_podgroups: dict[ObjectKey, PodGroup] = {}  # created by the pod grouper, not yet seen
        # scheduling conditions being written, not yet seen (`assume_condition`)
        self.assumed_conditions: dict[ObjectKey, Condition | None] = {}
        self.written_conditions: set[ObjectKey] = set()  # of those, the ones the API server accepted
        self.assumed_members: dict[ObjectKey, tuple[str, str | None]] = {}  # pod -> (PodGroup, subgroup)
        self.ungrouped: set[ObjectKey] = set()  # pending pods of ours naming no PodGroup (the pod grouper's work)
        # bumped when a pod of ours starts waiting for a node: what gives a cluster with nothing
        # waiting something to decide (the scheduling loop cycles early for it)
        self.arrivals = 0
        self._awaited_podgroups: set[ObjectKey] = set()  # named by pods of ours that arrived before them
        # bumped whenever what a cycle reads changes (a PodGroup's clock annotations aside, which only a
        # cycle that is not settled reads, and such a cycle runs anyway), so callers can tell whether
        # anything happened
        self.version = 0
        self._states: tuple[int, tuple[Sequence[PodState], Sequence[PodState]]] | None = None
        # Called with (object, deleted) after the cache took in each change, for adapters' own indexes.
        self.listeners: list[Callable[[Mapping[str, Any], bool], None]] = []
        self._pod_states: dict[ObjectKey, PodState] = {}  # each pod's state, kept until its inputs change
        self._pod_order: list[ObjectKey] | None = None  # the pods' keys in order, until a pod comes or goes

    # ----------------------------------------------------------------- events
    def apply(self, obj: Mapping[str, Any]) -> None:
        """An object was added or changed. The version moves on only when what a cycle reads of it
        changed: an event that only echoes the scheduler's own writes (a binding it assumed, the
        status it wrote) or the kubelet's status reports leaves it, so such events cost no cycle."""
        kind, group = str(obj.get("kind", "")), group_of(str(obj.get("apiVersion", "")))
        key = _key(obj)
        self.objects[(key[0], group, kind, key[1])] = obj
        problem_key = (kind, key[0], key[1])
        try:
            changed = self._parse(kind, group, key, obj)
        except InputError as exc:
            self.problems[problem_key] = f"{exc.field}: {exc.problem}" if exc.field else exc.problem
            self._drop(kind, group, key)
            changed = True
        else:
            changed = self.problems.pop(problem_key, None) is not None or changed
        if changed:
            self.version += 1
        for listener in self.listeners:
            listener(obj, False)

    def remove(self, obj: Mapping[str, Any]) -> None:
        """An object was deleted."""
        self.version += 1
        kind, group = str(obj.get("kind", "")), group_of(str(obj.get("apiVersion", "")))
        key = _key(obj)
        self.objects.pop((key[0], group, kind, key[1]), None)
        self.problems.pop((kind, key[0], key[1]), None)
        self._drop(kind, group, key)
        for listener in self.listeners:
            listener(obj, True)

    def _parse(self, kind: str, group: str, key: ObjectKey, obj: Mapping[str, Any]) -> bool:
        """Parse and index the object; whether anything a cycle reads changed."""
        source = _source(kind, key)
        if group == "" and kind == "Pod":
            known = self.pods.get(key)
            before = self.pod_state(key) if known is not None else None
            pod = _reparsed(known.pod, known.raw, obj) if known is not None else None
            if pod is None:
                pod = parse_pod(obj, source=source)
            observed = cluster_pods.observe(pod)
            self._forget_state(key, membership=known is None)
            self.pods[key] = CachedPod(
                pod=pod,
                raw=obj,
                ours=pod.scheduler_name == self.scheduler_name,
                observed=observed,
                gpu_groups=cluster_pods.gpu_groups(pod.meta.labels),
            )
            assumed = self.assumed.get(key)
            if assumed is not None and (
                observed.status != TaskStatus.PENDING
                if assumed.status == TaskStatus.RUNNING
                else observed.status in (TaskStatus.RELEASING, TaskStatus.SUCCEEDED, TaskStatus.FAILED)
            ):
                del self.assumed[key]  # the watch caught up with the decision
            if observed.status != TaskStatus.PENDING:
                self.nominated.pop(key, None)
            if POD_GROUP_ANNOTATION in pod.meta.annotations:
                self.assumed_members.pop(key, None)
            ours = self.pods[key].ours
            if (
                ours
                and observed.status == TaskStatus.PENDING
                and (known is None or known.observed.status != observed.status)
            ):
                self._arrived(key[0], pod.meta.annotations.get(POD_GROUP_ANNOTATION))
            if ours and observed.status == TaskStatus.PENDING and not pod.meta.annotations.get(POD_GROUP_ANNOTATION):
                self.ungrouped.add(key)
            else:
                self.ungrouped.discard(key)
            return before is None or not _same_for_cycle(before, self.pod_state(key))
        if group == "" and kind == "Node":
            node = parse_node(obj, source=source)
            return _put(self.nodes, key[1], node)
        if group == "scheduling.run.ai" and kind == "Queue":
            self.queue_raw[key[1]] = obj
            return _put(self.queues, key[1], parse_queue(obj, source=source))
        if group == "scheduling.run.ai" and kind == "PodGroup":
            old_raw = self.podgroup_raw.get(key)
            self.podgroup_raw[key] = obj
            if key in self.assumed_conditions and (
                key in self.written_conditions
                or _same_condition(read_condition(obj.get("status")), self.assumed_conditions[key])
            ):
                # the watch caught up with the write (or brought the PodGroup as it is after it)
                del self.assumed_conditions[key]
                self.written_conditions.discard(key)
            was_assumed = self.assumed_podgroups.pop(key, None) is not None
            known_group, parsed_group = self.podgroups.get(key), parse_podgroup(obj, source=source)
            self.podgroups[key] = parsed_group
            if key in self._awaited_podgroups:
                self._awaited_podgroups.discard(key)
                self.arrivals += 1  # a pod of ours that arrived before it can now be scheduled
            changed = known_group is None or _without_clocks(known_group) != _without_clocks(parsed_group)
            condition_changed = old_raw is None or read_condition(old_raw.get("status")) != read_condition(
                obj.get("status")
            )
            return changed or was_assumed or condition_changed
        if group == "scheduling.k8s.io" and kind == "PriorityClass":
            return _put(self.priority_classes, key[1], parse_priority_class(obj, source=source))
        return True  # an owner object: the pod grouper may read it

    def _drop(self, kind: str, group: str, key: ObjectKey) -> None:
        if group == "" and kind == "Pod":
            if self.pods.pop(key, None) is not None:
                self._forget_state(key, membership=True)
            self.ungrouped.discard(key)
            self.assumed.pop(key, None)
            self.nominated.pop(key, None)
            self.bind_times.pop(key, None)
            self.assumed_members.pop(key, None)
        elif group == "" and kind == "Node":
            self.nodes.pop(key[1], None)
        elif group == "scheduling.run.ai" and kind == "Queue":
            self.queues.pop(key[1], None)
            self.queue_raw.pop(key[1], None)
        elif group == "scheduling.run.ai" and kind == "PodGroup":
            self.podgroups.pop(key, None)
            self.podgroup_raw.pop(key, None)
            self.assumed_conditions.pop(key, None)
            self.written_conditions.discard(key)
        elif group == "scheduling.k8s.io" and kind == "PriorityClass":
            self.priority_classes.pop(key[1], None)

    def _arrived(self, namespace: str, podgroup: str | None) -> None:
        """A pod of ours started waiting for a node; one whose PodGroup is not here yet (the two come
        through different watches) arrives with its PodGroup."""
        if podgroup and (namespace, podgroup) not in self.podgroups:
            self._awaited_podgroups.add((namespace, podgroup))
        else:
            self.arrivals += 1

    # ----------------------------------------------------------------- the scheduler's own decisions
    def assume_bound(self, pod: ObjectKey, node: str, gpu_groups: tuple[str, ...], now: float) -> None:
        self.assumed[pod] = Assumed(status=TaskStatus.RUNNING, node=node, gpu_groups=gpu_groups, since=now)
        self.bind_times[pod] = now
        self.nominated.pop(pod, None)
        self._forget_state(pod)
        self.version += 1

    def assume_evicted(self, pod: ObjectKey, node: str, now: float) -> None:
        self.assumed[pod] = Assumed(status=TaskStatus.RELEASING, node=node, since=now)
        self._forget_state(pod)
        self.version += 1

    def forget(self, pod: ObjectKey) -> None:
        """A decision failed for good: the pod is again what the API server says it is."""
        self.assumed.pop(pod, None)
        self.bind_times.pop(pod, None)
        self._forget_state(pod)
        self.version += 1

    def assume_grouped(self, pod: ObjectKey, podgroup: PodGroup, subgroup: str | None) -> None:
        """The pod grouper decided the pod's PodGroup; schedule it in this very cycle, as the
        simulator does, without waiting for the PodGroup and the pod's annotation to come back."""
        key = (podgroup.meta.namespace, podgroup.name)
        if key not in self.podgroups:
            self.assumed_podgroups.setdefault(key, podgroup)
        self.assumed_members[pod] = (podgroup.name, subgroup)
        self._forget_state(pod)
        self.version += 1

    def nominate(self, pod: ObjectKey, node: str, gpu_groups: tuple[str, ...]) -> None:
        nomination = Nomination(node=node, gpu_groups=gpu_groups)
        if self.nominated.get(pod) == nomination:
            return  # a pipelined pod is nominated again every cycle; nothing a cycle reads changed
        self.nominated[pod] = nomination
        self._forget_state(pod)
        self.version += 1

    def _forget_state(self, pod: ObjectKey, *, membership: bool = False) -> None:
        self._pod_states.pop(pod, None)
        if membership:
            self._pod_order = None

    # ----------------------------------------------------------------- the cluster-state protocol
    def node_objects(self) -> Collection[Node]:
        return self.nodes.values()

    def queue_objects(self) -> Collection[Queue]:
        return self.queues.values()

    def priority_class_objects(self) -> Mapping[str, PriorityClass]:
        return self.priority_classes

    def podgroup_objects(self) -> Collection[PodGroup]:
        if not self.assumed_podgroups:
            return self.podgroups.values()
        return [*self.podgroups.values(), *(g for k, g in self.assumed_podgroups.items() if k not in self.podgroups)]

    def pod_state(self, key: ObjectKey) -> PodState:
        state = self._pod_states.get(key)
        if state is None:
            state = self._pod_states[key] = self._make_pod_state(key)
        return state

    def _make_pod_state(self, key: ObjectKey) -> PodState:
        cached = self.pods[key]
        status, node, groups = cached.observed.status, cached.observed.node, cached.gpu_groups
        assumed = self.assumed.get(key)
        if assumed is not None:
            status, node = assumed.status, assumed.node
            groups = assumed.gpu_groups or groups
        nominated = self.nominated.get(key) if status == TaskStatus.PENDING else None
        start = None
        if status in (TaskStatus.RUNNING, TaskStatus.RELEASING):
            start = self.bind_times.get(key, cached.pod.meta.creation_timestamp)
        pod = cached.pod
        podgroup = pod.meta.annotations.get(POD_GROUP_ANNOTATION) or None
        member = self.assumed_members.get(key) if podgroup is None else None
        if member is not None:
            podgroup, subgroup = member
            if subgroup and pod.meta.labels.get(SUBGROUP_LABEL) != subgroup:
                labels = {**pod.meta.labels, SUBGROUP_LABEL: subgroup}
                pod = msgspec.structs.replace(pod, meta=msgspec.structs.replace(pod.meta, labels=labels))
        return PodState(
            pod=pod,
            status=status,
            node=node,
            nominated_node=nominated.node if nominated is not None else None,
            gpu_groups=nominated.gpu_groups if nominated is not None else groups,
            start_time=start,
            podgroup=podgroup,
        )

    def pod_states(self) -> tuple[Sequence[PodState], Sequence[PodState]]:
        if self._states is not None and self._states[0] == self.version:
            return self._states[1]
        if self._pod_order is None:
            self._pod_order = sorted(self.pods)
        ours: list[PodState] = []
        foreign: list[PodState] = []
        for key in self._pod_order:
            state = self.pod_state(key)
            (ours if self.pods[key].ours else foreign).append(state)
        self._states = (self.version, (ours, foreign))
        return ours, foreign

    def lookup(self, namespace: str, api_version: str, kind: str, name: str) -> Mapping[str, Any] | None:
        group = group_of(api_version)
        found = self.objects.get((namespace, group, kind, name))
        if found is None and namespace:
            found = self.objects.get(("", group, kind, name))
        return found

    def list_pods(self, namespace: str, match_labels: Mapping[str, str]) -> Sequence[Mapping[str, Any]]:
        out: list[Mapping[str, Any]] = []
        for key in sorted(self.pods):
            cached = self.pods[key]
            labels = cached.pod.meta.labels
            if key[0] == namespace and all(labels.get(k) == v for k, v in match_labels.items()):
                out.append(cached.raw)
        return out

    def assume_condition(self, key: ObjectKey, condition: Condition | None) -> None:
        """A PodGroup's scheduling condition is being written: the planner reads it as set until the
        watch shows it, or any later version of the PodGroup once the write is accepted, so the next
        cycle neither decides it again nor announces its reason in a second Warning event. Not a
        change a cycle waits for."""
        self.assumed_conditions[key] = condition
        self.written_conditions.discard(key)

    def condition_written(self, key: ObjectKey, condition: Condition | None, *, ok: bool) -> None:
        """The write of `condition` ended: accepted, the next version the watch brings is the truth;
        failed for good, the planner reads the PodGroup as it is again at once."""
        if self.assumed_conditions.get(key, _NOT_ASSUMED) is not condition:
            return  # a newer condition is being written
        if ok:
            self.written_conditions.add(key)
        else:
            del self.assumed_conditions[key]

    # ----------------------------------------------------------------- what the planner reads
    def plan_snapshot(self, states: Sequence[PodState]) -> PlanSnapshot:
        waiting: dict[str, list[str]] = {}
        for state in states:
            if state.podgroup is not None and state.status == TaskStatus.PENDING and state.nominated_node is None:
                waiting.setdefault(f"{state.pod.namespace}/{state.podgroup}", []).append(state.pod.key)
        conditions: dict[str, Condition] = {}
        for key, raw in self.podgroup_raw.items():
            condition = read_condition(raw.get("status"))
            if condition is not None:
                conditions[f"{key[0]}/{key[1]}"] = condition
        for key, assumed in self.assumed_conditions.items():
            if assumed is None:
                conditions.pop(f"{key[0]}/{key[1]}", None)
            else:
                conditions[f"{key[0]}/{key[1]}"] = assumed
        children: dict[str, list[str]] = {}
        for queue in self.queues.values():
            if queue.parent is not None:
                children.setdefault(queue.parent, []).append(queue.name)
        return PlanSnapshot(
            waiting=waiting,
            podgroups=frozenset(f"{k[0]}/{k[1]}" for k in (*self.podgroups, *self.assumed_podgroups)),
            conditions=conditions,
            children=children,
        )


_NOT_ASSUMED = object()


def _same_condition(seen: Condition | None, written: Condition | None) -> bool:
    """Whether the PodGroup shows the condition written (as the planner compares conditions)."""
    if seen is None or written is None:
        return seen is written
    return (seen.reason, seen.message, seen.dominant) == (written.reason, written.message, written.dominant)
