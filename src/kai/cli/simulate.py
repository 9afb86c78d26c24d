"""Run `kai sim`'s inputs on the embedded cluster: shared by `kai sim` and `kai explain -f`.

Bad options or manifests end the command with exit status 2 and every problem on standard error
(the file, the document, the object and the field); an internal error exits 1 with the trace.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

import click
from msgspec.structs import replace

from kai.api.errors import InputError
from kai.api.fields import parse_duration, parse_timestamp
from kai.api.manifest import SkippedObject, Workload
from kai.api.podgroup import format_duration
from kai.cluster import collector
from kai.cluster.config import load_config, parse_actions
from kai.core.session import SchedulerConfig
from kai.sim.engine import Simulation
from kai.sim.loader import load_paths


def fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def sim_options(
    config_path: str | None, actions_text: str | None, start_time: str | None, max_time: str
) -> tuple[SchedulerConfig, float | None, float]:
    """The scheduler configuration, start time and time bound from the options; exit 2 naming a bad one."""
    try:
        config = load_config(config_path) if config_path else SchedulerConfig()
    except InputError as exc:
        fail(f"--config {config_path}: {exc.field + ': ' if exc.field else ''}{exc.problem}")
    if actions_text is not None:
        try:
            config = replace(config, actions=parse_actions(actions_text, file="--actions", field="--actions"))
        except InputError as exc:
            fail(f"--actions: {exc.problem}")
    start = None
    if start_time:
        try:
            start = parse_timestamp(start_time)
        except (ValueError, OverflowError):
            fail(f'--start-time: must be an RFC 3339 time such as 2026-01-01T00:00:00Z, got "{start_time}"')
    try:
        bound = parse_duration(max_time)
    except ValueError as exc:
        fail(f"--max-time: {exc}")
    if bound <= 0:
        fail(f'--max-time: must be positive, got "{max_time}"')
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


def simulate(
    *,
    paths: tuple[str, ...],
    cycles: int | None,
    until_idle: bool,
    max_time: str,
    actions_text: str | None,
    config_path: str | None,
    start_time: str | None,
    verbose: bool = False,
    pauses: Sequence[float] = (),
    on_pause: Callable[[Simulation, float], None] | None = None,
) -> Simulation:
    """The simulation after the requested cycles (what `kai sim` prints, what `kai explain` explains).

    `on_pause(simulation, t)` sees the simulation at each time `t` of `pauses` (`kai sim --at`)."""
    if cycles is not None and until_idle:
        raise click.UsageError("--cycles and --until-idle exclude each other")
    config, start, bound = sim_options(config_path, actions_text, start_time, max_time)
    end = bound if until_idle else (cycles or 1) * config.schedule_period
    late = [t for t in pauses if t > end + 1e-9]
    if late:
        reach = (
            f"--max-time {max_time}"
            if until_idle
            else f"{cycles or 1} cycle(s) of {format_duration(config.schedule_period)}"
        )
        raise click.BadParameter(f"{format_duration(late[0])} is after the end of the run ({reach})", param_hint="--at")
    with collector.paused(freeze=True):  # the input is read into objects that live as long as the run
        loaded = load_paths(paths, extra_keys=frozenset({config.queue_label_key}))
    _report_skipped(loaded.skipped, verbose=verbose)
    for warning in loaded.warnings:
        click.echo(f"warning: {warning}", err=True)
    if loaded.errors:
        for error in loaded.errors:
            click.echo(f"error: {error}", err=True)
        sys.exit(2)
    crons = sorted(obj.meta.name for obj, _ in loaded.objects if isinstance(obj, Workload) and obj.kind == "CronJob")
    if until_idle and crons:
        click.echo(
            f"note: CronJob {', '.join(crons)} runs on its schedule until --max-time ({max_time}); "
            "a shorter --max-time ends the run sooner",
            err=True,
        )
    try:
        with collector.paused(freeze=True):
            simulation = Simulation(loaded.objects, config=config, start_time=start)
        for warning in loaded.warnings:  # load-time warnings are events at the start, as an admission warning
            simulation.record_event(
                "Warning", warning.reason, f"{warning.kind}/{warning.name}", f"{warning.field}: {warning.problem}"
            )
        simulation.run(
            cycles=cycles,
            until_idle=until_idle,
            max_time=bound,
            pauses=pauses,
            on_pause=None if on_pause is None else lambda t: on_pause(simulation, t),
        )
    except InputError as exc:
        fail(str(exc))
    except Exception as exc:  # an internal error: say so plainly, exit 1 (the contract), keep the trace
        internal_error(exc)
    return simulation


def internal_error(exc: Exception) -> NoReturn:
    import traceback

    traceback.print_exc(file=sys.stderr)
    click.echo(f"internal error: {type(exc).__name__}: {exc}; please report it with the input", err=True)
    sys.exit(1)
