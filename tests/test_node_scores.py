"""Property: the node scores computed on the candidate nodes only (`Session.node_scores` take the
candidates' indices) are, bit for bit, what scoring every node with the candidates as a mask gave (the
form they had before, kept here as the reference): a candidate's score depends on the node and the
candidate set alone, so placement picks the same node from the candidates' scores.

Clusters are drawn small and busy: nodes with 0, 4 or 8 GPUs, some held, some being released; pods
asking GPUs or CPU only, some with a nominated node; any candidate subset; bin-pack and spread.
Deterministic (derandomized, no example database).
"""

from __future__ import annotations

import msgspec
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kai.api.meta import ObjectMeta
from kai.api.node import Node
from kai.core.model import BoolVector, Snapshot, Task, TaskStatus
from kai.core.resources import CPU, GPU, Vector
from kai.core.scores import CPU_ONLY_NODE, MAX_PLACEMENT, NOMINATED
from kai.core.session import SchedulerConfig, Session
from kai.core.snapshot_builder import PodState
from kai.plugins.nodeorder import nominated_scores, placement_scores, resource_type_scores, shared_gpu_room
from kai.scheduler.cycle import open_session
from tests.test_gang_placement import _group, _pod, one_queue_snapshot

# (GPUs, GPUs held by running pods, of which being released, CPU cores)
node_specs = st.tuples(st.sampled_from([0, 4, 8]), st.integers(0, 8), st.integers(0, 3), st.sampled_from([8.0, 96.0]))
pod_specs = st.tuples(st.sampled_from([0.0, 1.0, 2.0]), st.sampled_from([1.0, 6.0]))  # (GPUs, CPU cores)


def _snapshot(nodes: list[tuple[int, int, int, float]], pods: list[tuple[float, float]]) -> Snapshot:
    node_objects, states = [], []
    for i, (gpus, held, releasing, cores) in enumerate(nodes):
        name = f"n{i:02d}"
        allocatable = {"cpu": cores * 1000.0, "memory": float(2**40), "nvidia.com/gpu": float(gpus), "pods": 110.0}
        node_objects.append(
            Node(meta=ObjectMeta(name=name), allocatable=allocatable, taints=(), unschedulable=False, ready=True)
        )
        for k in range(min(held, gpus)):
            status = TaskStatus.RELEASING if k < releasing else TaskStatus.RUNNING
            pod = _pod(f"run-{name}-{k}", gpus=1.0, cpu=float(k % 3), node=name)
            states.append(PodState(pod=pod, status=status, node=name, podgroup=pod.meta.name))
    for k, (asked, cpu) in enumerate(pods):
        pod = _pod(f"new-{k}", gpus=asked, cpu=cpu)
        states.append(PodState(pod=pod, status=TaskStatus.PENDING, podgroup=pod.meta.name))
    return one_queue_snapshot(node_objects, states, [_group(s.podgroup or "", 1) for s in states])


# ----------------------------------------------------------------- the reference: every node, a mask
def _scaled_masked(value: Vector, candidates: BoolVector) -> Vector:
    lo = float(value[candidates].min())
    hi = float(value[candidates].max())
    if hi == lo:
        return np.where(candidates, MAX_PLACEMENT, 0.0)
    return np.where(candidates, MAX_PLACEMENT * (1.0 - (value - lo) / (hi - lo)), 0.0)


def _placement_masked(session: Session, task: Task, candidates: BoolVector) -> Vector:
    count = session.snapshot.nodes.count
    if not candidates.any() or session.config.gpu_placement not in ("binpack", "spread"):
        return np.zeros(count)
    uses_gpu = task.request[GPU] > 0 or task.is_shared_gpu
    strategy = session.config.gpu_placement if uses_gpu else session.config.cpu_placement
    resource = GPU if uses_gpu else CPU
    if strategy == "spread":
        capacity = session.snapshot.nodes.allocatable[:, resource]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(capacity > 0, session.free(resource) / capacity, 0.0)
        return np.where(candidates, MAX_PLACEMENT * np.clip(ratio, 0.0, 1.0), 0.0)
    if uses_gpu:
        return _scaled_masked(session.free(GPU), candidates)
    allocatable = session.snapshot.nodes.allocatable
    max_cpu = max(1.0, float(allocatable[:, CPU].max()))
    max_gpu = max(1.0, float(allocatable[:, GPU].max()))
    free_gpu = session.free(GPU) + shared_gpu_room(session)
    leftover = 0.5 * (session.free(CPU) - task.request[CPU]) / max_cpu + 0.5 * free_gpu / max_gpu
    return _scaled_masked(leftover, candidates)


def _resource_type_masked(session: Session, task: Task, candidates: BoolVector) -> Vector:
    if task.request[GPU] > 0 or task.is_shared_gpu:
        return np.zeros(session.snapshot.nodes.count)
    cpu_only = session.snapshot.nodes.allocatable[:, GPU] == 0
    return np.where(candidates & cpu_only, CPU_ONLY_NODE, 0.0)


def _nominated_masked(session: Session, task: Task, candidates: BoolVector) -> Vector:
    scores = np.zeros(session.snapshot.nodes.count)
    if task.nominated_node >= 0 and candidates[task.nominated_node]:
        scores[task.nominated_node] = NOMINATED
    return scores


PAIRS = (
    (placement_scores, _placement_masked),
    (resource_type_scores, _resource_type_masked),
    (nominated_scores, _nominated_masked),
)


@settings(
    max_examples=150, derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    nodes=st.lists(node_specs, min_size=1, max_size=10),
    pods=st.lists(pod_specs, min_size=1, max_size=3),
    data=st.data(),
    gpu_placement=st.sampled_from(["binpack", "spread"]),
    cpu_placement=st.sampled_from(["binpack", "spread"]),
)
def test_candidate_scores_are_the_masked_scores_of_the_candidates(
    nodes: list[tuple[int, int, int, float]],
    pods: list[tuple[float, float]],
    data: st.DataObject,
    gpu_placement: str,
    cpu_placement: str,
) -> None:
    snapshot = _snapshot(nodes, pods)
    session = open_session(snapshot, SchedulerConfig(gpu_placement=gpu_placement, cpu_placement=cpu_placement))
    count = snapshot.nodes.count
    for task in (t for t in snapshot.tasks if t.status == TaskStatus.PENDING):
        nominated = data.draw(st.integers(-1, count - 1), label="nominated node")
        task = msgspec.structs.replace(task, nominated_node=nominated)
        mask = np.array(data.draw(st.lists(st.booleans(), min_size=count, max_size=count), label="candidates"))
        candidates = np.flatnonzero(mask)
        for score, masked in PAIRS:
            got = score(session, task, candidates)
            assert got.shape == candidates.shape
            assert np.array_equal(got, masked(session, task, mask)[candidates]), score.__name__
