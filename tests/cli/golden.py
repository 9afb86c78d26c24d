"""Golden files for what `kai` prints: compared byte for byte, rewritten only on request.

Regenerate after an intended change with `KAI_UPDATE_GOLDEN=1 python -m pytest tests/cli`, then
review the diff of `tests/cli/golden/` like any other change.
"""

from __future__ import annotations

import os
import pathlib
import shlex

from click.testing import CliRunner

from kai.cli.main import main

FOLDER = pathlib.Path(__file__).parent / "golden"
SCENES = pathlib.Path(__file__).parents[2] / "src" / "kai" / "cli" / "scenes"
UPDATE = os.environ.get("KAI_UPDATE_GOLDEN") == "1"


def kai(args: list[str], *, columns: int = 80) -> str:
    """Run `kai ARGS` as a user's shell would in a terminal `columns` wide; return standard output."""
    result = CliRunner().invoke(main, args, env={"COLUMNS": str(columns)}, prog_name="kai", catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def scene(name: str) -> str:
    return str(SCENES / name)


def scene_flags(name: str) -> list[str]:
    """How far the scene's own `kai sim` command plays it (`--until-idle` or `--cycles N`), so a view
    is checked at the moment the scene shows."""
    from kai.cli.demo import find, load_scenes

    found = find(load_scenes(), name)
    assert found is not None, name
    words = shlex.split(found.command)
    if "--cycles" in words:
        return ["--cycles", words[words.index("--cycles") + 1]]
    assert "--until-idle" in words, found.command
    return ["--until-idle"]


def check(name: str, text: str) -> None:
    path = FOLDER / f"{name}.txt"
    if UPDATE:
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"no golden file {path}; create it with KAI_UPDATE_GOLDEN=1"
    want = path.read_text(encoding="utf-8")
    assert text == want, f"{name}: output differs from {path} (KAI_UPDATE_GOLDEN=1 rewrites it)\n{text}"
