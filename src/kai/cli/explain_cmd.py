"""`kai explain`: why a workload waits, what would make it run, and when; or what a queue holds.

With `-f`, the state explained is the one `kai sim` ends in with the same flags. With
`--kubeconfig`, live objects are read, one dry cycle runs and nothing is written. The output is the
`kai explain` contract's JSON (`-o json`, or the same as YAML), or text that says the same things.
Exit 0 when explained; 2 for unusable input, credentials or cluster, or an object that does not exist.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import click
import yaml

from kai.api.fields import parse_duration
from kai.cli import CONTEXT_SETTINGS, json_text
from kai.cli.simulate import fail, internal_error, sim_options, simulate
from kai.cluster import explaining
from kai.explain import queues, render
from kai.sim import explain_view
from kai.sim.engine import SCHEDULER_NAME


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
    metavar="FILE|DIR|-",
    help="YAML/JSON file or directory of manifests, as for kai sim (repeatable; - reads standard input).",
)
@click.option(
    "--kubeconfig",
    default=None,
    metavar="PATH",
    help="Explain the live cluster of this kubeconfig instead of -f: one dry cycle, nothing written.",
)
@click.option("--context", "kube_context", default=None, metavar="NAME", help="The kubeconfig context to use.")
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
    kubeconfig: str | None,
    kube_context: str | None,
    cycles: int | None,
    until_idle: bool,
    max_time: str,
    config_path: str | None,
    start_time: str | None,
    fmt: str,
) -> None:
    """Explain a PodGroup or pod (NAMESPACE/NAME; a PodGroup also by its workload's name) or a queue (NAME).

    KIND is podgroup, pod or queue; TARGET names the object. With -f the state explained is the one
    `kai sim` ends in with the same -f and cycle options; with --kubeconfig it is the live cluster's.
    """
    if bool(paths) == bool(kubeconfig):
        raise click.UsageError("give either -f (manifests, as kai sim reads them) or --kubeconfig (a live cluster)")
    if kubeconfig and (cycles is not None or until_idle or start_time):
        raise click.UsageError("--cycles, --until-idle and --start-time apply to -f only")
    if kube_context and not kubeconfig:
        raise click.UsageError("--context needs --kubeconfig")
    target = target if kind == "queue" else _key(target)
    if kubeconfig:
        doc = _live(kind, target, kubeconfig=kubeconfig, kube_context=kube_context, config_path=config_path)
    else:
        doc = _simulated(
            kind,
            target,
            paths=paths,
            cycles=cycles,
            until_idle=until_idle,
            max_time=max_time,
            config_path=config_path,
            start_time=start_time,
        )
    if fmt == "json":
        click.echo(json_text.dumps(doc))
    elif fmt == "yaml":
        click.echo(yaml.safe_dump(doc, sort_keys=False), nl=False)
    elif kind == "queue":
        click.echo(queues.queue_text(doc))
    else:
        click.echo(render.podgroup_text(doc))


def _simulated(
    kind: str,
    target: str,
    *,
    paths: tuple[str, ...],
    cycles: int | None,
    until_idle: bool,
    max_time: str,
    config_path: str | None,
    start_time: str | None,
) -> dict[str, Any]:
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
        if kind == "queue":
            return explain_view.queue(simulation, target, horizon=horizon)
        if kind == "pod":
            return explain_view.pod(simulation, target, horizon=horizon)
        return explain_view.podgroup(simulation, explain_view.podgroup_key(simulation, target), horizon=horizon)
    except explain_view.NotFound as exc:
        fail(str(exc))
    except Exception as exc:  # an internal error: exit 1 with the trace, as kai sim does
        internal_error(exc)


def _live(
    kind: str, target: str, *, kubeconfig: str, kube_context: str | None, config_path: str | None
) -> dict[str, Any]:
    """Read the live cluster, run one dry cycle, explain; exit 2 naming what is unusable."""
    from kai.kubernetes import client as kube_client
    from kai.kubernetes import explain as live
    from kai.kubernetes.cache import ClusterCache
    from kai.kubernetes.informer import ResourceNotInstalled
    from kai.kubernetes.kubeconfig import KubeConfigError

    config, _, _ = sim_options(config_path, None, None, "24h")

    async def read() -> ClusterCache:
        async with kube_client.connect(kubeconfig_path=kubeconfig, context=kube_context) as client:
            return await live.read_cluster(client, scheduler_name=SCHEDULER_NAME)

    try:
        cache = asyncio.run(read())
    except KubeConfigError as exc:
        fail(str(exc))
    except ResourceNotInstalled as exc:
        fail(f"{exc}; install kai's CRDs (kai install crds) or point --kubeconfig at a cluster that has them")
    except (live.ClusterUnreadable, kube_client.ApiError, kube_client.ApiUnreachable) as exc:
        fail(f"cannot read the cluster of {kubeconfig}: {exc}")
    try:
        ctx = live.dry_cycle(cache, config, now=time.time())
        return live.explain_document(cache, ctx, kind, target)
    except explaining.NotFound as exc:
        fail(str(exc))
    except Exception as exc:  # an internal error: exit 1 with the trace
        internal_error(exc)
