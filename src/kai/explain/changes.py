"""Candidate changes a user could make, each applied to a copy of the snapshot.

A change knows how to rewrite the snapshot (pure: a new snapshot, the old one untouched), how a
person reads it, and how big it is (`size`: kind of change, then how much it changes, so the
smallest change is offered first). Turning a change into merge patches on the input objects is
`kai.explain.patches`' job.

Kinds of change, smallest first: fixing a workload setting that gives up nothing (its queue, a node
selector), then shrinking the workload (its gang, its pods), then changing its priority class or
preemptibility (it then competes differently with other work), then raising a queue's limit or
quota (an administrator's change), then ending another job to free what it holds.
"""

from __future__ import annotations

import msgspec

from kai.core import constraints as constraint_lib
from kai.core.model import Constraint, Job, Snapshot, Task, TaskStatus
from kai.core.resources import MB
from kai.explain import words

WORKLOAD_SETTING = 0
SHRINK = 1
PRIORITY = 2
QUEUE_ADMIN = 3
FREE_ROOM = 4
ENDING = (TaskStatus.RUNNING, TaskStatus.ALLOCATED)  # the pods of a job that end hold these


def _replace_job(snapshot: Snapshot, job: Job) -> Snapshot:
    jobs = list(snapshot.jobs)
    jobs[job.index] = job
    return msgspec.structs.replace(snapshot, jobs=tuple(jobs))


class SetQueue(msgspec.Struct, frozen=True, kw_only=True):
    job: int
    queue: str
    preference: int = 0  # 0: the queue the user most likely meant

    family = "queue"  # one suggestion per family: the smallest that works

    def describe(self, snapshot: Snapshot, label_key: str) -> str:
        return f"set the {label_key} label of {snapshot.jobs[self.job].display_name} to {self.queue}"

    @property
    def size(self) -> tuple[int, float]:
        return (WORKLOAD_SETTING, self.preference / 1000)

    def apply(self, snapshot: Snapshot) -> Snapshot:
        job = snapshot.jobs[self.job]
        index = snapshot.queue_by_name[self.queue]
        problem = job.problem if job.problem is not None and job.problem.reason != "QueueDoesNotExist" else None
        return _replace_job(snapshot, msgspec.structs.replace(job, queue=index, queue_name=self.queue, problem=problem))


class SetPriorityClass(msgspec.Struct, frozen=True, kw_only=True):
    job: int
    name: str
    value: int
    preemptible: bool  # what the job becomes
    preempts: bool
    why: str  # "to go over quota", "to be tried earlier in its queue", ...

    family = "preemptibility-or-priority"  # one suggestion per family: the smallest that works

    def describe(self, snapshot: Snapshot, label_key: str) -> str:
        kind = "preemptible" if self.preemptible else "non-preemptible"
        return f"use priority {self.name} ({kind}) {self.why}".rstrip()

    @property
    def size(self) -> tuple[int, float]:
        return (PRIORITY, 0.0)

    def apply(self, snapshot: Snapshot) -> Snapshot:
        job = snapshot.jobs[self.job]
        problem = job.problem if job.problem is not None and job.problem.reason != "PriorityClassNotFound" else None
        return _replace_job(
            snapshot,
            msgspec.structs.replace(
                job,
                priority=self.value,
                priority_class_name=self.name,
                preemptible=self.preemptible,
                can_preempt=self.preempts,
                problem=problem,
            ),
        )


class SetPreemptible(msgspec.Struct, frozen=True, kw_only=True):
    """Mark the job preemptible (the `kai.scheduler/preemptibility` label), keeping its priority."""

    job: int

    family = "preemptibility-or-priority"  # one suggestion per family: the smallest that works

    def describe(self, snapshot: Snapshot, label_key: str) -> str:
        return f"mark {snapshot.jobs[self.job].display_name} preemptible to go over quota"

    @property
    def size(self) -> tuple[int, float]:
        return (PRIORITY, 0.0)

    def apply(self, snapshot: Snapshot) -> Snapshot:
        return _replace_job(snapshot, msgspec.structs.replace(snapshot.jobs[self.job], preemptible=True))


class DropNodeSelector(msgspec.Struct, frozen=True, kw_only=True):
    """Remove one nodeSelector entry from the job's pending pods."""

    job: int
    key: str
    value: str

    family = "node-selector"  # one suggestion per family: the smallest that works

    def describe(self, snapshot: Snapshot, label_key: str) -> str:
        return f"remove the node selector {self.key}={self.value}"

    @property
    def size(self) -> tuple[int, float]:
        return (WORKLOAD_SETTING, 1.0)

    def apply(self, snapshot: Snapshot) -> Snapshot:
        constraints = list(snapshot.constraints)
        masks = list(snapshot.constraint_masks)
        index = {c: i for i, c in enumerate(constraints)}
        tasks = list(snapshot.tasks)
        nodes = snapshot.nodes
        for t in snapshot.jobs[self.job].tasks:
            task = tasks[t]
            old = constraints[task.constraint]
            if task.status != TaskStatus.PENDING or (self.key, self.value) not in old.node_selector:
                continue
            new = Constraint(
                node_selector=tuple(kv for kv in old.node_selector if kv != (self.key, self.value)),
                affinity_terms=old.affinity_terms,
                tolerations=old.tolerations,
            )
            if new not in index:
                index[new] = len(constraints)
                constraints.append(new)
                masks.append(
                    constraint_lib.constraint_mask(new, names=nodes.names, labels=nodes.labels, taints=nodes.taints)
                )
            tasks[t] = msgspec.structs.replace(task, constraint=index[new])
        return msgspec.structs.replace(
            snapshot, tasks=tuple(tasks), constraints=tuple(constraints), constraint_masks=tuple(masks)
        )


class SetMinMember(msgspec.Struct, frozen=True, kw_only=True):
    job: int
    min_member: int
    was: int

    family = "gang-size"  # one suggestion per family: the smallest that works

    def describe(self, snapshot: Snapshot, label_key: str) -> str:
        return f"reduce minMember to {self.min_member}"

    @property
    def size(self) -> tuple[int, float]:
        return (SHRINK, 1.0 - self.min_member / max(1, self.was))

    def apply(self, snapshot: Snapshot) -> Snapshot:
        job = snapshot.jobs[self.job]
        podsets = tuple(msgspec.structs.replace(ps, min_available=self.min_member) for ps in job.podsets)
        return _replace_job(snapshot, msgspec.structs.replace(job, min_member=self.min_member, podsets=podsets))


class SetPodRequest(msgspec.Struct, frozen=True, kw_only=True):
    """Every pending pod of the job asking `was` of a resource (node space) asks `amount` instead."""

    job: int
    resource: int
    was: float
    amount: float

    family = "pod-size"  # one suggestion per family: the smallest that works

    def describe(self, snapshot: Snapshot, label_key: str) -> str:
        text = words.node_amount(self.resource, self.amount, snapshot.resources.names)
        return f"reduce to {text} per pod"

    @property
    def size(self) -> tuple[int, float]:
        return (SHRINK, 1.0 - self.amount / self.was if self.was else 1.0)

    def matches(self, task: Task) -> bool:
        return task.status == TaskStatus.PENDING and abs(float(task.request[self.resource]) - self.was) < 1e-9

    def apply(self, snapshot: Snapshot) -> Snapshot:
        tasks = list(snapshot.tasks)
        for t in snapshot.jobs[self.job].tasks:
            if self.matches(tasks[t]):
                request = tasks[t].request.copy()
                request[self.resource] = self.amount
                tasks[t] = msgspec.structs.replace(tasks[t], request=request)
        return msgspec.structs.replace(snapshot, tasks=tuple(tasks))


class RaiseQueue(msgspec.Struct, frozen=True, kw_only=True):
    """Raise a queue's limit or quota of one resource (queue space: gpu, cpu millicores, memory bytes)."""

    queue: str
    resource: int  # 0 gpu, 1 cpu, 2 memory
    field: str  # "limit" or "quota"
    was: float
    amount: float  # -1: unlimited

    @property
    def family(self) -> str:
        return f"queue-{self.field}"

    def describe(self, snapshot: Snapshot, label_key: str) -> str:
        res = words.resource_name(self.resource)
        old = words.number(self.resource, self.was)
        new = "unlimited" if self.amount == -1 else words.number(self.resource, self.amount)
        return f"raise {self.queue}'s {res} {self.field} from {old} to {new}"

    @property
    def size(self) -> tuple[int, float]:
        if self.amount == -1 or self.was <= 0:
            return (QUEUE_ADMIN, 1.0)
        return (QUEUE_ADMIN, self.amount / self.was - 1.0)

    @property
    def crd_amount(self) -> float:
        """The new value in the Queue CRD's units (memory in megabytes)."""
        if self.resource == 2 and self.amount != -1:
            return self.amount / MB
        return self.amount

    def apply(self, snapshot: Snapshot) -> Snapshot:
        queues = list(snapshot.queues)
        index = snapshot.queue_by_name[self.queue]
        queue = queues[index]
        vector = (queue.limit if self.field == "limit" else queue.deserved).copy()
        vector[self.resource] = self.amount
        if self.field == "limit":
            queues[index] = msgspec.structs.replace(queue, limit=vector)
        else:
            queues[index] = msgspec.structs.replace(queue, deserved=vector)
        return msgspec.structs.replace(snapshot, queues=tuple(queues))


class EndJob(msgspec.Struct, frozen=True, kw_only=True):
    """Another job ends (its workload is deleted) and frees what it holds: `needed` of a resource (queue
    space: 0 gpu, 1 cpu, 2 memory) must be freed in `queue`, and this job, holding `holds` of it, is the
    first to free it (`why`: it is first in line to end, or to be reclaimed or preempted; `line` 0 for
    a job known to end, 1 for one in the victim order, which comes after it)."""

    job: int  # the job that ends
    queue: str
    resource: int
    needed: float
    holds: float
    why: str
    line: int

    family = "free-room"  # one suggestion per family: the smallest that works

    def describe(self, snapshot: Snapshot, label_key: str) -> str:
        r = self.resource
        name = snapshot.jobs[self.job].display_name
        return (
            f"needs {words.queue_amount(r, self.needed)} freed in {self.queue}: "
            f"job {name} ({words.queue_amount(r, self.holds)}) {self.why}"
        )

    @property
    def size(self) -> tuple[int, float]:
        return (FREE_ROOM, float(self.line))

    def apply(self, snapshot: Snapshot) -> Snapshot:
        """Its pods that hold room leave their nodes (it has no pod on a shared GPU: `ends_cleanly`)."""
        nodes = snapshot.nodes
        used = nodes.used.copy()
        tasks = list(snapshot.tasks)
        for t in snapshot.jobs[self.job].tasks:
            task = tasks[t]
            if task.status in ENDING and task.node >= 0:
                used[task.node] -= task.request
                tasks[t] = msgspec.structs.replace(task, status=TaskStatus.SUCCEEDED, node=-1)
        return msgspec.structs.replace(snapshot, tasks=tuple(tasks), nodes=msgspec.structs.replace(nodes, used=used))


def ends_cleanly(snapshot: Snapshot, job: Job) -> bool:
    """Whether `EndJob` can end the job: it holds room, and none on a shared GPU (a shared device is
    freed only with every pod on it)."""
    holding = [snapshot.tasks[t] for t in job.tasks if snapshot.tasks[t].status in ENDING]
    return bool(holding) and not any(t.is_shared_gpu for t in holding)


Change = (
    SetQueue | SetPriorityClass | SetPreemptible | DropNodeSelector | SetMinMember | SetPodRequest | RaiseQueue | EndJob
)


def combined_size(changes: tuple[Change, ...]) -> tuple[int, float]:
    return (max(c.size[0] for c in changes), sum(c.size[1] for c in changes))
