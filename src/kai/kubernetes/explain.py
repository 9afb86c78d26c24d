"""`kai explain --kubeconfig`: why a workload on a live cluster waits, from one dry cycle.

The objects a cycle reads are listed once (the informers' first list, into the same cache `kai run`
keeps), pods the pod grouper has not reached yet get their PodGroup in memory only, one cycle runs on
the snapshot, and the engine explains it. Nothing is written: no PodGroup, no annotation, no
binding, no event. There are no durations to simulate with, so a waiting job's start is the
condition that starts it (`kai.cluster.explaining.live_estimates`), not a time.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kai.cluster import explaining, grouping
from kai.cluster.state import cycle_snapshot
from kai.core.model import TaskStatus
from kai.core.session import SchedulerConfig
from kai.explain import analysis, engine, render
from kai.kubernetes.cache import ClusterCache
from kai.kubernetes.client import KubeClient
from kai.kubernetes.informer import Informer
from kai.kubernetes.resources import OWNER_RESOURCES, REQUIRED_RESOURCES
from kai.scheduler.cycle import run_actions

PHASES = {TaskStatus.RUNNING: "Running", TaskStatus.RELEASING: "Terminating", TaskStatus.SUCCEEDED: "Succeeded"}


class _Into:
    """An informer handler that only fills the cache."""

    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache

    def on_add(self, obj: dict[str, Any]) -> None:
        self.cache.apply(obj)

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.cache.apply(new)

    def on_delete(self, obj: dict[str, Any]) -> None:
        self.cache.remove(obj)


class ClusterUnreadable(Exception):
    """The objects could not be listed in time (the API server is unreachable or refuses)."""


async def read_cluster(client: KubeClient, *, scheduler_name: str, timeout: float = 30.0) -> ClusterCache:
    """Every object a cycle reads, listed once, each kind within `timeout` seconds.

    A missing KAI CRD raises `ResourceNotInstalled`; a kind that cannot be listed in time (the
    informer keeps retrying an unreachable server) raises `ClusterUnreadable`.
    """
    cache = ClusterCache(scheduler_name=scheduler_name)
    for resource in (*REQUIRED_RESOURCES, *OWNER_RESOURCES):
        informer = Informer(client, resource, _Into(cache), optional=resource in OWNER_RESOURCES, list_timeout=timeout)
        running = asyncio.create_task(informer.run())
        synced = asyncio.create_task(informer.wait_synced())
        try:
            await asyncio.wait({running, synced}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if running.done():
                running.result()  # a required kind that is not installed raises here
            if not synced.done():
                raise ClusterUnreadable(f"could not list {resource.label} within {timeout:g}s")
        finally:
            for task in (running, synced):
                task.cancel()
            await asyncio.gather(running, synced, return_exceptions=True)
    return cache


def group_in_memory(cache: ClusterCache, *, queue_label_key: str, now: float) -> None:
    """Give every pending pod of ours without a PodGroup the one the pod grouper would (not written)."""
    config = grouping.config_for(queue_label_key, cache.priority_classes)
    for key in sorted(cache.pods):
        cached = cache.pods[key]
        if not cached.ours or cached.observed.status != TaskStatus.PENDING:
            continue
        if grouping.explicit_podgroup(cached.raw) is not None:
            continue
        outcome = grouping.derive(cached.raw, state=cache, config=config, now=now)
        if isinstance(outcome, grouping.Grouped):
            cache.assume_grouped(key, outcome.podgroup, outcome.subgroup)


def dry_cycle(cache: ClusterCache, config: SchedulerConfig, *, now: float) -> analysis.Context:
    """One cycle on the cluster as it is, its decisions kept in the session, never applied."""
    group_in_memory(cache, queue_label_key=config.queue_label_key, now=now)
    built = cycle_snapshot(cache, now=now, config=config)
    session = run_actions(built.snapshot, config)
    return engine.context(
        snapshot=built.snapshot, config=config, session=session, facts=explaining.facts(cache, config)
    )


def explain_document(cache: ClusterCache, ctx: analysis.Context, kind: str, target: str) -> dict[str, Any]:
    """The `kai explain` document of a PodGroup, pod or queue on the live cluster."""
    estimate = explaining.live_estimates
    if kind == "queue":
        return explaining.queue_document(ctx, target, estimate)
    if kind == "podgroup":
        return explaining.podgroup_document(ctx, explaining.podgroup_key(ctx.snapshot, target), estimate)
    namespace, name = target.split("/", 1)
    cached = cache.pods.get((namespace, name))
    if cached is None:
        problem = cache.problems.get(("Pod", namespace, name))
        if problem is not None:
            return render.refused_pod_document(namespace=namespace, name=name, problem=problem)
        raise explaining.NotFound(f"pod {target} does not exist")
    state = cache.pod_state((namespace, name))
    if not cached.ours:
        return render.foreign_pod_document(
            namespace=namespace,
            name=name,
            scheduler=cached.pod.scheduler_name,
            ours=cache.scheduler_name,
            phase=PHASES.get(state.status, "Pending"),
            node=state.node,
        )
    if state.podgroup is None:
        raise explaining.NotFound(f"pod {target} has no PodGroup yet and the pod grouper could not make one")
    doc = explaining.podgroup_document(ctx, f"{namespace}/{state.podgroup}", estimate)
    doc.update(kind="Pod", name=name)
    if state.status in PHASES:
        doc.update(
            phase=PHASES[state.status],
            reason=None,
            message=f"{PHASES[state.status].lower()} on {state.node}",
            evidence={"node": state.node},
            otherReasons=[],
            suggestions=[],
            position=None,
            estimatedStart=None,
            estimate="",
            estimateAfterFix=None,
        )
    return doc
