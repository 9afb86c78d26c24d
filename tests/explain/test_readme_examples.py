"""The README's `kai explain` examples are real output: each command, run now, prints what is shown."""

from __future__ import annotations

import pathlib
import shlex

import pytest
from click.testing import CliRunner

from kai.cli.main import main

ROOT = pathlib.Path(__file__).resolve().parents[2]


def examples() -> list[tuple[str, str]]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## `kai explain`") :]
    block = section[section.index("```\n") + 4 :]
    block = block[: block.index("```")]
    out: list[tuple[str, str]] = []
    for chunk in block.strip().split("\n\n"):
        command, _, printed = chunk.partition("\n")
        out.append((command.removeprefix("$ "), printed + "\n"))
    return out


def test_readme_shows_three_real_examples(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the commands name files relative to the repository
    found = examples()
    assert len(found) == 3
    for command, printed in found:
        args = shlex.split(command)
        assert args[0] == "kai"
        result = CliRunner().invoke(main, args[1:], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        assert result.stdout == printed, command
