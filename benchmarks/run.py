"""One command for every performance target: `python -m benchmarks`.

    python -m benchmarks                      # targets 1, 2, 7, 8 at the issue's sizes (3-6: needs kai run)
    python -m benchmarks --smoke              # the same at small sizes, a few seconds (CI)
    python -m benchmarks --only 2,8           # some targets
    python -m benchmarks --growth 500,5000,20000 --plot docs/performance-growth.png
                                              # per-action cost as the cluster grows, table and plot
    python -m benchmarks --growth 500,5000,20000 --clusters allocate
                                              # the same on the allocate cluster only
    python -m benchmarks --sim-growth 500,5000,20000 --sim-plot docs/performance-sim.png
                                              # kai sim's phases on target 1's input as it grows

It prints a table: target, what was measured, the figure, the target's goal, the ratio to an anchor
measured in the same run where there is one, and whether the goal is met. Exit status 0 whether or not
goals are met (speed is reported, never asserted).
"""

from __future__ import annotations

import argparse

from benchmarks import growth, sim_phases
from benchmarks.targets import FULL, SMOKE, TARGETS, Figure, machine


def _table(figures: list[Figure]) -> str:
    lines = ["| target | measured | figure | goal | anchor | met |", "|---|---|---|---|---|---|"]
    for f in figures:
        met = "" if f.met is None else ("yes" if f.met else "no")
        lines.append(f"| {f.target} | {f.what} | {f.figure} | {f.goal} | {f.anchor} | {met} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="small sizes (a few seconds), for CI")
    parser.add_argument("--only", default="", help="comma-separated targets to run (default: all)")
    parser.add_argument("--growth", default="", help="comma-separated node counts for the per-action growth study")
    parser.add_argument("--plot", default="", help="PNG file for the growth study's plot")
    parser.add_argument(
        "--clusters", default="allocate,busy", help="the growth study's clusters: allocate, busy or both"
    )
    parser.add_argument("--sim-growth", default="", help="comma-separated node counts for kai sim's phases")
    parser.add_argument("--sim-plot", default="", help="PNG file for the kai sim phases' plot")
    args = parser.parse_args(argv)
    sizes = SMOKE if args.smoke else FULL
    print(f"machine: {machine()}; times are CPU seconds of the process doing the work")
    if args.sim_growth:
        sim_rows = sim_phases.study([int(n) for n in args.sim_growth.split(",")])
        print(sim_phases.table(sim_rows))
        if args.sim_plot:
            sim_phases.plot(sim_rows, args.sim_plot)
            print(f"plot: {args.sim_plot}")
    if args.growth:
        clusters = tuple(c.strip() for c in args.clusters.split(",") if c.strip())
        unknown_clusters = [c for c in clusters if c not in growth.CLUSTERS]
        if unknown_clusters:
            parser.error(f"unknown cluster(s) {', '.join(unknown_clusters)}; known: {', '.join(growth.CLUSTERS)}")
        rows = growth.study([int(n) for n in args.growth.split(",")], clusters=clusters)
        print(growth.table(rows))
        if args.plot:
            growth.plot(rows, args.plot)
            print(f"plot: {args.plot}")
    if (args.growth or args.sim_growth) and not args.only:
        return
    wanted = [t.strip() for t in args.only.split(",") if t.strip()] or list(TARGETS)
    unknown = [t for t in wanted if t not in TARGETS]
    if unknown:
        parser.error(f"unknown target(s) {', '.join(unknown)}; known: {', '.join(TARGETS)}")
    figures: list[Figure] = []
    for target in wanted:
        figures += TARGETS[target](sizes)
    print(_table(figures))


if __name__ == "__main__":
    main()
