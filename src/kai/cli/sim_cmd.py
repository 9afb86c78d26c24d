"""`kai sim`: run manifests through the real scheduling core on the embedded simulated cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
import yaml

from kai.api.fields import parse_duration
from kai.cli import CONTEXT_SETTINGS, json_text, process
from kai.cli.sim_help import EPILOG, print_config_help
from kai.cli.simulate import simulate
from kai.cli.views import names
from kai.cluster import collector
from kai.sim import output

if TYPE_CHECKING:
    from kai.cli.views.capture import ClusterView
    from kai.sim.engine import Simulation

TABLES = ("table", "wide")


def _durations(texts: tuple[str, ...]) -> list[float]:
    try:
        return [parse_duration(t) for t in texts]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--at") from None


@click.command(epilog=EPILOG, context_settings=CONTEXT_SETTINGS)
@click.option(
    "-f",
    "--filename",
    "paths",
    multiple=True,
    required=True,
    metavar="FILE|DIR|-",
    help="Manifests to apply: a YAML/JSON file, a directory of them, an http(s) URL, or - for standard input. "
    "Repeatable.",
)
@click.option(
    "--cycles",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Run N scheduling cycles (default 1), one schedule period (1s) apart.",
)
@click.option(
    "--until-idle", is_flag=True, help="Cycle until nothing changes and no timed event is due (bounded by --max-time)."
)
@click.option(
    "--max-time",
    default="24h",
    show_default=True,
    metavar="DURATION",
    help="With --until-idle: stop the virtual clock at this time after the start (e.g. 31s, 10m).",
)
@click.option(
    "--actions",
    "actions_text",
    default=None,
    metavar="LIST",
    help="Comma-separated actions to run each cycle, in order; overrides `actions` in --config.",
)
@click.option(
    "--config",
    "config_path",
    default=None,
    metavar="FILE",
    help="Scheduler configuration YAML (keys: kai sim --help-config).",
)
@click.option(
    "--start-time", default=None, metavar="RFC3339", help="Start of the virtual clock, e.g. 2026-01-01T00:00:00Z."
)
@click.option(
    "-o",
    "--output",
    "fmt",
    type=click.Choice(["table", "wide", "json", "yaml"]),
    default="table",
    show_default=True,
    help="table: kubectl-style tables; wide: more columns; json/yaml: the sim contract's document.",
)
@click.option(
    "--show",
    "show_text",
    default=",".join(names.DEFAULT_SHOW),
    show_default=True,
    metavar="VIEWS",
    help=f"Tables to print, comma-separated: {', '.join(names.VIEW_NAMES)}.",
)
@click.option("--timeline", is_flag=True, help="Print every event in order, with virtual timestamps (tables only).")
@click.option(
    "--at",
    "at_texts",
    multiple=True,
    metavar="DURATION",
    help="Also print the tables as they were this long after the start (repeatable; tables only).",
)
@click.option(
    "--help-config",
    is_flag=True,
    is_eager=True,
    expose_value=False,
    callback=print_config_help,
    help="Show the keys of the --config file and exit.",
)
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
    show_text: str,
    timeline: bool,
    at_texts: tuple[str, ...],
    verbose: bool,
) -> None:
    """Run manifests through the real scheduling core on an embedded simulated cluster.

    Applies the YAML a user would `kubectl apply` (Queues, PodGroups, Pods, Deployments, Jobs,
    RayClusters, PyTorchJobs, ...) to a simulated cluster with a virtual clock, runs the
    scheduler's cycles and prints what it decided and why.
    """
    try:
        show = names.parse_show(show_text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--show") from None
    pauses = _durations(at_texts)
    if fmt not in TABLES and (timeline or pauses):
        raise click.UsageError("--timeline and --at print tables; use -o table or -o wide")
    snapshots: list[tuple[float, ClusterView]] = []

    def on_pause(sim: Simulation, t: float) -> None:
        from kai.cli.views.capture import capture  # tables only (-o json and yaml do not import them)

        snapshots.append((t, capture(sim)))

    simulation = simulate(
        paths=paths,
        cycles=cycles,
        until_idle=until_idle,
        max_time=max_time,
        actions_text=actions_text,
        config_path=config_path,
        start_time=start_time,
        verbose=verbose,
        pauses=pauses,
        on_pause=on_pause,
    )
    if fmt in ("json", "yaml"):
        with collector.paused(freeze=True):  # the document is built and written at once
            doc = output.build(simulation)
            click.echo(json_text.encode(doc) if fmt == "json" else yaml.safe_dump(doc, sort_keys=False))
        process.end_quickly(simulation, doc)  # the program ends without freeing them
        return
    from rich.console import Console  # only tables need the renderer

    from kai.cli.views import show as views
    from kai.cli.views.capture import capture

    console = Console(highlight=False)
    final = capture(simulation)
    if timeline:
        views.print_timeline(console, final)
    for seconds, view in snapshots:
        views.print_state(console, view, show=show, wide=fmt == "wide", heading=views.at_heading(view, seconds))
    views.print_state(console, final, show=show, wide=fmt == "wide", heading=views.end_heading(final))
    views.print_warnings(console, final)
    process.end_quickly(simulation, final, snapshots)
