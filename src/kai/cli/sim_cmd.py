"""`kai sim`: run manifests through the real scheduling core on the embedded simulated cluster."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from typing import NoReturn

import click
import yaml
from rich.console import Console

from kai.api.errors import InputError
from kai.api.fields import parse_duration, parse_timestamp
from kai.api.manifest import SkippedObject
from kai.cli.tables import print_tables
from kai.cluster.config import load_config, parse_actions
from kai.core.session import SchedulerConfig
from kai.sim import output
from kai.sim.engine import Simulation
from kai.sim.loader import load_paths


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def _sim_options(
    config_path: str | None, actions_text: str | None, start_time: str | None, max_time: str
) -> tuple[SchedulerConfig, float | None, float]:
    """The scheduler configuration, start time and time bound from the options; exit 2 naming a bad one."""
    try:
        config = load_config(config_path) if config_path else SchedulerConfig()
    except InputError as exc:
        _fail(f"--config {config_path}: {exc.field + ': ' if exc.field else ''}{exc.problem}")
    if actions_text is not None:
        try:
            config = replace(config, actions=parse_actions(actions_text, file="--actions", field="--actions"))
        except InputError as exc:
            _fail(f"--actions: {exc.problem}")
    start = None
    if start_time:
        try:
            start = parse_timestamp(start_time)
        except (ValueError, OverflowError):
            _fail(f'--start-time: must be an RFC 3339 time such as 2026-01-01T00:00:00Z, got "{start_time}"')
    try:
        bound = parse_duration(max_time)
    except ValueError as exc:
        _fail(f"--max-time: {exc}")
    if bound <= 0:
        _fail(f'--max-time: must be positive, got "{max_time}"')
    return config, start, bound


def _report_skipped(skipped: list[SkippedObject], *, verbose: bool) -> None:
    """Objects of kinds kai does not read: one line each with -v, else one summary line."""
    if not skipped:
        return
    if verbose:
        for obj in skipped:
            click.echo(f"skipped: {obj.source}: {obj.api_version} {obj.kind} {obj.name}: {obj.reason}", err=True)
        return
    kinds = sorted({obj.kind for obj in skipped})
    click.echo(
        f"skipped {len(skipped)} object(s) of kinds kai does not read ({', '.join(kinds)}); -v lists them",
        err=True,
    )


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
    if cycles is not None and until_idle:
        raise click.UsageError("--cycles and --until-idle exclude each other")
    config, start, bound = _sim_options(config_path, actions_text, start_time, max_time)
    loaded = load_paths(paths)
    _report_skipped(loaded.skipped, verbose=verbose)
    for warning in loaded.warnings:
        click.echo(f"warning: {warning}", err=True)
    if loaded.errors:
        for error in loaded.errors:
            click.echo(f"error: {error}", err=True)
        sys.exit(2)
    try:
        simulation = Simulation(loaded.objects, config=config, start_time=start)
        for warning in loaded.warnings:  # load-time warnings are events at the start, as an admission warning
            simulation.record_event(
                "Warning", warning.reason, f"{warning.kind}/{warning.name}", f"{warning.field}: {warning.problem}"
            )
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
