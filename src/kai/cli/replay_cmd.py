"""`kai replay`: trace-driven what-if for placement policies on the Alibaba `openb` GPU trace.

kai replay --nodes NODES.csv --pods PODS.csv [--load 1.3] [--seeds 10 | --seed N ...]
           [--policy binpack|spread|fragmentation ...] [-o table|json] [--plot FILE.png]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import click
import numpy as np
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from kai.cli import CONTEXT_SETTINGS
from kai.replay import runner, trace


def _seed_figures(result: runner.SeedResult) -> dict[str, Any]:
    m = result.metrics
    return {
        "seed": result.seed,
        "allocationRatioAt100": m.allocation_at_full_load_pct,
        "allocationRatioFinal": m.final_allocation_pct,
        "unallocatedGpusFinal": m.unallocated_gpus,
        "fragmentedIdlePct": m.fragmented_idle_pct,
        "arrivedPct": m.arrived_pct,
        "arrivals": m.arrivals,
        "unplaced": m.unplaced,
    }


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def summarize(results: dict[str, list[runner.SeedResult]]) -> dict[str, Any]:
    policies: dict[str, Any] = {}
    for policy, seeds in results.items():
        figures = [_seed_figures(r) for r in seeds]
        policies[policy] = {
            "allocationRatioAt100": _mean([f["allocationRatioAt100"] for f in figures]),
            "allocationRatioFinal": _mean([f["allocationRatioFinal"] for f in figures]),
            "unallocatedGpusFinal": _mean([f["unallocatedGpusFinal"] for f in figures]),
            "fragmentedIdlePct": _mean([f["fragmentedIdlePct"] for f in figures]),
            "seeds": figures,
        }
    return {"policies": policies}


def plot(results: dict[str, list[runner.SeedResult]], path: str, load: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = np.linspace(0.0, load * 100.0, 261)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for policy, seeds in results.items():
        curves = [np.interp(grid, r.curve.arrived_pct, r.curve.allocated_pct) for r in seeds]
        ax.plot(grid, np.mean(curves, axis=0), label=f"{policy} ({len(seeds)} seeds)")
    ax.plot(grid, np.minimum(grid, 100.0), color="grey", linestyle=":", label="ideal")
    ax.set_xlabel("arrived GPU request (% of cluster GPUs)")
    ax.set_ylabel("GPU allocation ratio (%)")
    ax.set_title("Alibaba openb replay: GPU allocation as arrivals grow")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_path_problem(path: str) -> str | None:
    """Why a plot cannot be written to `path` (checked before the replay runs), or None."""
    target = Path(path)
    if target.is_dir():
        return "is a directory; give a file name such as allocation.png"
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        return f"the directory {parent} does not exist"
    if not os.access(parent, os.W_OK):
        return f"the directory {parent} is not writable"
    if target.exists() and not os.access(target, os.W_OK):
        return "exists and is not writable"
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    formats = sorted(FigureCanvasAgg.get_supported_filetypes())
    suffix = target.suffix.lstrip(".").lower()
    if suffix not in formats:
        return f"the file name must end in one of {', '.join('.' + f for f in formats)} (it picks the image format)"
    return None


def _table(summary: dict[str, Any], load: float, seeds: int) -> Table:
    table = Table(
        title=f"GPU allocation ratio, load {load:g}, {seeds} seed(s), means", title_justify="left", header_style="bold"
    )
    for col in ("POLICY", "AT 100% ARRIVED", "FINAL", "UNALLOCATED GPUS", "FRAGMENTED % OF IDLE"):
        table.add_column(col, justify="right" if col != "POLICY" else "left")
    for policy, figures in summary["policies"].items():
        at100 = figures["allocationRatioAt100"]
        table.add_row(
            policy,
            f"{at100:.2f}%" if at100 is not None else "n/a",
            f"{figures['allocationRatioFinal']:.2f}%",
            f"{figures['unallocatedGpusFinal']:.1f}",
            f"{figures['fragmentedIdlePct']:.1f}%",
        )
    return table


FRAGMENTED_NOTE = (
    "FRAGMENTED % OF IDLE: of the GPU capacity left idle at the end, the share that a task drawn from "
    "the trace's usual task shapes could not use (too small a slice of a device, or no CPU left on its "
    "node): Weng et al.'s GPU fragmentation divided by the idle GPUs."
)

REPLAY_EPILOG = f"""\b
Examples:
  kai replay --nodes openb_node_list_gpu_node.csv \\
             --pods openb_pod_list_default.csv
  kai replay --nodes NODES.csv --pods PODS.csv --seed 3 \\
             --policy binpack --policy fragmentation
  kai replay --nodes openb_node_list_gpu_node.csv \\
             --pods openb_pod_list_default.csv --policy binpack \\
             --policy fragmentation --policy spread \\
             --plot docs/replay-openb-default.png

\b
The trace: Alibaba's clusterdata cluster-trace-gpu-v2023 (openb_*.csv).
Columns of the table (means over the seeds):
  AT 100% ARRIVED       GPU allocation ratio when the arrived GPU request
                        first reaches the cluster's GPUs
  FINAL                 the ratio once every pod has arrived
  UNALLOCATED GPUS      GPUs left free at the end
{textwrap.indent(textwrap.fill(FRAGMENTED_NOTE, width=72), "  ")}
Progress goes to standard error: a bar on a terminal, else one line per
finished run.
"""


def _runs(policies: list[str], seeds: list[int]) -> list[tuple[str, int]]:
    return [(policy, seed) for policy in policies for seed in seeds]


def _finished_line(policy: str, seed: int, result: runner.SeedResult, seconds: float, done: int, total: int) -> str:
    m = result.metrics
    at100 = f"{m.allocation_at_full_load_pct:.2f}%" if m.allocation_at_full_load_pct is not None else "n/a"
    return (
        f"[{done}/{total}] {policy} seed {seed}: {at100} at 100% arrived, "
        f"{m.final_allocation_pct:.2f}% final ({seconds:.1f} s)"
    )


def run_all(
    data: trace.Trace, *, policies: list[str], seeds: list[int], load: float
) -> dict[str, list[runner.SeedResult]]:
    """Every (policy, seed) run, with progress on standard error: a rich bar across all runs on a
    terminal, else one line per finished run."""
    results: dict[str, list[runner.SeedResult]] = {p: [] for p in policies}
    runs = _runs(policies, seeds)
    console = Console(stderr=True, highlight=False)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not console.is_terminal,
        transient=True,
    ) as progress:
        overall = progress.add_task("all runs", total=len(runs))
        for done, (policy, seed) in enumerate(runs, start=1):
            bar = progress.add_task(f"{policy} seed {seed}", total=None)

            def advance(placed: int, total: int, bar: Any = bar) -> None:
                if placed % 200 == 0 or placed == total:
                    progress.update(bar, completed=placed, total=total)

            started = time.monotonic()
            result = runner.replay_seed(data=data, policy=policy, load=load, seed=seed, progress=advance)
            results[policy].append(result)
            progress.remove_task(bar)
            progress.advance(overall)
            line = _finished_line(policy, seed, result, time.monotonic() - started, done, len(runs))
            if console.is_terminal:
                progress.console.print(line)
            else:
                click.echo(line, err=True)
    return results


@click.command(epilog=REPLAY_EPILOG, context_settings=CONTEXT_SETTINGS)
@click.option(
    "--nodes",
    "nodes_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Node list CSV (openb format: sn, cpu_milli, memory_mib, gpu, model).",
)
@click.option(
    "--pods",
    "pods_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Pod list CSV (openb format: name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, ...).",
)
@click.option(
    "--load",
    type=click.FloatRange(min=0.01),
    default=1.3,
    show_default=True,
    help="Arrivals stop once their GPU request reaches this multiple of the cluster's GPUs.",
)
@click.option(
    "--seeds",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    metavar="N",
    help="Run seeds 0..N-1 and average them.",
)
@click.option(
    "--seed",
    "chosen_seeds",
    multiple=True,
    type=click.IntRange(min=0),
    metavar="N",
    help="Run this seed only (repeatable); replaces --seeds.",
)
@click.option(
    "--policy",
    "policies",
    multiple=True,
    type=click.Choice(runner.POLICIES),
    help="Placement policy; repeat to compare side by side (default: binpack).",
)
@click.option(
    "-o",
    "--output",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="table: means per policy; json: means and every seed's figures.",
)
@click.option(
    "--plot",
    "plot_path",
    default=None,
    metavar="FILE",
    help="Write a PNG of the allocation ratio versus the arrived load, one curve per policy.",
)
@click.pass_context
def replay(
    ctx: click.Context,
    nodes_path: str,
    pods_path: str,
    load: float,
    seeds: int,
    chosen_seeds: tuple[int, ...],
    policies: tuple[str, ...],
    fmt: str,
    plot_path: str | None,
) -> None:
    """Replay a GPU cluster trace through the real scheduling core and compare placement policies.

    Follows the published protocol of the FGD paper (Weng et al., USENIX ATC '23) on Alibaba's
    openb trace: nodes from the node list, pods sampled with a seed until their GPU request reaches
    --load times the cluster's GPUs; pods only arrive.
    """
    if chosen_seeds and ctx.get_parameter_source("seeds") is not click.core.ParameterSource.DEFAULT:
        raise click.UsageError("--seed and --seeds exclude each other")
    if plot_path:
        problem = plot_path_problem(plot_path)
        if problem:
            click.echo(f"error: --plot {plot_path}: {problem}", err=True)
            sys.exit(2)
    try:
        data = trace.Trace(nodes=trace.read_nodes(Path(nodes_path)), pods=trace.read_pods(Path(pods_path)))
    except trace.TraceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    chosen = list(dict.fromkeys(policies)) or ["binpack"]
    seed_list = list(dict.fromkeys(chosen_seeds)) or list(range(seeds))
    results = run_all(data, policies=chosen, seeds=seed_list, load=load)
    summary = summarize(results)
    if fmt == "json":
        click.echo(json.dumps(summary, indent=2))
    else:
        console = Console(highlight=False)
        console.print(_table(summary, load, len(seed_list)))
        console.print(FRAGMENTED_NOTE, soft_wrap=False)
    if plot_path:
        try:
            plot(results, plot_path, load)
        except OSError as exc:  # checked up front; the directory may have gone since
            click.echo(f"error: --plot {plot_path}: cannot be written: {exc.strerror or exc}", err=True)
            sys.exit(2)
