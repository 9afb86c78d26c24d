"""The workload-inflation protocol (determinism, load target) and the replay metrics."""

from __future__ import annotations

import numpy as np
import pytest

from kai.plugins import fragmentation as frag
from kai.replay import protocol, trace


def pod(name: str, num_gpu: int, gpu_milli: int, cpu: int = 4000) -> trace.TracePod:
    return trace.TracePod(
        name=name,
        cpu_milli=cpu,
        memory_mib=1024,
        num_gpu=num_gpu,
        gpu_milli=gpu_milli,
        gpu_models=(),
        qos="LS",
        phase="Running",
        creation_time=0,
        deletion_time=None,
        scheduled_time=None,
    )


MIXED = [pod(f"p-{i:02d}", *spec) for i, spec in enumerate([(1, 500), (1, 1000), (0, 0), (2, 1000), (1, 250)] * 4)]
# 4 x (500 + 1000 + 0 + 2000 + 250) = 15000 milli requested by the originals.


def test_same_seed_same_sequence_other_seed_other_sequence() -> None:
    first = protocol.inflate_workload(pods=MIXED, cluster_gpus=20, load=1.3, seed=42)
    again = protocol.inflate_workload(pods=MIXED, cluster_gpus=20, load=1.3, seed=42)
    other = protocol.inflate_workload(pods=MIXED, cluster_gpus=20, load=1.3, seed=43)
    assert first.order.tolist() == again.order.tolist()
    assert first.order.tolist() != other.order.tolist()


def test_sequence_does_not_depend_on_the_order_of_the_pod_list() -> None:
    """Pods are sorted by name before the seeded shuffle."""
    reversed_pods = list(reversed(MIXED))
    a = protocol.inflate_workload(pods=MIXED, cluster_gpus=20, load=1.3, seed=5)
    b = protocol.inflate_workload(pods=reversed_pods, cluster_gpus=20, load=1.3, seed=5)
    assert [MIXED[i].name for i in a.order] == [reversed_pods[i].name for i in b.order]


@pytest.mark.parametrize("seed", range(8))
def test_inflation_keeps_every_original_once_then_reaches_the_target(seed: int) -> None:
    """20 GPUs at load 1.3: target 26000 milli; the originals ask 15000, copies make up the rest.
    Drawing stops before the first pod whose per-device share would pass the target, so the total
    ends within (target - 1000, target + 7000]; with at most 2-GPU pods, within target + 1000."""
    workload = protocol.inflate_workload(pods=MIXED, cluster_gpus=20, load=1.3, seed=seed)
    originals = workload.order[~workload.is_copy]
    assert sorted(originals.tolist()) == list(range(len(MIXED)))
    assert not workload.is_copy[: len(MIXED)].any() and workload.is_copy[len(MIXED) :].all()
    assert workload.target_gpu_milli == 26000.0
    assert 25000 < workload.total_gpu_milli <= 27000
    requested = [MIXED[i].gpu_request_milli for i in workload.order]
    assert workload.request_gpu_milli.tolist() == requested


def test_the_authors_stop_rule_tests_the_per_device_share() -> None:
    """One 8-GPU pod (8000 milli) on a 10-GPU cluster at load 1: target 10000. A copy is drawn
    while total + 1000 (its per-device share) <= 10000, so one copy is added: total 16000."""
    workload = protocol.inflate_workload(pods=[pod("big", 8, 1000)], cluster_gpus=10, load=1.0, seed=0)
    assert workload.order.tolist() == [0, 0]
    assert workload.total_gpu_milli == 16000


@pytest.mark.parametrize("seed", range(5))
def test_too_much_work_is_thinned_to_the_target(seed: int) -> None:
    """Target 5000 milli (5 GPUs at load 1) < 15000 requested: random originals are removed."""
    workload = protocol.inflate_workload(pods=MIXED, cluster_gpus=5, load=1.0, seed=seed)
    assert not workload.is_copy.any()
    assert len(set(workload.order.tolist())) == workload.order.size
    assert workload.total_gpu_milli <= 5000


def test_inflation_input_errors() -> None:
    with pytest.raises(ValueError, match="cluster_gpus must be positive"):
        protocol.inflate_workload(pods=MIXED, cluster_gpus=0, seed=1)
    with pytest.raises(ValueError, match="load must be positive"):
        protocol.inflate_workload(pods=MIXED, cluster_gpus=4, load=0, seed=1)
    with pytest.raises(ValueError, match="no number of copies"):
        protocol.inflate_workload(pods=[pod("cpu", 0, 0)], cluster_gpus=4, seed=1)


def test_initial_state_from_nodes() -> None:
    nodes = [
        trace.TraceNode(name="a", cpu_milli=96000, memory_mib=100, num_gpu=2, gpu_model="T4"),
        trace.TraceNode(name="b", cpu_milli=8000, memory_mib=50, num_gpu=0, gpu_model=""),
        trace.TraceNode(name="c", cpu_milli=64000, memory_mib=70, num_gpu=1, gpu_model="P100"),
    ]
    state = protocol.initial_state(nodes)
    assert state.models == ("P100", "T4")
    assert state.gpu_model.tolist() == [1, -1, 0]
    assert state.free_gpu.tolist() == [[1000.0, 1000.0], [0.0, 0.0], [1000.0, 0.0]]
    assert state.free_cpu.tolist() == [96000.0, 8000.0, 64000.0]


def test_allocation_curve_and_full_load_point() -> None:
    """Cluster of 2 GPUs (2000 milli). Arrivals ask 1000, 500, 1000 (fails), 500:
    arrived 50%, 75%, 125%, 150%; allocated 50%, 75%, 75%, 100%. Arrived load first reaches 100%
    at the third arrival, where 75% is allocated."""
    curve = protocol.allocation_curve(
        request_gpu_milli=[1000, 500, 1000, 500], placed=[True, True, False, True], cluster_gpus=2
    )
    assert curve.arrived_pct.tolist() == [50.0, 75.0, 125.0, 150.0]
    assert curve.allocated_pct.tolist() == [50.0, 75.0, 75.0, 100.0]
    assert curve.at(100.0) == 75.0
    assert curve.at(200.0) is None


def test_replay_metrics_from_a_final_state() -> None:
    """One node, devices [1000, 1000], target: half-GPU tasks. Placed: one 700-milli task on device
    0 -> free [300, 1000]: 35% allocated, 1.3 GPUs idle, of which the 300 device is a fragment for
    half tasks: 300 / 1300 = 23.08%."""
    nodes = [trace.TraceNode(name="a", cpu_milli=16000, memory_mib=100, num_gpu=2, gpu_model="T4")]
    state = protocol.initial_state(nodes)
    task = frag.TaskShape(cpu_milli=1000, num_gpu=1, gpu_milli=700)
    final = state.with_task(node=0, devices=[0], shape=task)
    target = frag.target_workload(
        shapes=[frag.TaskShape(cpu_milli=1000, num_gpu=1, gpu_milli=500)], probability=[1.0], models=state.models
    )
    curve = protocol.allocation_curve(request_gpu_milli=[700, 2000], placed=[True, False], cluster_gpus=2)
    metrics = protocol.replay_metrics(curve=curve, placed=[True, False], final_state=final, target=target)
    assert metrics.final_allocation_pct == pytest.approx(35.0)
    assert metrics.allocation_at_full_load_pct == pytest.approx(35.0)
    assert metrics.unallocated_gpus == pytest.approx(1.3)
    assert metrics.fragmented_idle_pct == pytest.approx(100 * 300 / 1300)
    assert (metrics.arrivals, metrics.unplaced) == (2, 1)
    with pytest.raises(ValueError, match="pass the state that the recorded placements produced"):
        protocol.replay_metrics(curve=curve, placed=[True, False], final_state=state, target=target)


def test_target_from_pods_uses_the_shapes_of_the_original_list() -> None:
    target = protocol.target_from_pods(MIXED, models=(), popularity_threshold=1.0)
    assert len(target.shapes) == 5
    assert np.allclose(target.probability, 0.2)
