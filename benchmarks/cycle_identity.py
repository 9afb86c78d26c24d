"""Records what one full scheduling cycle decides on the benchmark clusters, to compare two commits.

A change made for speed must not change a decision. This runs `run_cycle` on the target-2 and
target-8 clusters at several sizes, seeds and queue counts, and under the settings that take other
paths through the victim search (a queue depth per action, a scenario budget, GPU spread, queue
minimum runtimes that guard victims), and writes one digest per case of the cycle's whole result:
placements, evictions with their messages, conditions, events, starts, stale marks, queue and job
figures, search reports and hopeless searches.

    python -m benchmarks.cycle_identity record before.json
    python -m benchmarks.cycle_identity record after.json [--large]
    python -m benchmarks.cycle_identity compare before.json after.json

`--large` adds the 1,000- and 2,000-node clusters of target 2 (a minute more).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import pathlib
import sys
from collections.abc import Callable, Iterator
from functools import partial

import msgspec

from benchmarks.clusters import Cluster, reclaim_cluster, starving_cluster
from kai.core.session import SchedulerConfig
from kai.scheduler.cycle import run_cycle

Case = tuple[str, Callable[[], Cluster], SchedulerConfig]


def _guarded(cluster: Cluster) -> Cluster:
    """Every other queue with minimum runtimes, so victim guards protect jobs (the unit-by-unit walk)."""
    queues = [
        msgspec.structs.replace(q, preempt_min_runtime=600.0, reclaim_min_runtime=600.0) if i % 2 else q
        for i, q in enumerate(cluster.queues)
    ]
    return dataclasses.replace(cluster, queues=queues)


def _guarded_cluster(*, seed: int) -> Cluster:
    return _guarded(reclaim_cluster(nodes=150, seed=seed))


def cases(*, large: bool) -> Iterator[Case]:
    plain = SchedulerConfig()
    for nodes in (60, 100, 300):
        yield f"reclaim-{nodes}", partial(reclaim_cluster, nodes=nodes), plain
    for seed in (1, 2, 3):
        yield f"reclaim-80-seed{seed}", partial(reclaim_cluster, nodes=80, seed=seed), plain
        yield f"reclaim-50-q7-seed{seed}", partial(reclaim_cluster, nodes=50, queues=7, seed=seed), plain
    for seed in (4, 5):
        yield f"reclaim-120-q3-seed{seed}", partial(reclaim_cluster, nodes=120, queues=3, seed=seed), plain
    yield "reclaim-200-q40", lambda: reclaim_cluster(nodes=200, queues=40), plain
    for nodes, seed in ((30, 0), (40, 0), (60, 2), (200, 0)):
        yield f"starving-{nodes}-seed{seed}", partial(starving_cluster, nodes=nodes, seed=seed), plain
    for seed in (1, 2):
        yield f"guarded-150-seed{seed}", partial(_guarded_cluster, seed=seed), plain
    yield "depth3-150", lambda: reclaim_cluster(nodes=150, seed=1), SchedulerConfig(queue_depth_per_action=3)
    yield (
        "budget-150",
        lambda: reclaim_cluster(nodes=150, seed=2),
        SchedulerConfig(max_action_scenarios={"default": 40, "preempt": 7}),
    )
    yield "spread-150", lambda: reclaim_cluster(nodes=150, seed=3), SchedulerConfig(gpu_placement="spread")
    if large:
        for nodes in (1000, 2000):
            yield f"reclaim-{nodes}", partial(reclaim_cluster, nodes=nodes), plain


def record(*, large: bool) -> dict[str, str]:
    out = {}
    for name, make, config in cases(large=large):
        result = run_cycle(make().built().snapshot, config)
        out[name] = hashlib.sha256(repr(result).encode()).hexdigest()
        print(f"{name}: {out[name][:16]} ({len(result.placements)} placements, {len(result.evictions)} evictions)")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cycle_identity")
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("path", type=pathlib.Path)
    rec.add_argument("--large", action="store_true")
    cmp = sub.add_parser("compare")
    cmp.add_argument("before", type=pathlib.Path)
    cmp.add_argument("after", type=pathlib.Path)
    args = parser.parse_args(argv)
    if args.command == "record":
        args.path.write_text(json.dumps(record(large=args.large), indent=1) + "\n")
        return 0
    before, after = json.loads(args.before.read_text()), json.loads(args.after.read_text())
    differ = sorted(name for name in before.keys() & after.keys() if before[name] != after[name])
    for name in differ:
        print(f"differs: {name}")
    print(f"{len(before.keys() & after.keys()) - len(differ)} cases identical, {len(differ)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
