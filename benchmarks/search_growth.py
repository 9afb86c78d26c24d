"""How target 2's cycle grows with the cluster, beside how much searching the cluster asks for.

The victim search simulates the scenarios KAI's search would simulate, and how many that is depends
on the cluster, not on kai: a growth in CPU seconds faster than the nodes can come from more
scenarios per attempt rather than from a dearer scenario. This prints, per size and seed, the
cycle's CPU seconds (the fastest of `--runs`, as target 2 measures it), the reclaim and preempt
attempts and the scenarios they simulated, and the CPU seconds per attempt and per scenario.

    python -m benchmarks.search_growth --nodes 500,1000,2000,3000 --seeds 0,1 [--runs 3]
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.clusters import reclaim_cluster
from benchmarks.targets import cycle_seconds
from kai.core.session import SchedulerConfig
from kai.scheduler.cycle import run_cycle


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.search_growth")
    parser.add_argument("--nodes", type=_ints, default=[500, 1000, 2000])
    parser.add_argument("--seeds", type=_ints, default=[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    print("| seed | nodes | CPU s | attempts | scenarios | scenarios per attempt | ms per attempt | ms per scenario |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for seed in args.seeds:
        for nodes in args.nodes:
            cluster = reclaim_cluster(nodes=nodes, seed=seed)
            _, cpu, _ = cycle_seconds(cluster, runs=args.runs)
            result = run_cycle(cluster.built().snapshot, SchedulerConfig())
            searched = [r for r in result.searches if r.action in ("reclaim", "preempt")]
            attempts = sum(r.solved + r.failed for r in searched)
            scenarios = sum(r.scenarios for r in searched)
            print(
                f"| {seed} | {nodes:,} | {cpu:.2f} | {attempts:,} | {scenarios:,} | {scenarios / max(1, attempts):.2f} "
                f"| {1000 * cpu / max(1, attempts):.2f} | {1000 * cpu / max(1, scenarios):.2f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
