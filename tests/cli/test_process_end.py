"""`kai sim` run as a program ends quickly after writing everything (`kai.cli.process`): its standard
output, standard error and exit status are those of the same command run in-process."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
from click.testing import CliRunner

from kai.cli.main import main

CASE = pathlib.Path(__file__).parent.parent / "scenarios" / "gang-across-nodes" / "manifests.yaml"


@pytest.mark.parametrize(
    "args",
    [
        ["sim", "-f", str(CASE), "-o", "json"],
        ["sim", "-f", str(CASE), "-o", "wide", "--timeline"],
        ["sim", "-f", str(CASE.with_name("absent.yaml")), "-o", "json"],  # an input error: exit 2
    ],
    ids=["json", "tables", "error"],
)
def test_the_program_writes_what_the_command_writes(args: list[str]) -> None:
    ran = subprocess.run([sys.executable, "-m", "kai.cli.main", *args], capture_output=True, check=False)
    invoked = CliRunner().invoke(main, args)
    assert (ran.returncode, ran.stdout, ran.stderr) == (invoked.exit_code, invoked.stdout_bytes, invoked.stderr_bytes)


def test_in_process_the_command_holds_nothing_after_it_returns() -> None:
    from kai.cli import process

    invoked = CliRunner().invoke(main, ["sim", "-f", str(CASE), "-o", "json"])
    assert invoked.exit_code == 0
    assert process._held == ()  # only the program (`process.run`) holds what the command built


_THREADS_AFTER_NUMPY = (
    "import os, sys\n"
    "from kai.cli import process\n"
    "def command():\n"
    "    import numpy\n"
    "    print(os.environ['OPENBLAS_NUM_THREADS'], len(os.listdir('/proc/self/task')))\n"
    "    sys.exit(0)\n"
    "process.run(command)\n"
)


@pytest.mark.skipif(not pathlib.Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
@pytest.mark.parametrize(("given", "expected"), [(None, "1 1"), ("2", "2 2")], ids=["default", "the user's"])
def test_the_program_runs_numpy_on_one_blas_thread(given: str | None, expected: str) -> None:
    """A `kai` program's numpy starts no BLAS worker threads (they only cost CPU), unless the user asks."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    ran = subprocess.run([sys.executable, "-c", _THREADS_AFTER_NUMPY], capture_output=True, text=True, env=env)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == expected.split()
