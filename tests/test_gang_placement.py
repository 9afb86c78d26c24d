"""Property: a gang placed at once (`place_tasks`: shared fits, the packed run down a sorted node order)
goes exactly where its pods placed one by one with the general path (`place_task`: a fit and a score
over every node for each pod) would go: the same node and state for each pod, or the same error.

Clusters are drawn small and busy: nodes with some GPUs taken, some being released, some short of
CPU, some cordoned or not matching the pods' node selector; gangs of one or two pod shapes.
Deterministic (derandomized, no example database).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kai.actions.common.placement import place_task, place_tasks
from kai.api.meta import ObjectMeta
from kai.api.node import Node
from kai.api.pod import Pod
from kai.api.podgroup import PodGroup
from kai.api.priority import default_priority_class
from kai.api.queue import Queue, QueueResource
from kai.core.model import Snapshot, TaskStatus
from kai.core.session import SchedulerConfig, Session
from kai.core.snapshot_builder import PodState, build_snapshot
from kai.core.statement import Statement
from kai.scheduler.cycle import open_session

NOW = 1000.0
UNLIMITED = QueueResource(quota=-1.0, limit=-1.0, over_quota_weight=1.0)

node_specs = st.tuples(
    st.integers(0, 8),  # GPUs held by running pods
    st.integers(0, 2),  # of which being released
    st.sampled_from([16.0, 64.0, 128.0]),  # CPU cores
    st.booleans(),  # labelled `pool: a`
    st.integers(0, 9),  # 0: cordoned
)
shapes = st.tuples(st.sampled_from([1.0, 2.0, 4.0, 8.0]), st.sampled_from([1.0, 8.0, 30.0]))  # (GPUs, cores)
clusters = st.lists(node_specs, min_size=1, max_size=12)


# the drawn examples' settings (deterministic: derandomized, no database)
DRAWN = settings(
    max_examples=100, derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def _pod(name: str, *, gpus: float, cpu: float, node: str = "", selector: bool = False) -> Pod:
    return Pod(
        meta=ObjectMeta(name=name, namespace="ns", creation_timestamp=NOW - 100.0),
        scheduler_name="kai-scheduler",
        node_name=node,
        phase="Running" if node else "Pending",
        requests={"cpu": cpu * 1000.0, "memory": float(2**30), "nvidia.com/gpu": gpus},
        node_selector={"pool": "a"} if selector else {},
    )


def _group(name: str, size: int) -> PodGroup:
    return PodGroup(
        meta=ObjectMeta(name=name, namespace="ns", uid=name, creation_timestamp=NOW - 100.0),
        min_member=size,
        queue="q",
        priority_class_name="train",
        preemptibility=None,
        sub_groups=(),
    )


def _snapshot(
    nodes: list[tuple[int, int, float, bool, int]], gang: list[tuple[float, float]], selector: bool
) -> Snapshot:
    node_objects, pods = [], []
    for i, (held, releasing, cores, labelled, ready) in enumerate(nodes):
        name = f"n{i:02d}"
        node_objects.append(
            Node(
                meta=ObjectMeta(name=name, labels={"pool": "a"} if labelled else {}),
                allocatable={"cpu": cores * 1000.0, "memory": float(2**40), "nvidia.com/gpu": 8.0, "pods": 110.0},
                taints=(),
                unschedulable=ready == 0,
                ready=True,
            )
        )
        for k in range(held):
            status = TaskStatus.RELEASING if k < releasing else TaskStatus.RUNNING
            pod = _pod(f"run-{name}-{k}", gpus=1.0, cpu=1.0, node=name)
            pods.append(PodState(pod=pod, status=status, node=name, podgroup=f"run-{name}-{k}"))
    groups = [_group(p.podgroup or "", 1) for p in pods]
    groups.append(_group("gang", len(gang)))
    for k, (gpus, cpu) in enumerate(gang):
        pod = _pod(f"gang-{k:02d}", gpus=gpus, cpu=cpu, selector=selector)
        pods.append(PodState(pod=pod, status=TaskStatus.PENDING, podgroup="gang"))
    return one_queue_snapshot(node_objects, pods, groups)


def one_queue_snapshot(nodes: list[Node], pods: list[PodState], groups: list[PodGroup]) -> Snapshot:
    """These nodes, pods and PodGroups with one queue `q` of unlimited quota, at `NOW`."""
    queue = Queue(
        meta=ObjectMeta(name="q", creation_timestamp=0.0),
        display_name="",
        parent=None,
        priority=100,
        resources={"gpu": UNLIMITED, "cpu": UNLIMITED, "memory": UNLIMITED},
        preempt_min_runtime=None,
        reclaim_min_runtime=None,
    )
    return build_snapshot(
        now=NOW,
        nodes=nodes,
        pods=pods,
        foreign_pods=[],
        podgroups=groups,
        queues=[queue],
        priority_classes={"train": default_priority_class("train", 50)},
    ).snapshot


def _gang(session: Session) -> tuple[int, list[int]]:
    job = next(j for j in session.snapshot.jobs if j.name == "gang")
    return job.index, [t.index for t in session.tasks_to_allocate(job)]


def _at_once(snapshot: Snapshot, config: SchedulerConfig) -> tuple[str | None, list[tuple[int, int]]]:
    session = open_session(snapshot, config)
    job, tasks = _gang(session)
    error = place_tasks(
        session, Statement(session, action="allocate"), snapshot.jobs[job], [session.task(t) for t in tasks]
    )
    return error, [(int(session.node[t]), int(session.status[t])) for t in tasks]


def _pod_by_pod(snapshot: Snapshot, config: SchedulerConfig) -> tuple[str | None, list[tuple[int, int]]]:
    session = open_session(snapshot, config)
    _, tasks = _gang(session)
    stmt = Statement(session, action="allocate")
    start = stmt.checkpoint()
    for t in tasks:
        error = place_task(session, stmt, session.task(t))
        if error is not None:
            stmt.rollback(start)
            if len(tasks) > 1:
                name = session.task(t).name
                error = f"{len(tasks)} pods of the gang must start together; pod {name} fits nowhere: {error}"
            return error, [(int(session.node[t]), int(session.status[t])) for t in tasks]
    if any(session.status[t] == TaskStatus.PIPELINED for t in tasks):
        stmt.convert_to_pipelined(set(tasks))
    return None, [(int(session.node[t]), int(session.status[t])) for t in tasks]


@DRAWN
@given(
    nodes=clusters,
    first=shapes,
    second=shapes,
    sizes=st.tuples(st.integers(1, 24), st.integers(0, 6)),
    selector=st.booleans(),
    placement=st.sampled_from(["binpack", "spread"]),
)
def test_a_gang_goes_where_its_pods_one_by_one_would(
    nodes: list[tuple[int, int, float, bool, int]],
    first: tuple[float, float],
    second: tuple[float, float],
    sizes: tuple[int, int],
    selector: bool,
    placement: str,
) -> None:
    gang = [first] * sizes[0] + [second] * sizes[1]
    snapshot = _snapshot(nodes, gang, selector)
    config = SchedulerConfig(gpu_placement=placement)
    assert _at_once(snapshot, config) == _pod_by_pod(snapshot, config)


def _one_by_one(session: Session, stmt: Statement, tasks: list[int]) -> str | None:
    """`place_tasks`'s outcome the general way: `place_task` per pod, the gang pipelined whole."""
    start = stmt.checkpoint()
    for t in tasks:
        error = place_task(session, stmt, session.task(t))
        if error is not None:
            stmt.rollback(start)
            if len(tasks) > 1:
                name = session.task(t).name
                return f"{len(tasks)} pods of the gang must start together; pod {name} fits nowhere: {error}"
            return error
    if any(session.status[t] == TaskStatus.PIPELINED for t in tasks):
        stmt.convert_to_pipelined(set(tasks))
    return None


def _in_two_parts(
    snapshot: Snapshot, config: SchedulerConfig, split: int, *, at_once: bool
) -> tuple[list[str | None], list[tuple[int, int]]]:
    """The gang's pods placed in two attempts in one session, the first committed before the second."""
    session = open_session(snapshot, config)
    job, tasks = _gang(session)
    errors: list[str | None] = []
    for part in (tasks[:split], tasks[split:]):
        stmt = Statement(session, action="allocate")
        if at_once:
            error = place_tasks(session, stmt, snapshot.jobs[job], [session.task(t) for t in part])
        else:
            error = _one_by_one(session, stmt, part)
        stmt.commit()
        errors.append(error)
    return errors, [(int(session.node[t]), int(session.status[t])) for t in tasks]


@settings(max_examples=60, derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=clusters,
    first=shapes,
    second=shapes,
    sizes=st.tuples(st.integers(2, 24), st.integers(0, 6)),
    split=st.integers(1, 29),
    placement=st.sampled_from(["binpack", "spread"]),
)
def test_a_later_attempt_on_nodes_an_earlier_one_changed_goes_where_pods_one_by_one_would(
    nodes: list[tuple[int, int, float, bool, int]],
    first: tuple[float, float],
    second: tuple[float, float],
    sizes: tuple[int, int],
    split: int,
    placement: str,
) -> None:
    """The second attempt starts from the fits the first left in the session (`Session.shape_fits`):
    the nodes the first one filled must be judged again."""
    gang = [first] * sizes[0] + [second] * sizes[1]
    snapshot = _snapshot(nodes, gang, False)
    config = SchedulerConfig(gpu_placement=placement)
    split = min(split, len(gang) - 1)
    assert _in_two_parts(snapshot, config, split, at_once=True) == _in_two_parts(snapshot, config, split, at_once=False)
