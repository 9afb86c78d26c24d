"""The `kai` command group. Each subcommand lives in its own module and is registered here."""

from __future__ import annotations

import click

from kai import __version__
from kai.cli import CONTEXT_SETTINGS
from kai.cli.demo_cmd import demo
from kai.cli.explain_cmd import explain
from kai.cli.install_cmd import install
from kai.cli.replay_cmd import replay
from kai.cli.run_cmd import run
from kai.cli.sim_cmd import sim


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, prog_name="kai")
def main() -> None:
    """kai: a Kubernetes scheduler for AI workloads, compatible with NVIDIA's KAI Scheduler."""


main.add_command(sim)
main.add_command(demo)
main.add_command(replay)
main.add_command(install)
main.add_command(explain)
main.add_command(run)


if __name__ == "__main__":
    main()
