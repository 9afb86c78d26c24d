"""`kai sim` output: the JSON document of the sim contract, and tables a person reads.

The JSON is built from the end state of the simulation; lists are sorted so that the same input
always prints byte-identical output.
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Mapping
from typing import Any

import numpy as np

from kai.api.fields import format_timestamp
from kai.api.podgroup import format_duration
from kai.api.priority import DEFAULT_PRIORITY_CLASS, PREEMPTIBLE_BELOW
from kai.api.queue import QUEUE_RESOURCE_KEYS
from kai.cluster.effects import UNSCHEDULABLE_ON_NODE_POOL, Condition
from kai.core.decisions import QueueFigures
from kai.core.model import ALIVE, TaskStatus
from kai.core.resources import MB
from kai.sim.engine import Simulation
from kai.sim.state import SimPod

PHASES = {
    TaskStatus.PENDING: "Pending",
    TaskStatus.ALLOCATED: "Running",
    TaskStatus.PIPELINED: "Pipelined",
    TaskStatus.RUNNING: "Running",
    TaskStatus.RELEASING: "Releasing",
    TaskStatus.SUCCEEDED: "Succeeded",
    TaskStatus.FAILED: "Failed",
}


BOUND = frozenset({TaskStatus.RUNNING, TaskStatus.RELEASING})  # a pod on its node: node, devices and env shown
WAITING = frozenset({TaskStatus.PENDING, TaskStatus.PIPELINED})  # a pod not yet running: its reason shown


_pod_order = operator.attrgetter("pod.meta.namespace", "pod.meta.name")  # (namespace, name)

# A PodGroup's pods counted by status: running (alive), pending, succeeded, failed; a releasing pod in none.
_COUNTED_AS = {status: 0 for status in ALIVE} | {
    TaskStatus.PENDING: 1,
    TaskStatus.SUCCEEDED: 2,
    TaskStatus.FAILED: 3,
    TaskStatus.RELEASING: 4,
}


def _pods_in_order(sim: Simulation) -> list[SimPod]:
    """The pods by namespace, then name, without sorting them again: the store keeps its keys
    (`namespace/name`) in order, which holds each namespace's pods together and in name order; only
    whole namespaces may be out of order (`a-b/x` sorts before `a/x`). With a `/` in a namespace or a
    name (every key would hold one) that no longer holds, and the pods are sorted."""
    keys = sim.pod_keys()
    if "".join(keys).count("/") != len(keys):
        return sorted(sim.pods.values(), key=_pod_order)
    runs: list[tuple[str, int, int]] = []  # (namespace, first, last + 1) in keys
    start = 0
    while start < len(keys):
        namespace = keys[start].partition("/")[0]
        end = bisect.bisect_left(keys, namespace + "0", start)  # "0" follows "/"
        runs.append((namespace, start, end))
        start = end
    ordered = sim.ordered_pods()  # (key, pod) in the order of `keys`
    return [pod for _, start, end in sorted(runs) for _, pod in ordered[start:end]]


def _sorted_map(mapping: Mapping[str, str]) -> dict[str, str]:
    """The map with its keys in order. Most maps are in order already (most hold one key or none, and
    Kubernetes writes them sorted): seeing that costs less than sorting them."""
    if len(mapping) > 1:
        keys = list(mapping)
        if keys != sorted(keys):
            return dict(sorted(mapping.items()))
    return dict(mapping)


def _num(value: float) -> float:
    return float(round(value, 9))


NO_FIGURES = QueueFigures(
    fair_share=(0.0, 0.0, 0.0),
    allocated=(0.0, 0.0, 0.0),
    allocated_non_preemptible=(0.0, 0.0, 0.0),
    requested=(0.0, 0.0, 0.0),
)  # a queue the last cycle did not see (its parent chain is broken)


def _conditions(condition: Condition | None) -> list[dict[str, Any]]:
    """KAI's `schedulingConditions` entry: the cycle's reason, the explanation's message, and under
    `reasons` every reason that holds, dominant first (KAI's structured reasons)."""
    if condition is None:
        return []
    return [
        {
            "type": UNSCHEDULABLE_ON_NODE_POOL,
            "reason": condition.reason,
            "message": condition.message,
            "reasons": [{"reason": reason, "message": message} for reason, message in condition.explained],
        }
    ]


def _queue_vector(values: np.ndarray | tuple[float, float, float]) -> dict[str, float]:
    gpu, cpu, memory = (float(v) for v in values)
    return {"gpu": _num(gpu), "cpu": _num(cpu), "memory": _num(memory / MB if memory != -1 else -1.0)}


def build(sim: Simulation) -> dict[str, Any]:
    pods_out = []
    # (namespace, name) -> the PodGroup's queue and its pods counted by status (`_COUNTED_AS`)
    group_of: dict[tuple[str, str], tuple[str, list[int]]] = {
        k: (g.podgroup.queue, [0, 0, 0, 0, 0]) for k, g in sim.podgroups.items()
    }
    preemptible_of: dict[tuple[str, str], bool] = {}
    for key, group in sim.podgroups.items():
        pg = group.podgroup
        pc = sim.priority_classes.get(pg.priority_class_name or DEFAULT_PRIORITY_CLASS)
        value = pc.value if pc is not None else 50
        preemptible_of[key] = (pg.preemptibility == "preemptible") if pg.preemptibility else value < PREEMPTIBLE_BELOW
    pipelined = TaskStatus.PIPELINED
    for p in _pods_in_order(sim):
        status = p.status
        bound = status in BOUND
        waiting = status in WAITING
        meta = p.pod.meta
        in_group = group_of.get((meta.namespace, p.podgroup)) if p.podgroup else None
        share = p.pod.gpu_share
        pods_out.append(
            {
                "namespace": meta.namespace,
                "name": meta.name,
                "phase": PHASES[status],
                "node": p.node if bound else None,
                "nominatedNode": p.nominated_node if status == pipelined else None,
                "podGroup": p.podgroup,
                "queue": in_group[0] if in_group is not None else None,
                "gpuFraction": (share.fraction if share.fraction is not None else (p.gpu_portion or None))
                if share is not None
                else None,
                "gpuGroups": sorted(p.gpu_groups) if share is not None else [],
                "reason": p.reason if waiting else None,
                "message": p.message if waiting else None,
                "labels": _sorted_map(p.labels),
                "annotations": _sorted_map(p.annotations),
                "gpuDevices": list(p.gpu_devices) if bound else [],
                "env": _sorted_map(p.env) if bound else {},
                "owner": {"kind": p.owner[0], "name": p.owner[1]} if p.owner else None,
            }
        )
        if in_group is not None:
            in_group[1][_COUNTED_AS[status]] += 1
    groups_out = []
    for key in sorted(sim.podgroups):
        group = sim.podgroups[key]
        pg = group.podgroup
        running, pending, succeeded, _failed, _releasing = group_of[key][1]
        pc_name = pg.priority_class_name or DEFAULT_PRIORITY_CLASS
        pc = sim.priority_classes.get(pc_name)
        if running >= pg.min_member:
            phase = "Running"
        elif succeeded and not pending and not running:
            phase = "Succeeded"
        elif running:
            phase = "Running" if pending == 0 else "Pending"
        else:
            phase = "Pending"
        groups_out.append(
            {
                "namespace": pg.meta.namespace,
                "name": pg.name,
                "queue": pg.queue,
                "minMember": pg.min_member,
                "priorityClassName": pc_name,
                "priority": pc.value if pc is not None else None,
                "preemptible": preemptible_of[key],
                "phase": phase,
                "running": running,
                "pending": pending,
                "conditions": _conditions(group.condition),
                "preemptionDelay": format_duration(pg.preemption_delay) if pg.preemption_delay is not None else None,
                "stalenessGracePeriod": (
                    format_duration(pg.staleness_grace_period) if pg.staleness_grace_period is not None else None
                ),
                "safeToConsolidate": pg.safe_to_consolidate,
                "annotations": dict(sorted(pg.meta.annotations.items())),
            }
        )

    children: dict[str, list[str]] = {}
    for q in sim.queues.values():
        if q.parent is not None:
            children.setdefault(q.parent, []).append(q.name)
    queues_out = []
    for name in sorted(sim.queues):
        q = sim.queues[name]
        quota = [q.resources[k].quota for k in QUEUE_RESOURCE_KEYS]
        limit = [q.resources[k].limit for k in QUEUE_RESOURCE_KEYS]
        weight = [q.resources[k].over_quota_weight for k in QUEUE_RESOURCE_KEYS]
        figures = sim.queue_figures.get(name, NO_FIGURES)
        queues_out.append(
            {
                "name": name,
                "parent": q.parent,
                "children": sorted(children.get(name, [])),
                "priority": q.priority,
                "quota": {k: _num(v) for k, v in zip(QUEUE_RESOURCE_KEYS, quota, strict=True)},
                "limit": {k: _num(v) for k, v in zip(QUEUE_RESOURCE_KEYS, limit, strict=True)},
                "overQuotaWeight": {k: _num(v) for k, v in zip(QUEUE_RESOURCE_KEYS, weight, strict=True)},
                "fairShare": _queue_vector(figures.fair_share),
                "allocated": _queue_vector(figures.allocated),
                "allocatedNonPreemptible": _queue_vector(figures.allocated_non_preemptible),
                "requested": _queue_vector(figures.requested),
            }
        )
    evictions = [
        {
            "time": format_timestamp(e.time),
            "pod": e.pod,
            "podGroup": e.podgroup.split("/", 1)[1],
            "action": e.action,
            "preemptor": e.preemptor,
        }
        for e in sorted(sim.totals.evictions, key=lambda e: (e.time, e.pod))
    ]
    events = [
        {
            "time": format_timestamp(e.time),
            "type": e.type,
            "reason": e.reason,
            "object": e.object,
            "message": e.message,
        }
        for e in sorted(sim.totals.events, key=lambda e: (e.time, e.object, e.reason))
    ]
    return {
        "clock": sim.clock_text(),
        "cycles": sim.totals.cycles,
        "pods": pods_out,
        "podGroups": groups_out,
        "queues": queues_out,
        "evictions": evictions,
        "events": events,
    }
