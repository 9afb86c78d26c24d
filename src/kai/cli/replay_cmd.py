"""`kai replay`: trace-driven what-if for placement policies on the Alibaba `openb` GPU trace.

kai replay --nodes NODES.csv --pods PODS.csv [--load 1.3] [--seeds 10]
           [--policy binpack|spread|fragmentation ...] [-o table|json] [--plot FILE.png]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import click
import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

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


@click.command()
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
    help="Pod list CSV (openb format).",
)
@click.option(
    "--load",
    type=click.FloatRange(min=0.01),
    default=1.3,
    show_default=True,
    help="Arrivals stop once their GPU request reaches this multiple of the cluster's GPUs.",
)
@click.option(
    "--seeds", type=click.IntRange(min=1), default=10, show_default=True, help="Run seeds 0..N-1 and average."
)
@click.option(
    "--policy",
    "policies",
    multiple=True,
    type=click.Choice(runner.POLICIES),
    help="Placement policy; repeat to compare side by side (default: binpack).",
)
@click.option("-o", "--output", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--plot", "plot_path", default=None, help="Write a PNG of allocation ratio versus arrived load.")
def replay(
    nodes_path: str, pods_path: str, load: float, seeds: int, policies: tuple[str, ...], fmt: str, plot_path: str | None
) -> None:
    """Replay a GPU cluster trace through the real scheduling core and compare placement policies."""
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
    results: dict[str, list[runner.SeedResult]] = {p: [] for p in chosen}
    console = Console(stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not console.is_terminal,
        transient=True,
    ) as progress:
        for policy in chosen:
            for seed in range(seeds):
                bar = progress.add_task(f"{policy} seed {seed}", total=None)

                def advance(done: int, total: int, bar: Any = bar) -> None:
                    if done % 200 == 0 or done == total:
                        progress.update(bar, completed=done, total=total)

                results[policy].append(
                    runner.replay_seed(data=data, policy=policy, load=load, seed=seed, progress=advance)
                )
                progress.remove_task(bar)
    summary = summarize(results)
    if fmt == "json":
        click.echo(json.dumps(summary, indent=2))
    else:
        Console().print(_table(summary, load, seeds))
    if plot_path:
        try:
            plot(results, plot_path, load)
        except OSError as exc:  # checked up front; the directory may have gone since
            click.echo(f"error: --plot {plot_path}: cannot be written: {exc.strerror or exc}", err=True)
            sys.exit(2)
