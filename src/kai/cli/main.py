"""The `kai` command group. Each subcommand lives in its own module and is registered here.

A subcommand's module is imported only when that command runs (or when the group's help lists
them): `kai replay` does not pay for importing the simulator, the explainer or the Kubernetes client.
"""

from __future__ import annotations

import importlib

import click

from kai import __version__
from kai.cli import CONTEXT_SETTINGS, process

# command name -> module and attribute of its click command
COMMANDS: dict[str, tuple[str, str]] = {
    "sim": ("kai.cli.sim_cmd", "sim"),
    "demo": ("kai.cli.demo_cmd", "demo"),
    "replay": ("kai.cli.replay_cmd", "replay"),
    "install": ("kai.cli.install_cmd", "install"),
    "explain": ("kai.cli.explain_cmd", "explain"),
    "run": ("kai.cli.run_cmd", "run"),
}


class LazyGroup(click.Group):
    """A group whose commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        known = super().get_command(ctx, cmd_name)
        if known is not None or cmd_name not in COMMANDS:
            return known
        module, attribute = COMMANDS[cmd_name]
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command)
        self.add_command(command, cmd_name)
        return command


@click.group(cls=LazyGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, prog_name="kai")
def main() -> None:
    """kai: a Kubernetes scheduler for AI workloads, compatible with NVIDIA's KAI Scheduler."""


def entry() -> None:
    """The `kai` program (see `kai.cli.process`)."""
    process.run(main)


if __name__ == "__main__":
    entry()
