"""Fragmentation and FGD scores: hand-computed examples from the paper's definition, plus a
randomised cross-check of the vectorised code against a direct transcription of the definition."""

from __future__ import annotations

import numpy as np
import pytest

from kai.plugins import fragmentation as frag

MODELS = ("T4", "V100")


def shape(cpu: float, num_gpu: int, gpu_milli: float, models: tuple[str, ...] = ()) -> frag.TaskShape:
    return frag.TaskShape(cpu_milli=cpu, num_gpu=num_gpu, gpu_milli=gpu_milli, gpu_models=models)


def target(*weighted: tuple[frag.TaskShape, float]) -> frag.TargetWorkload:
    return frag.target_workload(shapes=[s for s, _ in weighted], probability=[w for _, w in weighted], models=MODELS)


def state(*nodes: tuple[float, list[float], str], memory: float = 1e9) -> frag.DeviceState:
    """Nodes as (free cpu, free milli per device, model name or "")."""
    width = max(len(devices) for _, devices, _ in nodes)
    free_gpu = np.zeros((len(nodes), width))
    for i, (_, devices, _) in enumerate(nodes):
        free_gpu[i, : len(devices)] = devices
    return frag.DeviceState(
        free_cpu=np.array([cpu for cpu, _, _ in nodes], dtype=np.float64),
        free_memory=np.full(len(nodes), memory),
        free_gpu=free_gpu,
        gpu_count=np.array([len(devices) for _, devices, _ in nodes]),
        gpu_model=np.array([MODELS.index(m) if m else -1 for _, _, m in nodes]),
        models=MODELS,
    )


HALF = shape(2000, 1, 500)  # a task that wants half a GPU and 2 cores
WHOLE = shape(4000, 1, 1000)  # a task that wants one whole GPU and 4 cores
CPU_ONLY = shape(1000, 0, 0)


@pytest.mark.parametrize(
    ("workload", "node", "expected"),
    [
        pytest.param(
            [(HALF, 3), (WHOLE, 1)],
            (8000, [1000, 300], "T4"),
            # HALF fits (the 1000 device), so only the 300 device is a fragment for it: 300.
            # WHOLE fits too and cannot use the 300 device either: 300. 0.75*300 + 0.25*300 = 300.
            300.0,
            id="fits-both-shapes-300-device-is-the-fragment",
        ),
        pytest.param(
            [(HALF, 3), (WHOLE, 1)],
            (1000, [1000, 300], "T4"),
            # 1000 millicores free: neither shape fits (needs 2000 / 4000), so all 1300 idle milli
            # count for both shapes: 1300.
            1300.0,
            id="no-cpu-left-everything-is-fragmented",
        ),
        pytest.param(
            [(HALF, 3), (WHOLE, 1)],
            (8000, [400, 300], "T4"),
            # No device has 500 free: HALF cannot fit, WHOLE cannot fit: all 700 idle milli.
            700.0,
            id="partial-devices-too-small-for-every-shape",
        ),
        pytest.param(
            [(HALF, 2), (WHOLE, 1), (CPU_ONLY, 1)],
            (8000, [1000, 300], "T4"),
            # p = 0.5, 0.25, 0.25. HALF: 300, WHOLE: 300, CPU-only tasks never use GPUs: all 1300.
            # 0.5*300 + 0.25*300 + 0.25*1300 = 150 + 75 + 325 = 550.
            550.0,
            id="cpu-only-shapes-count-all-idle-gpus",
        ),
        pytest.param(
            [(shape(2000, 1, 500, ("V100",)), 1)],
            (8000, [1000, 1000], "T4"),
            # The only shape accepts V100 only; on a T4 node all 2000 idle milli are fragmented.
            2000.0,
            id="model-the-shape-does-not-accept",
        ),
        pytest.param(
            [(shape(2000, 1, 500, ("T4", "V100")), 1)],
            (8000, [1000, 1000], "T4"),
            # The shape accepts T4: both devices are usable, nothing is fragmented.
            0.0,
            id="model-the-shape-accepts",
        ),
        pytest.param(
            [(shape(4000, 2, 1000), 1)],
            (8000, [1000, 1000, 600, 0], "T4"),
            # Two whole devices exist, so the shape fits; only the 600 (and the used 0) device
            # cannot serve it: 600.
            600.0,
            id="two-gpu-shape-fits-leftover-partial-device",
        ),
        pytest.param(
            [(shape(4000, 2, 1000), 1)],
            (8000, [1000, 600, 600, 0], "T4"),
            # Only one whole device: the 2-GPU shape does not fit, all 2200 idle milli count.
            2200.0,
            id="two-gpu-shape-does-not-fit",
        ),
        pytest.param(
            [(HALF, 1)],
            (8000, [], ""),
            # A node without GPUs has nothing idle to fragment.
            0.0,
            id="cpu-only-node",
        ),
    ],
)
def test_node_fragmentation_hand_computed(
    workload: list[tuple[frag.TaskShape, float]], node: tuple[float, list[float], str], expected: float
) -> None:
    """F(node) = sum_s p_s * frag_s, with frag_s the idle milli shape s cannot use."""
    tw = target(*workload)
    cpu, devices, model = node
    assert frag.fragmentation_of_node(free_cpu=cpu, free_gpu=devices, gpu_model=model, target=tw) == (
        pytest.approx(expected)
    )
    if devices:
        batch = frag.node_fragmentation(state=state(node), target=tw)
        assert batch[0] == pytest.approx(expected)


def test_fractional_task_avoids_creating_an_unusable_fragment() -> None:
    """Target: only half-GPU tasks. Node devices [1000, 700], task takes 500.
    On device 0 -> [500, 700]: both still fit a half task, F stays 0 (delta 0).
    On device 1 -> [1000, 200]: the 200 left is useless, F = 200 (delta 200).
    FGD takes device 0, where best-fit (least free that fits) would take device 1."""
    scores = frag.fgd_scores(state=state((8000, [1000, 700], "T4")), shape=HALF, target=target((HALF, 1)))
    assert scores.delta[0] == 0.0
    assert scores.devices[0].tolist() == [0]


def test_fractional_task_fills_an_existing_fragment() -> None:
    """Target: only whole-GPU tasks. Task: 300 milli.
    Node 0 [1000, 300]: F = 300 (the 300 device). On device 1 -> [1000, 0]: F = 0, delta -300;
    on device 0 -> [700, 300]: no whole device left, F = 1000, delta +700.
    Node 1 [1000, 1000]: F = 0; either device -> [700, 1000]: F = 700, delta +700.
    Best: node 0, device 1, delta -300."""
    s = state((8000, [1000, 300], "T4"), (8000, [1000, 1000], "T4"))
    scores = frag.fgd_scores(state=s, shape=shape(1000, 1, 300), target=target((WHOLE, 1)))
    assert scores.delta.tolist() == [-300.0, 700.0]
    assert scores.devices[:, 0].tolist() == [1, 0]
    assert scores.best_node() == 0


def test_whole_gpu_task_takes_lowest_idle_devices() -> None:
    """Target: half tasks. Node [1000, 300, 1000, 1000]: F = 300. Two whole GPUs take devices 0 and
    2 (lowest-indexed idle) -> [0, 300, 0, 1000]: half tasks still fit, F = 300 + 0 + 0 = 300."""
    scores = frag.fgd_scores(
        state=state((16000, [1000, 300, 1000, 1000], "T4")), shape=shape(4000, 2, 1000), target=target((HALF, 1))
    )
    assert scores.devices[0].tolist() == [0, 2]
    assert scores.delta[0] == 0.0


def test_cpu_only_task_scores_the_cpu_it_strands() -> None:
    """Target: half tasks needing 2000 millicores. A CPU task of 2000 on node 0 (3000 free, one idle
    GPU) leaves 1000 millicores: half tasks no longer fit, F goes 0 -> 1000 (delta 1000). Node 1 has
    10000 millicores: delta 0. FGD prefers node 1."""
    s = state((3000, [1000], "T4"), (10000, [1000], "T4"))
    scores = frag.fgd_scores(state=s, shape=shape(2000, 0, 0), target=target((HALF, 1)))
    assert scores.delta.tolist() == [1000.0, 0.0]
    assert scores.devices.shape == (2, 0)
    assert scores.best_node() == 1


def test_integer_scores_tie_where_exact_deltas_differ() -> None:
    """Target: whole-GPU tasks with 1000 cpu (p 0.99) and with 8000 cpu (p 0.01). A CPU task of
    2000 leaves 7000 millicores, so the 8000-cpu shape stops fitting: node 0 (3 idle GPUs) loses
    0.01 * 3000 = 30, node 1 (1 idle GPU) loses 0.01 * 1000 = 10. Exact FGD takes node 1; the
    authors' integer scores are int(100 * sigmoid(-0.03)) = 49 and int(100 * sigmoid(-0.01)) = 49,
    a tie that goes to the lowest tie rank (node 0)."""
    tw = target((shape(1000, 1, 1000), 99), (shape(8000, 1, 1000), 1))
    s = state((9000, [1000, 1000, 1000], "T4"), (9000, [1000], "T4"))
    task = shape(2000, 0, 0)
    exact = frag.fgd_scores(state=s, shape=task, target=tw)
    assert exact.delta.tolist() == [30.0, 10.0]
    assert exact.best_node() == 1
    coarse = frag.fgd_scores(state=s, shape=task, target=tw, integer_scores=True)
    assert coarse.scores().tolist() == [49.0, 49.0]
    assert coarse.best_node() == 0
    assert coarse.best_node(tie_rank=np.array([1, 0])) == 1


@pytest.mark.parametrize(
    ("task", "memory", "why"),
    [
        (shape(20000, 1, 500), 0.0, "too little cpu"),
        (shape(1000, 1, 500), 2e9, "too little memory"),
        (shape(1000, 1, 500, ("V100",)), 0.0, "wrong model"),
        (shape(1000, 4, 1000), 0.0, "too few idle devices"),
        (shape(1000, 1, 1000), 0.0, "no idle device for a whole GPU"),
    ],
)
def test_infeasible_nodes_get_no_score(task: frag.TaskShape, memory: float, why: str) -> None:
    s = state((8000, [900, 800], "T4"))
    scores = frag.fgd_scores(state=s, shape=task, target=target((HALF, 1)), memory_mib=memory)
    assert not scores.feasible[0], why
    assert scores.delta[0] == np.inf
    assert (scores.devices[0] == -1).all()
    assert scores.best_node() is None


def test_shape_distribution_ranks_truncates_and_renormalises() -> None:
    """Counts 6, 3, 1 (shape a, b, c). At a 0.9 threshold, a and b cover 9 of 10 observations and
    c is dropped; probabilities become 6/9 and 3/9. Ties in count rank by (cpu, share, gpus)
    descending."""
    a, b, c = shape(1000, 1, 500), shape(2000, 1, 1000), shape(4000, 0, 0)
    dist = frag.TaskShapeDistribution.from_shapes([a] * 6 + [b] * 3 + [c])
    assert [s for s, _ in dist.counts] == [a, b, c]
    tw = dist.target(models=MODELS, popularity_threshold=0.9)
    assert tw.shapes == (a, b)
    assert tw.probability.tolist() == pytest.approx([6 / 9, 3 / 9])
    assert dist.target(models=MODELS, popularity_threshold=1.0).shapes == (a, b, c)
    tied = frag.TaskShapeDistribution.from_shapes([a, c])
    assert [s for s, _ in tied.counts] == [c, a]  # equal counts: larger cpu first


def test_shape_distribution_updates_incrementally() -> None:
    a, b = shape(1000, 1, 500), shape(2000, 1, 1000)
    first = frag.TaskShapeDistribution.from_shapes([a, a, b])
    assert first.observe([b, b]) == frag.TaskShapeDistribution.from_shapes([a, a, b, b, b])
    top_shape, top_share = first.popularity()[0]
    assert top_shape == a
    assert top_share == pytest.approx(2 / 3)
    assert first.total == 3.0  # the original is unchanged


def test_task_shape_normalises_models_and_rejects_nonsense() -> None:
    assert shape(0, 1, 500, ("V100", "T4", "T4")).gpu_models == ("T4", "V100")
    with pytest.raises(ValueError, match="CPU-only task has both 0"):
        shape(1000, 1, 0)
    with pytest.raises(ValueError, match=r"within \[0, 1000\]"):
        shape(1000, 1, 1500)
    with pytest.raises(ValueError, match="no task shapes observed"):
        frag.TaskShapeDistribution().target(models=MODELS)


def test_state_with_task_and_immutability() -> None:
    s = state((8000, [1000, 700], "T4"), memory=100.0)
    after = s.with_task(node=0, devices=[1], shape=HALF, memory_mib=40.0)
    assert after.free_gpu[0].tolist() == [1000.0, 200.0]
    assert after.free_cpu[0] == 6000.0 and after.free_memory[0] == 60.0
    assert s.free_gpu[0].tolist() == [1000.0, 700.0]
    with pytest.raises(ValueError, match="read-only"):
        s.free_gpu[0, 0] = 1.0
    with pytest.raises(ValueError, match="cannot hold"):
        after.with_task(node=0, devices=[1], shape=HALF)


def test_mismatched_model_vocabulary_is_rejected() -> None:
    tw = frag.target_workload(shapes=[HALF], probability=[1.0], models=("A100",))
    with pytest.raises(ValueError, match=r"To fix: build the target with models=state\.models"):
        frag.fgd_scores(state=state((8000, [1000], "T4")), shape=HALF, target=tw)


def _reference_fragmentation(cpu: float, devices: list[float], model: str, tw: frag.TargetWorkload) -> float:
    """The definition, one shape at a time."""
    idle, total = sum(devices), 0.0
    for s, p in zip(tw.shapes, tw.probability, strict=True):
        model_ok = not s.gpu_models or model in s.gpu_models
        roomy = sum(1 for f in devices if f >= s.gpu_milli)
        if s.needs_gpu and model_ok and roomy >= s.num_gpu and cpu >= s.cpu_milli:
            total += p * sum(f for f in devices if f < s.gpu_milli)
        else:
            total += p * idle
    return total


def test_vectorised_scores_match_the_definition_on_random_clusters() -> None:
    rng = np.random.default_rng(7)
    shares = [0, 50, 110, 250, 470, 500, 810, 1000]
    shapes: set[frag.TaskShape] = set()
    while len(shapes) < 25:
        g = int(rng.choice([0, 1, 1, 1, 2, 4]))
        m = 0 if g == 0 else (1000 if g > 1 else int(rng.choice(shares[1:])))
        models = () if rng.random() < 0.7 else (str(rng.choice(MODELS)),)
        shapes.add(shape(float(rng.choice([1000, 4000, 8000, 16000])), g, m, models))
    tw = frag.target_workload(
        shapes=sorted(shapes, key=frag.TaskShape.rank_key), probability=rng.random(25), models=MODELS
    )
    nodes = []
    for _ in range(40):
        count = int(rng.choice([1, 2, 4, 8]))
        devices = [float(rng.choice([0, 110, 250, 500, 530, 1000, 1000])) for _ in range(count)]
        nodes.append((float(rng.integers(0, 40)) * 1000, devices, str(rng.choice(["T4", "V100", ""]))))
    s = state(*nodes)
    got = frag.node_fragmentation(state=s, target=tw)
    for i, (cpu, devices, model) in enumerate(nodes):
        assert got[i] == pytest.approx(_reference_fragmentation(cpu, devices, model, tw))
    for task in (shape(2000, 1, 470), shape(4000, 1, 1000), shape(8000, 2, 1000), shape(3000, 0, 0)):
        scores = frag.fgd_scores(state=s, shape=task, target=tw)
        for i in (int(k) for k in np.flatnonzero(scores.feasible)):
            cpu, devices, model = nodes[i]
            base = _reference_fragmentation(cpu, devices, model, tw)
            after = list(devices)
            for d in scores.devices[i]:
                after[d] -= task.gpu_milli
            assert scores.delta[i] == pytest.approx(
                _reference_fragmentation(cpu - task.cpu_milli, after, model, tw) - base, abs=1e-6
            )
            if task.is_fractional:  # the chosen device is the first best one
                options = []
                for d, f in enumerate(devices):
                    if f >= task.gpu_milli:
                        trial = list(devices)
                        trial[d] -= task.gpu_milli
                        options.append(_reference_fragmentation(cpu - task.cpu_milli, trial, model, tw) - base)
                    else:
                        options.append(np.inf)
                assert scores.devices[i, 0] == int(np.argmin(np.round(options, 6)))
