"""What explaining costs: the reasons of every waiting job, and the dry cycles that verify fixes.

On target 1's cluster (N nodes x 8 GPUs, 20 queues, M pending pods in gangs, seed 0), after one full
cycle, this measures:

* the cycle itself (all actions);
* reasons and positions of every waiting job (no dry run): what `kai explain queue` pays;
* what `kai sim` (and `kai run`) add to each cycle for its conditions (`engine.explain_cycle`: the 16
  waiting jobs the cycle would try first, with a first verified fix while the cycle's dry runs last:
  at most 16, fewer on big clusters, `engine.cycle_dry_runs`);
* the same without dry runs: what `kai run` adds to a busy cycle (one that binds or evicts);
* one `kai explain podgroup` of the first waiting job with its full budget of dry cycles.

Each dry cycle is a full cycle on a changed copy of the snapshot, so a verified suggestion costs
about one cycle. `kai run` pays the per-cycle explaining only when the cluster changed since the
last explained cycle (`kai.kubernetes.runner.Scheduler._explain` reuses it otherwise). Times are CPU
seconds. Run with `python -m benchmarks.explain_bench --nodes 100 --pods 2000`; `python -m benchmarks
--only 9` reports the per-cycle figures.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from typing import Any

from benchmarks.clusters import NOW, Cluster, allocate_cluster
from kai.core.session import SchedulerConfig
from kai.core.snapshot_builder import build_snapshot
from kai.explain import engine, model, position
from kai.scheduler.cycle import run_actions


def _facts(cluster: Cluster) -> model.Facts:
    """The facts kai.cluster.explaining would give: user-written PodGroups and Queues to patch."""
    raw: dict[model.ObjectKey, Mapping[str, Any]] = {}
    for pg in cluster.podgroups:
        key = model.ObjectKey(
            api_version="scheduling.run.ai/v2alpha2", kind="PodGroup", namespace=pg.meta.namespace, name=pg.name
        )
        raw[key] = {
            "apiVersion": key.api_version,
            "kind": "PodGroup",
            "metadata": {"name": pg.name, "namespace": pg.meta.namespace},
            "spec": {"minMember": pg.min_member, "queue": pg.queue, "priorityClassName": pg.priority_class_name},
        }
    for q in cluster.queues:
        key = model.ObjectKey(api_version="scheduling.run.ai/v2", kind="Queue", namespace="", name=q.name)
        resources = {k: {"quota": r.quota, "limit": r.limit} for k, r in q.resources.items()}
        raw[key] = {
            "apiVersion": key.api_version,
            "kind": "Queue",
            "metadata": {"name": q.name},
            "spec": {"resources": resources},
        }
    workloads = {
        f"{pg.meta.namespace}/{pg.name}": model.WorkloadFacts(
            owner=None, podgroup_is_input=True, queue_label_missing=False, preemptibility_set=False
        )
        for pg in cluster.podgroups
    }
    classes = {
        name: model.PriorityClassFacts(name=name, value=pc.value, preempts=True)
        for name, pc in cluster.priority_classes.items()
    }
    return model.Facts(workloads=workloads, pod_owners={}, priority_classes=classes, objects=raw.get)


def measure(*, nodes: int, pods: int) -> dict[str, float]:
    cluster = allocate_cluster(nodes=nodes, pods=pods)
    built = build_snapshot(
        now=NOW,
        nodes=cluster.nodes,
        pods=cluster.pods,
        foreign_pods=[],
        podgroups=cluster.podgroups,
        queues=cluster.queues,
        priority_classes=cluster.priority_classes,
    )
    config = SchedulerConfig()
    t = time.process_time()
    session = run_actions(built.snapshot, config)
    cycle = time.process_time() - t
    ctx = engine.context(snapshot=built.snapshot, config=config, session=session, facts=_facts(cluster))
    waiting = [j for j in built.snapshot.jobs if position.waiting(session, j)]

    t = time.process_time()
    for job in waiting:
        engine.explain_job(ctx, job, budget=0)
    reasons = time.process_time() - t

    ctx = engine.context(snapshot=built.snapshot, config=config, session=session, facts=_facts(cluster), thorough=False)
    t = time.process_time()
    explained = engine.explain_cycle(ctx, engine.cycle_jobs(engine.waiting_jobs(session)))
    per_cycle = time.process_time() - t
    verified = sum(1 for e in explained.values() if e.suggestions)

    ctx = engine.context(snapshot=built.snapshot, config=config, session=session, facts=_facts(cluster), thorough=False)
    t = time.process_time()
    engine.explain_cycle(ctx, engine.cycle_jobs(engine.waiting_jobs(session)), dry_runs=0)
    busy_cycle = time.process_time() - t

    ctx = engine.context(snapshot=built.snapshot, config=config, session=session, facts=_facts(cluster))
    t = time.process_time()
    first = engine.explain_job(ctx, waiting[0], budget=engine.DRY_RUNS_PER_JOB) if waiting else None
    one = time.process_time() - t
    return {
        "nodes": nodes,
        "pods": pods,
        "jobs": len(built.snapshot.jobs),
        "waiting": len(waiting),
        "cycle": cycle,
        "reasons": reasons,
        "per_cycle": per_cycle,
        "busy_cycle": busy_cycle,
        "verified": verified,
        "dry_runs": engine.cycle_dry_runs(built.snapshot),
        "one": one,
        "suggestions": len(first.suggestions) if first is not None else 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--pods", type=int, nargs="+", default=[2000, 10000])
    args = parser.parse_args()
    print(
        "| nodes | pending pods | waiting jobs after the cycle | full cycle | reasons of all waiting jobs "
        "| per-cycle explaining (dry runs allowed) | kai explain podgroup (6 dry cycles) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for nodes, pods in zip(args.nodes, args.pods, strict=True):
        row = measure(nodes=nodes, pods=pods)
        print(
            f"| {nodes:,} | {pods:,} | {int(row['waiting']):,} | {row['cycle']:.2f} s | {row['reasons']:.2f} s "
            f"| {row['per_cycle']:.2f} s ({int(row['dry_runs'])}; {int(row['verified'])} fixes) | {row['one']:.2f} s "
            f"({int(row['suggestions'])} suggestions) |"
        )


if __name__ == "__main__":
    main()
