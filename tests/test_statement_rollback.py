"""Property: rolling a statement back to a checkpoint restores every piece of session state its
operations changed, bit for bit (node idle and releasing resources, task status, node and devices,
alive pods per podset, queue allocations, shared devices and their rooms), through evictions,
placements (on idle or pipelined onto releasing resources) and pods sharing GPUs. The victim search
undoes thousands of simulated evictions per cycle: a drift would change later decisions. The shared
portions drawn are exact binary fractions (a device's portion in use is a float sum: with other
fractions, adding and then subtracting one may leave the last bit changed, whatever the undo does).
Deterministic (seeded generators).
"""

from __future__ import annotations

import random
from collections.abc import Collection

from benchmarks.clusters import reclaim_cluster

from kai.actions.common.placement import place_task
from kai.api.meta import ObjectMeta
from kai.api.node import Node
from kai.api.pod import GpuShare, Pod
from kai.api.podgroup import PodGroup
from kai.core.model import Snapshot, TaskStatus
from kai.core.session import SchedulerConfig, Session
from kai.core.snapshot_builder import PodState
from kai.core.statement import Statement
from kai.scheduler.cycle import open_session
from tests.test_gang_placement import NOW, one_queue_snapshot

State = tuple[object, ...]
RUNNING, ALLOCATED = int(TaskStatus.RUNNING), int(TaskStatus.ALLOCATED)


def _state(session: Session) -> State:
    """Everything a statement operation changes and its undo must restore (the version counters only
    ever grow, by design, and are left out)."""
    devices = {  # a node whose last shared device went away may keep an empty map: the same as none
        node: {g: (d.used, d.releasing, frozenset(d.tasks)) for g, d in devs.items()}
        for node, devs in session.devices.items()
        if devs
    }
    return (
        session.idle.tobytes(),
        session.releasing.tobytes(),
        session.status.tobytes(),
        session.node.tobytes(),
        tuple(session.gpu_groups),
        tuple(alive.tobytes() for alive in session.podset_alive),
        session.queue_allocated.tobytes(),
        session.queue_allocated_np.tobytes(),
        devices,
        session.shared_room_now.tobytes(),
        session.shared_room_later.tobytes(),
        session.shared_room_total.tobytes(),
    )


def evict_or_place(
    session: Session, stmt: Statement, rng: random.Random, *, evict: bool, placed: Collection[int]
) -> None:
    """Evict a task chosen at random among those whose status is in `placed`, or place a pending one chosen
    at random (where it fits, if it does), when there is one."""
    status = session.status
    if evict:
        victims = [t for t in session.snapshot.tasks if status[t.index] in placed]
        if victims:
            stmt.evict(rng.choice(victims), preemptor=None, message="")
        return
    pending = [t for t in session.snapshot.tasks if status[t.index] == TaskStatus.PENDING]
    if pending:
        place_task(session, stmt, rng.choice(pending), why=False)


def _shuffle_operations(session: Session, seed: int, steps: int) -> int:
    """Evict running or allocated pods, place pending ones (the placement's own node and devices) and roll back to
    random checkpoints, checking each rollback against the state recorded at its checkpoint; returns
    how many rollbacks were checked."""
    rng = random.Random(seed)
    stmt = Statement(session, action="reclaim")
    states = [_state(session)]  # the state at each checkpoint
    checked = 0
    for _ in range(steps):
        move = rng.random()
        if move < 0.8:
            evict_or_place(session, stmt, rng, evict=move < 0.4, placed=(RUNNING, ALLOCATED))
        else:
            checkpoint = rng.randrange(stmt.checkpoint() + 1)
            stmt.rollback(checkpoint)
            del states[checkpoint + 1 :]
            assert _state(session) == states[checkpoint]
            checked += 1
        del states[stmt.checkpoint() + 1 :]
        states += [_state(session)] * (stmt.checkpoint() + 1 - len(states))
    stmt.discard()
    assert _state(session) == states[0]
    return checked


def _shared_gpu_snapshot() -> Snapshot:
    """Four nodes of four GPUs, two of them busy, with pods sharing GPUs (by fraction, on one or two devices) running,
    being released and pending, beside whole-GPU pods."""
    nodes = [
        Node(
            meta=ObjectMeta(name=f"n{i}"),
            allocatable={"cpu": 64000.0, "memory": float(2**40), "nvidia.com/gpu": 4.0, "pods": 110.0},
            taints=(),
            unschedulable=False,
            ready=True,
        )
        for i in range(4)
    ]
    pods: list[PodState] = []
    rng = random.Random(5)
    for k in range(40):
        node = f"n{k % 2}" if k < 8 else ""  # n2 and n3 start empty: placements open new devices there
        whole = k % 5 == 0
        share = None if whole else GpuShare(fraction=rng.choice([0.25, 0.5]), memory_mib=None, num_devices=1 + k % 2)
        pod = Pod(
            meta=ObjectMeta(name=f"p{k:02d}", namespace="ns", creation_timestamp=NOW - 100.0 + k),
            scheduler_name="kai-scheduler",
            node_name=node,
            phase="Running" if node else "Pending",
            requests={"cpu": 1000.0, "memory": float(2**30), "nvidia.com/gpu": 1.0 if whole else 0.0},
            gpu_share=share,
        )
        status = TaskStatus.PENDING if not node else TaskStatus.RELEASING if k % 7 == 3 else TaskStatus.RUNNING
        pods.append(PodState(pod=pod, status=status, node=node, podgroup=f"g{k:02d}"))
    groups = [
        PodGroup(
            meta=ObjectMeta(name=p.podgroup or "", namespace="ns", uid=p.podgroup or "", creation_timestamp=NOW),
            min_member=1,
            queue="q",
            priority_class_name="train",
            preemptibility=None,
            sub_groups=(),
        )
        for p in pods
    ]
    return one_queue_snapshot(nodes, pods, groups)


def test_rollback_restores_every_array_exactly() -> None:
    session = open_session(reclaim_cluster(nodes=40, seed=3).built().snapshot, SchedulerConfig())
    assert _shuffle_operations(session, seed=11, steps=600) > 50


def test_rollback_restores_shared_gpus_exactly() -> None:
    session = open_session(_shared_gpu_snapshot(), SchedulerConfig())
    assert any(t.is_shared_gpu for t in session.snapshot.tasks)
    assert session.devices, "pods share devices at the start"
    assert _shuffle_operations(session, seed=13, steps=400) > 30
