"""Help that answers: every command and option described, `-h` everywhere, examples, golden texts."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from kai.cli.main import main
from kai.cluster.config import KEYS
from tests.cli.golden import check, kai


def commands(
    group: click.Command = main, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command of the `kai` tree, with the words that invoke it (new commands are covered too)."""
    yield path, group
    if isinstance(group, click.Group):
        for name, command in sorted(group.commands.items()):
            yield from commands(command, (*path, name))


ALL = list(commands())
IDS = [" ".join(("kai", *path)) for path, _ in ALL]


@pytest.mark.parametrize(("path", "command"), ALL, ids=IDS)
def test_every_option_and_argument_is_described(path: tuple[str, ...], command: click.Command) -> None:
    assert command.help, f"kai {' '.join(path)} has no help text"
    for param in command.params:
        if isinstance(param, click.Option):
            assert param.help, f"kai {' '.join(path)} {param.opts[0]} has no help text"
        elif isinstance(param, click.Argument):
            assert param.human_readable_name.strip("[]").upper() in command.help.upper(), (
                f"kai {' '.join(path)}: argument {param.name} is not explained in the command's help"
            )


@pytest.mark.parametrize(("path", "command"), ALL, ids=IDS)
def test_dash_h_works_and_shows_examples(path: tuple[str, ...], command: click.Command) -> None:
    out = kai([*path, "-h"])
    assert out.startswith("Usage: kai")
    assert " TEXT" not in out, "every option names what it takes (FILE, DIR, DURATION, ...)"
    if not isinstance(command, click.Group):
        assert "Examples:" in out


@pytest.mark.parametrize(("path", "command"), ALL, ids=IDS)
def test_help_matches_golden(path: tuple[str, ...], command: click.Command) -> None:
    check("help-" + "-".join(("kai", *path)), kai([*path, "--help"], columns=80))


def test_sim_help_documents_cluster_annotations_and_exit_codes() -> None:
    out = kai(["sim", "--help"])
    for text in (
        "node-0 .. node-3",
        "sim.kai.scheduler/create-at",
        "sim.kai.scheduler/duration",
        "Exit status: 0",
        "--help-config",
        "FILE|DIR|-",
    ):
        assert text in out


def test_help_config_lists_every_config_key() -> None:
    result = CliRunner().invoke(main, ["sim", "--help-config"])
    assert result.exit_code == 0
    for key in KEYS:
        assert f"  {key}:" in result.output
