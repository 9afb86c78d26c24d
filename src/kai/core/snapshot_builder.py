"""Builds a `Snapshot` from API objects and the pods' current states.

Pure: the adapter (simulator or Kubernetes) supplies the objects and `now`. Problems with
individual objects (a PodGroup naming a missing queue, a queue whose parent is missing) become
data on the affected job or queue, never an exception that would stop the cycle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec
import numpy as np

from kai.api import node as api_node
from kai.api import pod as api_pod
from kai.api import podgroup as api_podgroup
from kai.api import priority as api_priority
from kai.api import queue as api_queue
from kai.api.fields import parse_timestamp
from kai.core import constraints as constraint_lib
from kai.core.gpu_devices import task_portion
from kai.core.model import (
    Constraint,
    Job,
    JobProblem,
    Nodes,
    PodSet,
    Queue,
    SharedGpu,
    Snapshot,
    SubGroupSet,
    Task,
    TaskStatus,
)
from kai.core.resources import GPU, MB, QUEUE_RESOURCES, ResourceIndex, Vector

QUEUE_DOES_NOT_EXIST = "QueueDoesNotExist"


class PodState(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A pod and what the cluster currently knows of it (a msgspec Struct: adapters build one per pod
    every cycle, and a Struct is built several times faster than a frozen dataclass). Not tracked by the
    garbage collector (`gc=False`): nothing it holds leads back to it."""

    pod: api_pod.Pod
    status: TaskStatus
    node: str | None = None
    nominated_node: str | None = None
    gpu_groups: tuple[str, ...] = ()
    start_time: float | None = None
    podgroup: str | None = None  # PodGroup name in the pod's namespace


class QueueProblem(msgspec.Struct, frozen=True, kw_only=True):
    queue: str
    message: str


class BuiltSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    snapshot: Snapshot
    queue_problems: tuple[QueueProblem, ...]


_NO_CONSTRAINT = Constraint()


class _PodRequests:
    """Pods' request vectors (a pod counts one against the node's `pods`), one read-only vector shared by
    all pods asking the same: the pods of a workload ask alike.

    The pods of a workload often share one requests mapping too (the loader parses a gang's spec
    once): a mapping already seen is known by its identity, without reading it. Every mapping looked up
    belongs to a pod that lives as long as the snapshot is built, so no identity is reused meanwhile."""

    def __init__(self, index: ResourceIndex) -> None:
        self.index = index
        self.pods = index.position("pods") or 3
        self.known: dict[tuple[tuple[str, float], ...], Vector] = {}
        self.by_identity: dict[int, Vector] = {}

    def vector(self, requests: Mapping[str, float]) -> Vector:
        vector = self.by_identity.get(id(requests))
        if vector is not None:
            return vector
        key = tuple(requests.items())
        vector = self.known.get(key)
        if vector is None:
            vector = self.index.vector(requests)
            vector[self.pods] = 1.0
            vector.flags.writeable = False
            self.known[key] = vector
        self.by_identity[id(requests)] = vector
        return vector


def _queue_problems(queues: Sequence[api_queue.Queue]) -> dict[str, str]:
    """Queues that cannot be used: a missing parent, or a parent chain that loops."""
    by_name = {q.name: q for q in queues}
    problems: dict[str, str] = {}
    for q in queues:
        seen = [q.name]
        cursor = q.parent
        while cursor is not None:
            if cursor not in by_name:
                problems[q.name] = f'parent queue "{cursor}" of queue "{seen[-1]}" does not exist'
                break
            if cursor in seen:
                problems[q.name] = "parentQueue forms a cycle: " + " -> ".join([*seen, cursor])
                break
            seen.append(cursor)
            cursor = by_name[cursor].parent
    return problems


def _build_queues(queues: Sequence[api_queue.Queue]) -> tuple[tuple[Queue, ...], dict[str, str]]:
    problems = _queue_problems(queues)
    usable = [q for q in queues if q.name not in problems]
    ordered = sorted(
        enumerate(usable),
        key=lambda iq: (iq[1].meta.creation_timestamp or 0.0, iq[0], iq[1].name),
    )
    age = {q.name: rank for rank, (_, q) in enumerate(ordered)}
    usable.sort(key=lambda q: q.name)
    index = {q.name: i for i, q in enumerate(usable)}
    children: dict[str, list[int]] = {q.name: [] for q in usable}
    for q in usable:
        if q.parent is not None:
            children[q.parent].append(index[q.name])
    out: list[Queue] = []
    for q in usable:
        deserved = np.array([q.resources[k].quota for k in api_queue.QUEUE_RESOURCE_KEYS])
        limit = np.array([q.resources[k].limit for k in api_queue.QUEUE_RESOURCE_KEYS])
        weight = np.array([q.resources[k].over_quota_weight for k in api_queue.QUEUE_RESOURCE_KEYS])
        # memory: the CRD counts megabytes, the core bytes. As KAI's proportion plugin, any negative
        # memory quota or limit becomes -1 (unlimited): max(-1, value * 10^6).
        for vec in (deserved, limit):
            vec[2] = max(api_queue.UNLIMITED, vec[2] * MB)
        out.append(
            Queue(
                index=index[q.name],
                name=q.name,
                parent=index[q.parent] if q.parent is not None else -1,
                children=tuple(children[q.name]),
                priority=q.priority,
                age_rank=age[q.name],
                deserved=deserved,
                limit=limit,
                weight=weight,
                preempt_min_runtime=0.0,
                reclaim_min_runtime=0.0,
            )
        )
    # min runtimes are inherited down the tree where a queue sets none
    by_name = {q.name: q for q in queues}
    resolved: list[Queue] = []
    for cq in out:
        preempt, reclaim = by_name[cq.name].preempt_min_runtime, by_name[cq.name].reclaim_min_runtime
        cursor = by_name[cq.name].parent
        while cursor is not None and (preempt is None or reclaim is None):
            parent = by_name[cursor]
            preempt = preempt if preempt is not None else parent.preempt_min_runtime
            reclaim = reclaim if reclaim is not None else parent.reclaim_min_runtime
            cursor = parent.parent
        resolved.append(
            msgspec.structs.replace(cq, preempt_min_runtime=preempt or 0.0, reclaim_min_runtime=reclaim or 0.0)
        )
    return tuple(resolved), problems


def _annotation_time(annotations: Mapping[str, str], key: str) -> float | None:
    text = annotations.get(key)
    if not text:
        return None
    try:
        return parse_timestamp(text)
    except ValueError:
        return None


def _missing_queue_message(name: str, queues: Sequence[Queue], problems: Mapping[str, str], label_key: str) -> str:
    leaves = sorted(q.name for q in queues if q.is_leaf)
    if name in problems:
        return f'queue "{name}" cannot be used: {problems[name]}'
    for q in queues:
        if q.name == name:
            kids = ", ".join(sorted(queues[c].name for c in q.children))
            return (
                f'queue "{name}" is not a leaf queue (it has child queues {kids}); only leaf queues take '
                f"jobs: set the {label_key} label to one of: {kids}"
            )
    if not name:
        return f"the PodGroup names no queue; set the {label_key} label to one of: " + ", ".join(leaves)
    return f'queue "{name}" does not exist; create it or set the {label_key} label to one of: ' + ", ".join(leaves)


def _subgroup_sets(pg: api_podgroup.PodGroup, podset_names: list[str]) -> tuple[SubGroupSet, ...]:
    """The PodGroup's subgroup tree: the PodGroup itself (index 0), then each subgroup with children.

    A level without `minSubGroup` needs all its direct members, as in KAI.
    """
    parents = [None, *(s.name for s in pg.sub_groups if s.name not in podset_names)]
    set_index = {name: i for i, name in enumerate(parents)}
    minimum = {s.name: s.min_sub_group for s in pg.sub_groups}
    sets = []
    for name in parents:
        members = tuple(
            (s.name in set_index, set_index[s.name] if s.name in set_index else podset_names.index(s.name))
            for s in pg.sub_groups
            if s.parent == name
        )
        wanted = pg.min_sub_group if name is None else minimum[name]
        sets.append(
            SubGroupSet(name=name or "", min_sub_group=len(members) if wanted is None else wanted, members=members)
        )
    return tuple(sets)


def build_snapshot(
    *,
    now: float,
    nodes: Sequence[api_node.Node],
    pods: Sequence[PodState],
    foreign_pods: Sequence[PodState],
    podgroups: Sequence[api_podgroup.PodGroup],
    queues: Sequence[api_queue.Queue],
    priority_classes: Mapping[str, api_priority.PriorityClass],
    queue_label_key: str = "kai.scheduler/queue",
) -> BuiltSnapshot:
    """Assemble the cycle's snapshot. `pods` are ours (scheduled by kai); `foreign_pods` only use nodes."""
    extended = {name for n in nodes for name in n.allocatable}
    asked = {id(p.pod.requests): p.pod.requests for p in pods}  # the pods of a workload share theirs
    extended |= {name for requests in asked.values() for name in requests}
    index = ResourceIndex(extended)
    requests = _PodRequests(index)
    node_list = sorted(nodes, key=lambda n: n.name)
    node_pos = {n.name: i for i, n in enumerate(node_list)}
    n_nodes, n_res = len(node_list), index.size
    allocatable = np.zeros((n_nodes, n_res))
    node_vectors: dict[int, Vector] = {}  # nodes of one type share their allocatable mapping (the loader's)
    for i, n in enumerate(node_list):
        vector = node_vectors.get(id(n.allocatable))
        if vector is None:
            vector = node_vectors[id(n.allocatable)] = index.vector(n.allocatable)
        allocatable[i] = vector
    used = np.zeros((n_nodes, n_res))
    releasing = np.zeros((n_nodes, n_res))
    schedulable = np.array([n.ready and not n.unschedulable for n in node_list], dtype=np.bool_)
    gpu_memory = np.array([n.gpu_memory_mib for n in node_list], dtype=np.int64)
    labels = tuple(n.meta.labels for n in node_list)
    taints = tuple(n.taints for n in node_list)

    foreign_usage = np.zeros(n_res)
    for fp in foreign_pods:
        if fp.node in node_pos and fp.status in (TaskStatus.RUNNING, TaskStatus.RELEASING):
            vec = requests.vector(fp.pod.requests)
            used[node_pos[fp.node]] += vec
            if schedulable[node_pos[fp.node]]:
                foreign_usage += vec

    queue_list, queue_problems = _build_queues(queues)
    queue_pos = {q.name: q.index for q in queue_list}

    # tasks grouped by their PodGroup
    groups = {(pg.meta.namespace, pg.name): pg for pg in podgroups}
    members: dict[tuple[str, str], list[PodState]] = {key: [] for key in groups}
    for ps in pods:
        if ps.podgroup is not None:
            group_members = members.get((ps.pod.meta.namespace, ps.podgroup))
            if group_members is not None:
                group_members.append(ps)

    constraint_ids: dict[Constraint, int] = {}
    no_constraint: int | None = None  # the index of the empty constraint, once a pod has it
    tasks: list[Task] = []
    jobs: list[Job] = []
    shared: dict[tuple[int, str], list[tuple[int, float, bool]]] = {}
    for job_index, key in enumerate(sorted(groups)):
        pg = groups[key]
        states = sorted(members[key], key=lambda s: (s.pod.meta.creation_timestamp or 0.0, s.pod.meta.name))
        problem: JobProblem | None = None
        qi = queue_pos.get(pg.queue, -1)
        if qi < 0 or not queue_list[qi].is_leaf:
            qi = -1
            problem = JobProblem(
                reason=QUEUE_DOES_NOT_EXIST,
                message=_missing_queue_message(pg.queue, queue_list, queue_problems, queue_label_key),
            )
        pc_name = pg.priority_class_name or api_priority.DEFAULT_PRIORITY_CLASS
        pc = priority_classes.get(pc_name)
        if pc is None:
            priority, can_preempt = api_priority.DEFAULT_PRIORITY_CLASSES["train"], True
            if problem is None:
                problem = JobProblem(
                    reason="PriorityClassNotFound",
                    message=f'priority class "{pc_name}" does not exist; use one of: '
                    + ", ".join(sorted(priority_classes)),
                )
        else:
            priority, can_preempt = pc.value, pc.preemption_policy != "Never"
        if pg.preemptibility is not None:
            preemptible = pg.preemptibility == api_podgroup.PREEMPTIBLE
        else:
            preemptible = priority < api_priority.PREEMPTIBLE_BELOW
        # podsets: the leaf subgroups, or one default podset for the whole gang
        parents = {s.parent for s in pg.sub_groups if s.parent is not None}
        leaves = [s for s in pg.sub_groups if s.name not in parents]
        podset_names = [s.name for s in leaves] or ["default"]
        podset_mins = [s.min_member for s in leaves] or [pg.min_member]
        subgroup_sets = _subgroup_sets(pg, podset_names) if pg.has_subgroup_tree else ()
        podset_tasks: list[list[int]] = [[] for _ in podset_names]
        job_tasks: list[int] = []
        for ps in states:
            pod = ps.pod
            meta = pod.meta
            pod_labels = meta.labels
            sub = pod_labels.get(api_pod.SUBGROUP_LABEL, "")
            podset = podset_names.index(sub) if sub in podset_names else 0
            if pod.node_selector or pod.affinity_terms or pod.tolerations:
                constraint = Constraint(
                    node_selector=tuple(sorted(pod.node_selector.items())),
                    affinity_terms=pod.affinity_terms,
                    tolerations=pod.tolerations,
                )
                cid = constraint_ids.setdefault(constraint, len(constraint_ids))
            elif no_constraint is not None:
                cid = no_constraint
            else:
                cid = no_constraint = constraint_ids.setdefault(_NO_CONSTRAINT, len(constraint_ids))
            request = requests.vector(pod.requests)
            share = pod.gpu_share
            portion, devices, memory = (
                (0.0, 0, 0) if share is None else (share.fraction or 0.0, share.num_devices, share.memory_mib or 0)
            )
            node_i = node_pos.get(ps.node, -1) if ps.node else -1
            priority_text = pod_labels.get(api_pod.TASK_PRIORITY_LABEL)
            try:
                task_priority = int(priority_text) if priority_text is not None else 0
            except ValueError:
                task_priority = 0
            task = Task(  # the fields in order (see `Task`)
                len(tasks),  # index
                meta.namespace,  # namespace
                meta.name,  # name
                job_index,  # job
                podset,  # podset
                request,  # request
                portion,  # gpu_portion
                devices,  # gpu_devices
                memory,  # gpu_memory_mib
                ps.status,  # status
                node_i,  # node
                node_pos.get(ps.nominated_node, -1) if ps.nominated_node else -1,  # nominated_node
                ps.gpu_groups,  # gpu_groups
                task_priority,  # task_priority
                meta.creation_timestamp or 0.0,  # creation
                ps.start_time,  # start_time
                cid,  # constraint
                pod.termination_grace_seconds,  # grace_seconds
            )
            tasks.append(task)
            job_tasks.append(task.index)
            podset_tasks[podset].append(task.index)
            if node_i >= 0 and ps.status in (TaskStatus.RUNNING, TaskStatus.ALLOCATED, TaskStatus.RELEASING):
                target = releasing if ps.status == TaskStatus.RELEASING else used
                target[node_i] += request
                if task.is_shared_gpu:
                    portion = task_portion(task, int(gpu_memory[node_i]))
                    groups_of = ps.gpu_groups or (f"{pod.namespace}-{pod.name}",)
                    for g in groups_of[: max(1, task.gpu_devices)]:
                        shared.setdefault((node_i, g), []).append(
                            (task.index, portion, ps.status == TaskStatus.RELEASING)
                        )
        jobs.append(
            Job(
                index=job_index,
                namespace=pg.meta.namespace,
                name=pg.name,
                uid=pg.meta.uid or f"{pg.meta.namespace}/{pg.name}",
                queue=qi,
                queue_name=pg.queue,
                priority=priority,
                priority_class_name=pc_name,
                preemptible=preemptible,
                can_preempt=can_preempt,
                min_member=pg.min_member,
                podsets=tuple(
                    PodSet(name=n, min_available=m, tasks=tuple(t))
                    for n, m, t in zip(podset_names, podset_mins, podset_tasks, strict=True)
                ),
                tasks=tuple(job_tasks),
                creation=pg.meta.creation_timestamp or 0.0,
                last_start=_annotation_time(pg.meta.annotations, api_podgroup.LAST_START_ANNOTATION),
                stale_since=_annotation_time(pg.meta.annotations, api_podgroup.STALE_TIMESTAMP_ANNOTATION),
                problem=problem,
                preemption_delay=pg.preemption_delay or 0.0,
                last_eviction=_annotation_time(pg.meta.annotations, api_podgroup.LAST_EVICTION_ANNOTATION),
                staleness_grace_period=pg.staleness_grace_period,
                safe_to_consolidate=pg.safe_to_consolidate,
                subgroup_sets=subgroup_sets,
                workload=api_podgroup.workload_of(pg),
            )
        )

    shared_gpus = []
    for (node_i, group), holders in sorted(shared.items()):
        portion_used = sum(p for _, p, _ in holders)
        portion_rel = sum(p for _, p, rel in holders if rel)
        # a shared device occupies one whole GPU of the node
        if all(rel for _, _, rel in holders):
            releasing[node_i, GPU] += 1.0
        else:
            used[node_i, GPU] += 1.0
        shared_gpus.append(
            SharedGpu(
                group=group,
                node=node_i,
                portion_used=portion_used,
                portion_releasing=portion_rel,
                tasks=tuple(t for t, _, _ in holders),
            )
        )

    constraints = tuple(sorted(constraint_ids, key=lambda c: constraint_ids[c]))
    names = tuple(n.name for n in node_list)
    masks = tuple(constraint_lib.constraint_mask(c, names=names, labels=labels, taints=taints) for c in constraints)
    cluster = allocatable[schedulable].sum(axis=0) - foreign_usage if n_nodes else np.zeros(n_res)
    total = np.maximum(cluster[list(QUEUE_RESOURCES)], 0.0)
    snapshot = Snapshot(
        now=now,
        resources=index,
        nodes=Nodes(
            names=names,
            allocatable=allocatable,
            used=used,
            releasing=releasing,
            schedulable=schedulable,
            labels=labels,
            taints=taints,
            gpu_memory_mib=gpu_memory,
        ),
        tasks=tuple(tasks),
        jobs=tuple(jobs),
        queues=queue_list,
        constraints=constraints,
        constraint_masks=masks,
        shared_gpus=tuple(shared_gpus),
        total=total,
        queue_by_name=queue_pos,
    )
    problems = tuple(QueueProblem(queue=name, message=msg) for name, msg in sorted(queue_problems.items()))
    return BuiltSnapshot(snapshot=snapshot, queue_problems=problems)
