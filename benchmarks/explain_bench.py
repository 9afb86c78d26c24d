"""What explaining costs: the reasons of every waiting job, and the dry cycles that verify fixes.

On target 1's cluster (N nodes x 8 GPUs, 20 queues, M pending pods in gangs of up to 64 pods, or
of up to `--largest` for a cluster where thousands of jobs wait; seed 0), after one full cycle,
this measures:

* the cycle itself (all actions);
* reasons and positions of every waiting job (no dry run): what `kai explain queue` pays;
* what every cycle of `kai sim` and `kai run` adds for its conditions: every waiting job's reasons
  (`engine.explain_cycle` with no dry run; a busy `kai run` cycle, one that binds or evicts, pays
  only this);
* what a `kai run` cycle at rest adds: those reasons and its budget of dry runs
  (`CycleExplainer.dry_runs`: one at least, more on small clusters, each about a cycle), and how many
  cycles at rest on the unchanged cluster it takes until every waiting job carries its first fix
  or is known to have none (the later ones explain only the jobs still without, as
  `kai.cluster.explaining.CycleExplainer` does; they run until then or for `--rest-seconds` of CPU,
  and the rest is estimated at the pace of those run);
* one `kai explain podgroup` of the first waiting job with its full budget of dry cycles;
* one `kai explain queue` of that job's queue (its waiting jobs only; estimates as on a live
  cluster, where no simulation runs forward).

With `--at-rest NODES PODS`, fixes on a cluster at rest (`too_large_cluster`: every pod asks more
GPUs than a node has, so every waiting group has a fix to verify and the cycle decides nothing): kai
sim's explaining of its cycle at rest (`engine.rest_dry_runs`), and kai run's cycles at rest until
every group carries its fix (`measure_at_rest`).

A cycle on an unchanged cluster whose waiting jobs all have their fix reuses the last explanations
and pays nothing. Times are CPU seconds. Run with `python -m benchmarks.explain_bench --nodes 100
--pods 2000`; `python -m benchmarks --only 9` reports the per-cycle figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from benchmarks.clusters import Cluster, allocate_cluster
from kai.cluster import explaining
from kai.core.model import Job, Snapshot
from kai.core.session import SchedulerConfig
from kai.explain import analysis, dryruns, engine, model
from kai.scheduler.cycle import run_actions


def _facts(cluster: Cluster, *, pods: bool = False) -> model.Facts:
    """The facts kai.cluster.explaining would give: user-written PodGroups and Queues to patch, and with
    `pods` the bare pods (their own top owners)."""
    raw: dict[model.ObjectKey, Mapping[str, Any]] = {}
    owners: dict[str, model.ObjectKey] = {}
    for state in cluster.pods if pods else []:
        pod = state.pod
        key = model.ObjectKey(api_version="v1", kind="Pod", namespace=pod.meta.namespace, name=pod.meta.name)
        requests = {k: str(v) for k, v in pod.requests.items()}
        raw[key] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod.meta.name, "namespace": pod.meta.namespace},
            "spec": {"containers": [{"name": "main", "image": "trainer", "resources": {"requests": requests}}]},
        }
        owners[pod.key] = key
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
    return model.Facts(workloads=workloads, pod_owners=owners, priority_classes=classes, objects=raw.get)


def _cycles_at_rest(
    snapshot: Snapshot,
    waiting: list[Job],
    cycle_context: Callable[[], analysis.Context],
    *,
    rest_seconds: float,
    at_least: int,
) -> tuple[explaining.CycleExplainer, list[float], engine.CycleExplanations]:
    """kai run's cycles at rest on one cluster (the first explains every waiting job, the next only those
    whose fix is still unknown), until every fix is known or `rest_seconds` of CPU (at least `at_least`
    cycles) are spent: the explainer as they leave it, each cycle's CPU seconds and the last cycle's
    explanations."""
    explainer = explaining.CycleExplainer()
    rest: list[float] = []
    dry_runs = explainer.dry_runs(snapshot, busy=False)
    while len(rest) < at_least or sum(rest) < rest_seconds:
        standing, chosen = explainer.plan(0, waiting, busy=False)
        if standing is not None:
            break
        t = time.process_time()
        found = engine.explain_cycle(cycle_context(), chosen, dry_runs=dry_runs, known=explainer.fixes.known())
        explainer.record(0, waiting, chosen, found)
        rest.append(time.process_time() - t)
    assert explainer.last is not None
    return explainer, rest, explainer.last[2]


def measure(*, nodes: int, pods: int, largest: int = 64, rest_seconds: float = 10.0) -> dict[str, float]:
    cluster = allocate_cluster(nodes=nodes, pods=pods, largest=largest)
    built = cluster.built()
    config = SchedulerConfig()
    facts = _facts(cluster)
    t = time.process_time()
    session = run_actions(built.snapshot, config)
    cycle = time.process_time() - t
    ctx = engine.context(snapshot=built.snapshot, config=config, session=session, facts=facts)
    waiting = engine.waiting_jobs(session)

    t = time.process_time()
    for job in waiting:
        engine.explain_job(ctx, job, budget=0)
    reasons = time.process_time() - t

    def cycle_context() -> analysis.Context:
        return engine.context(snapshot=built.snapshot, config=config, session=session, facts=facts, thorough=False)

    t = time.process_time()
    engine.explain_cycle(cycle_context(), waiting, dry_runs=0)
    busy_cycle = time.process_time() - t

    # cycles at rest on the same cluster, as kai run's: the first explains every waiting job, the next
    # only those whose fix is still unknown
    explainer, rest, last = _cycles_at_rest(
        built.snapshot, waiting, cycle_context, rest_seconds=rest_seconds, at_least=2
    )
    done = [search for search in explainer.fixes.searches.values() if search.done]
    sought = len(done)
    fixed = sum(1 for search in done if search.found is not None)
    per_cycle_sought = sought / max(1, len(rest))

    t = time.process_time()
    first = engine.explain_job(ctx, waiting[0], budget=engine.DRY_RUNS_PER_JOB) if waiting else None
    one = time.process_time() - t

    # kai explain queue of the first waiting job's queue, with a live cluster's estimates (the
    # simulator's simulate forward, a cost of their own): its waiting jobs' reasons and places, its
    # view's dry runs, the fixes the cycles at rest found for the rest
    known = last.explanations
    t = time.process_time()
    shown = 0
    if waiting:
        doc = explaining.queue_document(ctx, waiting[0].queue_name, explaining.live_estimates, known=known)
        shown = len(doc["waiting"])
    queue_view = time.process_time() - t
    return {
        "nodes": nodes,
        "pods": pods,
        "jobs": len(built.snapshot.jobs),
        "waiting": len(waiting),
        "cycle": cycle,
        "reasons": reasons,
        "busy_cycle": busy_cycle,
        "first_rest": rest[0] if rest else 0.0,
        "later_rest": sum(rest[1:]) / max(1, len(rest) - 1) if len(rest) > 1 else 0.0,
        "rest_cycles": len(rest),
        "converged": 0.0 if last.unsought else 1.0,
        "dry_runs": explaining.CycleExplainer.dry_runs(built.snapshot, busy=False),
        "sought": sought,
        "verified": fixed,
        "unsought": len(last.unsought),
        # cycles at rest until every waiting job was looked at, at the pace of those run
        "to_converge": len(rest) if not last.unsought else len(rest) + len(last.unsought) / max(per_cycle_sought, 1e-9),
        "one": one,
        "suggestions": len(first.suggestions) if first is not None else 0,
        "queue_view": queue_view,
        "queue_waiting": shown,
    }


def too_large_cluster(*, nodes: int, pods: int) -> Cluster:
    """Target 1's cluster with every pod asking 8 GPUs more than its gang's size (9, 10, 12 or 16 on
    nodes of 8): nothing can run, so a cycle decides nothing (at rest), and every waiting group has a
    fix to verify ("reduce to 8 GPUs per pod"): twins, one kind per queue, gang size and pod size."""
    cluster = allocate_cluster(nodes=nodes, pods=pods, largest=8)
    larger = []
    for state in cluster.pods:
        requests = dict(state.pod.requests)
        requests["nvidia.com/gpu"] += 8.0
        larger.append(msgspec.structs.replace(state, pod=msgspec.structs.replace(state.pod, requests=requests)))
    return dataclasses.replace(cluster, pods=larger)


def measure_at_rest(*, nodes: int, pods: int, rest_seconds: float = 10.0) -> dict[str, float]:
    """What fixes cost on a cluster at rest (`too_large_cluster`): the cycle; kai sim's explaining of
    it (`rest_dry_runs`, twins sharing their dry runs); kai run's cycles at rest (one dry run each
    above 2,000 pods) until every waiting group carries its fix, run until then or for `rest_seconds`
    of CPU, the rest estimated at the pace of those run."""
    cluster = too_large_cluster(nodes=nodes, pods=pods)
    built = cluster.built()
    config = SchedulerConfig()
    facts = _facts(cluster, pods=True)
    t = time.process_time()
    session = run_actions(built.snapshot, config)
    cycle = time.process_time() - t
    waiting = engine.waiting_jobs(session)

    def cycle_context() -> analysis.Context:
        return engine.context(snapshot=built.snapshot, config=config, session=session, facts=facts, thorough=False)

    budget = engine.rest_dry_runs(built.snapshot)
    t = time.process_time()
    sim = engine.explain_cycle(cycle_context(), waiting, dry_runs=budget)
    sim_cost = time.process_time() - t
    sim_fixed = sum(1 for e in sim.explanations.values() if e.suggestions)

    explainer, rest, last = _cycles_at_rest(
        built.snapshot, waiting, cycle_context, rest_seconds=rest_seconds, at_least=0
    )
    fixed = sum(1 for search in explainer.fixes.searches.values() if search.found is not None)
    per_cycle = fixed / max(1, len(rest))
    return {
        "nodes": nodes,
        "pods": pods,
        "waiting": len(waiting),
        "cycle": cycle,
        "at_rest": float(dryruns.at_rest(session)),
        "sim_dry_runs": budget,
        "sim_cost": sim_cost,
        "sim_fixed": sim_fixed,
        "run_cycles": len(rest),
        "run_cost": sum(rest) / max(1, len(rest)),
        "run_fixed": fixed,
        "converged": 0.0 if last.unsought else 1.0,
        "to_converge": len(rest) if not last.unsought else len(rest) + len(last.unsought) / max(per_cycle, 1e-9),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[100, 1000, 1000])
    parser.add_argument("--pods", type=int, nargs="+", default=[2000, 10000, 20000])
    parser.add_argument("--largest", type=int, nargs="+", default=[64, 64, 8], help="largest gang, per size")
    parser.add_argument("--rest-seconds", type=float, default=10.0, help="CPU seconds of cycles at rest to run")
    parser.add_argument(
        "--at-rest",
        type=int,
        nargs=2,
        action="append",
        metavar=("NODES", "PODS"),
        help="also measure fixes on a cluster at rest of this size (repeatable)",
    )
    args = parser.parse_args()
    print(
        "| nodes | pending pods | waiting jobs | full cycle | reasons of all waiting jobs "
        "| every cycle: reasons of all waiting jobs | a cycle at rest: dry runs, first / later cycles "
        "| jobs looked at / with a fix | cycles at rest until all are | kai explain podgroup (6 dry cycles) "
        "| kai explain queue |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for nodes, pods, largest in zip(args.nodes, args.pods, args.largest, strict=True):
        row = measure(nodes=nodes, pods=pods, largest=largest, rest_seconds=args.rest_seconds)
        cycle = max(row["cycle"], 1e-9)
        converge = (
            f"{int(row['to_converge'])}"
            if row["converged"]
            else f"about {row['to_converge']:,.0f} ({int(row['rest_cycles'])} run)"
        )
        print(
            f"| {nodes:,} | {pods:,} | {int(row['waiting']):,} | {row['cycle']:.2f} s | {row['reasons']:.2f} s "
            f"| {row['busy_cycle']:.2f} s ({row['busy_cycle'] / cycle:.2f}x) "
            f"| {int(row['dry_runs'])}: {row['first_rest']:.2f} s ({row['first_rest'] / cycle:.2f}x) / "
            f"{row['later_rest']:.2f} s ({row['later_rest'] / cycle:.2f}x) "
            f"| {int(row['sought'])} / {int(row['verified'])} | {converge} "
            f"| {row['one']:.2f} s ({int(row['suggestions'])} suggestions) "
            f"| {row['queue_view']:.2f} s ({int(row['queue_waiting'])} waiting jobs) |"
        )
    if args.at_rest:
        print()
        print(
            "| nodes | pods (none can run) | waiting groups | the cycle | kai sim at rest: dry runs, cost, "
            "groups with a fix | kai run at rest: cost per cycle, cycles until every group has its fix |"
        )
        print("|---:|---:|---:|---:|---:|---:|")
        for nodes, pods in args.at_rest:
            print(at_rest_row(measure_at_rest(nodes=nodes, pods=pods, rest_seconds=args.rest_seconds)))


def at_rest_row(row: dict[str, float]) -> str:
    converge = f"{row['to_converge']:,.0f}" + (
        "" if row["run_fixed"] >= row["waiting"] else f" ({int(row['run_cycles'])} run)"
    )
    return (
        f"| {int(row['nodes']):,} | {int(row['pods']):,} | {int(row['waiting']):,} | {row['cycle']:.2f} s "
        f"| {int(row['sim_dry_runs'])}: {row['sim_cost']:.2f} s, {int(row['sim_fixed']):,} "
        f"| {row['run_cost']:.2f} s, {converge} |"
    )


if __name__ == "__main__":
    main()
