"""`kai explain` and the conditions and events `kai sim` writes say the same bytes on every run:
nothing depends on hash order or the clock (two processes with different hash seeds agree)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

CASES = pathlib.Path(__file__).parent / "cases"


def run(args: list[str], seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run(
        [sys.executable, "-m", "kai.cli.main", *args], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_explain_and_sim_say_the_same_bytes_whatever_the_hash_seed() -> None:
    explain = ["explain", "podgroup", "big", "-f", str(CASES / "missing-queue-label" / "manifests.yaml"), "-o", "json"]
    sim = ["sim", "-f", str(CASES / "missing-queue-label" / "manifests.yaml"), "--until-idle", "-o", "json"]
    for args in (explain, sim):
        first, second = run(args, "1"), run(args, "2")
        assert first and first == second
