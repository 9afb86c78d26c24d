"""`kai sim`: run manifests through the real scheduling core on the embedded simulated cluster."""

from __future__ import annotations

import json
import sys

import click
import yaml
from rich.console import Console

from kai.cli.simulate import simulate
from kai.cli.tables import print_tables
from kai.sim import output


@click.command()
@click.option(
    "-f",
    "--filename",
    "paths",
    multiple=True,
    required=True,
    help="YAML/JSON file, directory or http(s) URL of manifests (repeatable; - reads standard input).",
)
@click.option("--cycles", type=click.IntRange(min=1), default=None, help="Scheduling cycles to run (default 1).")
@click.option("--until-idle", is_flag=True, help="Cycle until nothing changes and no timed event is due.")
@click.option("--max-time", default="24h", show_default=True, help="Virtual-time bound for --until-idle.")
@click.option(
    "--actions",
    "actions_text",
    default=None,
    help="Comma-separated actions to run, in order; overrides `actions` in --config.",
)
@click.option("--config", "config_path", default=None, help="Scheduler configuration YAML.")
@click.option("--start-time", default=None, help="RFC 3339 start of the virtual clock.")
@click.option("-o", "--output", "fmt", type=click.Choice(["table", "json", "yaml"]), default="table", show_default=True)
@click.option("-v", "--verbose", is_flag=True, help="List every object skipped because kai does not read its kind.")
def sim(
    paths: tuple[str, ...],
    cycles: int | None,
    until_idle: bool,
    max_time: str,
    actions_text: str | None,
    config_path: str | None,
    start_time: str | None,
    fmt: str,
    verbose: bool,
) -> None:
    """Run manifests through the real scheduling core on an embedded simulated cluster."""
    simulation = simulate(
        paths=paths,
        cycles=cycles,
        until_idle=until_idle,
        max_time=max_time,
        actions_text=actions_text,
        config_path=config_path,
        start_time=start_time,
        verbose=verbose,
    )
    doc = output.build(simulation)
    if fmt == "json":
        click.echo(json.dumps(doc, indent=2))
    elif fmt == "yaml":
        click.echo(yaml.safe_dump(doc, sort_keys=False))
    else:
        print_tables(doc, Console(width=None if sys.stdout.isatty() else 160))
