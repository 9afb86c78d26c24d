"""Smoke run on a subsample of the real openb default trace through the reference loop (seconds)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kai.replay import trace

from ._reference_loop import run


@pytest.mark.parametrize("policy", ["fgd", "fgd-int", "bestfit", "random"])
def test_subsampled_default_trace_replays_consistently(openb_dir: Path, policy: str) -> None:
    """Every 10th GPU node (122 nodes) and every 10th pod, inflated to 130% of the subsample's GPUs."""
    loaded = trace.read_trace(directory=openb_dir)
    nodes, pods = loaded.nodes[::10], loaded.pods[::10]
    result = run(nodes=nodes, pods=pods, policy=policy, load=1.3, seed=1)
    metrics, final = result.metrics, result.final_state
    cluster_milli = sum(n.num_gpu for n in nodes) * 1000
    assert metrics.cluster_gpus * 1000 == cluster_milli
    # Arrivals reach the target (130%) within one device share, or a multi-GPU pod beyond it.
    assert 130.0 - 100_000 / cluster_milli < metrics.arrived_pct <= 130.0 + 700_000 / cluster_milli
    # Nothing is over-committed and the metrics agree with the state the placements produced.
    assert (final.free_gpu >= 0).all() and (final.free_cpu >= 0).all() and (final.free_memory >= 0).all()
    assert metrics.unallocated_gpus == pytest.approx(final.free_gpu.sum() / 1000)
    assert metrics.unplaced == int((~result.placed).sum()) > 0
    # Once full, the cluster is mostly allocated and its idle GPUs mostly fragmented.
    assert 70.0 < metrics.final_allocation_pct <= 100.0
    assert metrics.fragmented_idle_pct > 50.0
    assert np.all(np.diff(result.curve.allocated_pct) >= 0)
