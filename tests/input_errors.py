"""Runs `kai sim` on one bad manifest file and returns what a user reads (tests share it)."""

from __future__ import annotations

import pathlib
from typing import Any

import yaml
from click.testing import CliRunner

from kai.cli.main import main


def sim_input_error(tmp_path: pathlib.Path, doc: dict[str, Any]) -> str:
    """Write `doc` to a file, run `kai sim` on it, check it exits 2 naming the file; return stderr."""
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    result = CliRunner().invoke(main, ["sim", "-f", str(path), "-o", "json"])
    assert result.exit_code == 2
    assert str(path) in result.stderr
    assert "Traceback" not in result.stderr
    return result.stderr
