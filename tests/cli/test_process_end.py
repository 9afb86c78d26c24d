"""`kai sim` run as a program ends quickly after writing everything (`kai.cli.process`): its standard
output, standard error and exit status are those of the same command run in-process."""

from __future__ import annotations

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
