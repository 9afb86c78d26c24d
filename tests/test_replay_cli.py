"""`kai replay` on a small slice of the public trace: JSON shape, determinism, plot, bad input."""

from __future__ import annotations

import json
import pathlib

import pytest
from click.testing import CliRunner

from kai.cli.main import main

DATA = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "alibaba-gpu-v2023"


def slice_trace(tmp_path: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """Every 12th node and pod of the default trace (kept small so the test runs in seconds)."""
    if not (DATA / "openb_node_list_gpu_node.csv").exists():
        pytest.skip("the shared Alibaba trace is not next to the checkout")
    out = []
    for name in ("openb_node_list_gpu_node.csv", "openb_pod_list_default.csv"):
        lines = (DATA / name).read_text().splitlines()
        path = tmp_path / name
        path.write_text("\n".join([lines[0], *lines[1::12]]) + "\n")
        out.append(path)
    return out[0], out[1]


def test_replay_json_compares_policies_and_is_deterministic(tmp_path: pathlib.Path) -> None:
    nodes, pods = slice_trace(tmp_path)
    args = [
        "replay",
        "--nodes",
        str(nodes),
        "--pods",
        str(pods),
        "--seeds",
        "2",
        "--policy",
        "binpack",
        "--policy",
        "fragmentation",
        "-o",
        "json",
        "--plot",
        str(tmp_path / "curve.png"),
    ]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    doc = json.loads(first.stdout)
    assert set(doc["policies"]) == {"binpack", "fragmentation"}
    for figures in doc["policies"].values():
        assert len(figures["seeds"]) == 2
        assert 50.0 < figures["allocationRatioFinal"] <= 100.0
        assert figures["unallocatedGpusFinal"] >= 0.0
        finals = [s["allocationRatioFinal"] for s in figures["seeds"]]
        assert figures["allocationRatioFinal"] == pytest.approx(sum(finals) / 2)
    assert (tmp_path / "curve.png").stat().st_size > 10_000
    again = CliRunner().invoke(main, args)
    assert json.loads(again.stdout) == doc


def test_replay_reports_bad_csv(tmp_path: pathlib.Path) -> None:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,lots,1024,8,V100\n")
    pods = tmp_path / "pods.csv"
    pods.write_text("name\n")
    result = CliRunner().invoke(main, ["replay", "--nodes", str(nodes), "--pods", str(pods)])
    assert result.exit_code == 2
    assert "nodes.csv" in result.stderr
    assert "Traceback" not in result.stderr
