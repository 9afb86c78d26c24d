"""`kai explain`: why a workload waits, what would make it run, and when; or what a queue holds.

With `-f`, the state explained is the one `kai sim` ends in with the same flags. The output is the
`kai explain` contract's JSON (`-o json`, or the same as YAML), or text that says the same things.
Exit 0 when explained; 2 for unusable input or an object that does not exist.
"""

from __future__ import annotations

import json
from typing import Any

import click
import yaml

from kai.api.fields import parse_duration
from kai.cli import CONTEXT_SETTINGS
from kai.cli.simulate import fail, internal_error, simulate
from kai.explain import queues, render
from kai.sim import explain_view


def _key(target: str) -> str:
    return target if "/" in target else f"default/{target}"


EXPLAIN_EPILOG = """\b
Examples:
  kai explain podgroup ray-big -f ray.yaml --until-idle
  kai explain pod default/train-pod -f priority.yaml --until-idle -o json
  kai explain queue team-a -f queues.yaml -f training.yaml
"""


@click.command(epilog=EXPLAIN_EPILOG, context_settings=CONTEXT_SETTINGS)
@click.argument("kind", type=click.Choice(["podgroup", "pod", "queue"]))
@click.argument("target")
@click.option(
    "-f",
    "--filename",
    "paths",
    multiple=True,
    required=True,
    metavar="FILE|DIR|-",
    help="YAML/JSON file or directory of manifests, as for kai sim (repeatable; - reads standard input).",
)
@click.option(
    "--cycles",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Scheduling cycles to run first (default 1).",
)
@click.option("--until-idle", is_flag=True, help="Cycle until nothing changes and no timed event is due.")
@click.option(
    "--max-time",
    default="24h",
    show_default=True,
    metavar="DURATION",
    help="Virtual-time bound for --until-idle, and how far ahead the estimated start is looked for.",
)
@click.option("--config", "config_path", default=None, metavar="FILE", help="Scheduler configuration YAML.")
@click.option("--start-time", default=None, metavar="RFC3339", help="RFC 3339 start of the virtual clock.")
@click.option(
    "-o",
    "--output",
    "fmt",
    type=click.Choice(["text", "json", "yaml"]),
    default="text",
    show_default=True,
    help="text: sentences for people; json/yaml: the kai explain contract's document.",
)
def explain(
    kind: str,
    target: str,
    paths: tuple[str, ...],
    cycles: int | None,
    until_idle: bool,
    max_time: str,
    config_path: str | None,
    start_time: str | None,
    fmt: str,
) -> None:
    """Explain a PodGroup or pod (NAMESPACE/NAME; a PodGroup also by its workload's name) or a queue (NAME).

    KIND is podgroup, pod or queue; TARGET names the object. The state explained is the one
    `kai sim` ends in with the same -f and cycle options.
    """
    simulation = simulate(
        paths=paths,
        cycles=cycles,
        until_idle=until_idle,
        max_time=max_time,
        actions_text=None,
        config_path=config_path,
        start_time=start_time,
    )
    horizon = parse_duration(max_time)
    try:
        doc: dict[str, Any]
        if kind == "queue":
            doc = explain_view.queue(simulation, target, horizon=horizon)
        elif kind == "pod":
            doc = explain_view.pod(simulation, _key(target), horizon=horizon)
        else:
            doc = explain_view.podgroup(
                simulation, explain_view.podgroup_key(simulation, _key(target)), horizon=horizon
            )
    except explain_view.NotFound as exc:
        fail(str(exc))
    except Exception as exc:  # an internal error: exit 1 with the trace, as kai sim does
        internal_error(exc)
    if fmt == "json":
        click.echo(json.dumps(doc, indent=2))
    elif fmt == "yaml":
        click.echo(yaml.safe_dump(doc, sort_keys=False), nl=False)
    elif kind == "queue":
        click.echo(queues.queue_text(doc))
    else:
        click.echo(render.podgroup_text(doc))
