"""`kai replay --seed N` and its progress when standard error is not a terminal."""

from __future__ import annotations

import json
import pathlib

from click.testing import CliRunner

from kai.cli.main import main
from tests.test_replay_cli import slice_trace


def test_one_chosen_seed_with_a_line_per_finished_run(tmp_path: pathlib.Path) -> None:
    nodes, pods = slice_trace(tmp_path)
    args = ["replay", "--nodes", str(nodes), "--pods", str(pods), "--seed", "3", "--policy", "binpack"]
    result = CliRunner().invoke(main, [*args, "--policy", "spread", "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [s["seed"] for s in doc["policies"]["binpack"]["seeds"]] == [3]
    assert [s["seed"] for s in doc["policies"]["spread"]["seeds"]] == [3]
    lines = result.stderr.splitlines()
    assert [line.split(":")[0] for line in lines] == ["[1/2] binpack seed 3", "[2/2] spread seed 3"]
    assert "% final" in lines[0]


def test_table_explains_the_fragmented_column(tmp_path: pathlib.Path) -> None:
    nodes, pods = slice_trace(tmp_path)
    result = CliRunner().invoke(main, ["replay", "--nodes", str(nodes), "--pods", str(pods), "--seed", "0"])
    assert result.exit_code == 0, result.output
    assert "FRAGMENTED % OF IDLE: of the GPU capacity left idle at the end" in result.stdout


def test_seed_and_seeds_exclude_each_other(tmp_path: pathlib.Path) -> None:
    nodes, pods = slice_trace(tmp_path)
    result = CliRunner().invoke(
        main, ["replay", "--nodes", str(nodes), "--pods", str(pods), "--seed", "1", "--seeds", "2"]
    )
    assert result.exit_code == 2
    assert "--seed and --seeds exclude each other" in result.output
