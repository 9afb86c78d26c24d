"""`kai sim`: run manifests through the real scheduling core on the embedded simulated cluster."""

from __future__ import annotations

import json
import sys

import click
import yaml
from rich.console import Console

from kai.api.errors import InputError
from kai.api.fields import parse_duration, parse_timestamp
from kai.cli.tables import print_tables
from kai.cluster.config import load_config, parse_actions
from kai.sim import output
from kai.sim.engine import Simulation
from kai.sim.loader import load_paths


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


@click.command()
@click.option(
    "-f",
    "--filename",
    "paths",
    multiple=True,
    required=True,
    help="YAML/JSON file or directory of manifests (repeatable; - reads standard input).",
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
def sim(
    paths: tuple[str, ...],
    cycles: int | None,
    until_idle: bool,
    max_time: str,
    actions_text: str | None,
    config_path: str | None,
    start_time: str | None,
    fmt: str,
) -> None:
    """Run manifests through the real scheduling core on an embedded simulated cluster."""
    if cycles is not None and until_idle:
        raise click.UsageError("--cycles and --until-idle exclude each other")
    try:
        config = load_config(config_path) if config_path else None
        from kai.core.session import SchedulerConfig

        config = config or SchedulerConfig()
        if actions_text is not None:
            from dataclasses import replace

            config = replace(config, actions=parse_actions(actions_text, file="--actions", field="--actions"))
        start = parse_timestamp(start_time) if start_time else None
        bound = parse_duration(max_time)
    except InputError as exc:
        _fail(str(exc))
        return
    except ValueError as exc:
        _fail(f"bad option value: {exc}")
        return
    loaded = load_paths(paths)
    for skipped in loaded.skipped:
        click.echo(
            f"warning: {skipped.source}: {skipped.api_version} {skipped.kind} {skipped.name}: "
            "kind not understood by kai sim; skipped",
            err=True,
        )
    if loaded.errors:
        for error in loaded.errors:
            click.echo(f"error: {error}", err=True)
        sys.exit(2)
    try:
        simulation = Simulation(loaded.objects, config=config, start_time=start)
        simulation.run(cycles=cycles, until_idle=until_idle, max_time=bound)
    except InputError as exc:
        _fail(str(exc))
        return
    except Exception as exc:  # an internal error: say so plainly, exit 1 (the contract), keep the trace
        import traceback

        traceback.print_exc(file=sys.stderr)
        click.echo(f"internal error: {type(exc).__name__}: {exc}; please report it with the input", err=True)
        sys.exit(1)
    doc = output.build(simulation)
    if fmt == "json":
        click.echo(json.dumps(doc, indent=2))
    elif fmt == "yaml":
        click.echo(yaml.safe_dump(doc, sort_keys=False))
    else:
        print_tables(doc, Console(width=None if sys.stdout.isatty() else 160))
