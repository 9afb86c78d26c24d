"""`kai explain` on the simulated cluster: the engine's explanations of the state `kai sim` ends in,
with estimated starts from simulating forward, and the pod view (where a pod runs, who evicted it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kai.api.fields import format_timestamp
from kai.api.podgroup import workload_of
from kai.cluster import explaining
from kai.core.model import TaskStatus
from kai.explain import analysis, engine, model, patches, render
from kai.podgrouper import model as grouper_model
from kai.podgrouper import top_owner
from kai.sim import forecast
from kai.sim.engine import SCHEDULER_NAME, Simulation

RUNNING_PHASES = {TaskStatus.RUNNING: "Running", TaskStatus.RELEASING: "Releasing", TaskStatus.SUCCEEDED: "Succeeded"}
PLACEMENT = {
    "binpack": "bin-pack placement: the node with the least free room it fits on",
    "spread": "spread placement: the node with the most free room",
    "fragmentation": "fragmentation-aware placement: the node where it adds the least GPU fragmentation",
}


NotFound = explaining.NotFound


def context(sim: Simulation) -> analysis.Context:
    assert sim.last_cycle is not None, "kai sim runs at least one cycle"
    snapshot, session = sim.last_cycle
    return engine.context(
        snapshot=snapshot,
        config=sim.config,
        session=session,
        facts=explaining.facts(sim, sim.config, pod_end=sim.pod_end),
    )


def estimator(sim: Simulation, *, horizon: float) -> explaining.Estimator:
    """Estimated starts by simulating forward on a copy of the simulation (`kai.sim.forecast`)."""

    def estimate(explanations: Sequence[model.Explanation]) -> dict[str, model.Estimate]:
        return forecast.estimate_starts(sim, explanations, horizon=horizon)

    return estimate


def podgroup(sim: Simulation, key: str, *, horizon: float) -> dict[str, Any]:
    return explaining.podgroup_document(context(sim), key, estimator(sim, horizon=horizon))


def queue(sim: Simulation, name: str, *, horizon: float) -> dict[str, Any]:
    return explaining.queue_document(context(sim), name, estimator(sim, horizon=horizon), known=sim.explanations)


def pod(sim: Simulation, key: str, *, horizon: float) -> dict[str, Any]:
    found = sim.pods.get(key)
    if found is None:
        raise NotFound(f"pod {key} does not exist")
    namespace, name = key.split("/", 1)
    if found.podgroup is not None and (namespace, found.podgroup) in sim.podgroups:
        doc = podgroup(sim, f"{namespace}/{found.podgroup}", horizon=horizon)
        doc.update(kind="Pod", name=name)
        if found.status in RUNNING_PHASES:
            doc.update(_settled(sim, key, doc))
        return doc
    if not found.ours:
        phase = RUNNING_PHASES.get(found.status, "Pending")
        made_by = _top_owner(sim, key)
        fix, estimate = (None, None)
        if phase == "Pending" and made_by is not None:
            fix, estimate = _hand_to_kai(sim, key, made_by, horizon=horizon)
        return render.foreign_pod_document(
            namespace=namespace,
            name=name,
            workload=f"{made_by['kind']}/{made_by['metadata']['name']}" if made_by is not None else None,
            scheduler=found.pod.scheduler_name,
            ours=SCHEDULER_NAME,
            phase=phase,
            node=found.node,
            fix=fix,
            estimate=estimate,
        )
    # a pod of ours the pod grouper could not group (its reason and message say why)
    owner = f"{found.owner[0]}/{found.owner[1]}" if found.owner else f"Pod/{name}"
    return {
        "kind": "Pod",
        "namespace": namespace,
        "name": name,
        "podGroup": found.podgroup,
        "workload": owner,
        "queue": None,
        "phase": RUNNING_PHASES.get(found.status, "Pending"),
        "reason": found.reason,
        "message": found.message or "",
        "evidence": {},
        "otherReasons": [],
        "suggestions": [],
        "position": None,
        "estimatedStart": None,
        "estimate": "",
        "estimateAfterFix": None,
    }


def _top_owner(sim: Simulation, key: str) -> Mapping[str, Any] | None:
    """The object that made the pod (the pod itself when nothing did), as stored."""
    namespace, name = key.split("/", 1)
    raw = sim.lookup(namespace, "v1", "Pod", name)
    if raw is None:
        return None
    chain = top_owner.owner_chain(pod=raw, lookup=sim.lookup)
    return None if isinstance(chain, grouper_model.GroupingError) else chain.top_owner


def _hand_to_kai(
    sim: Simulation, key: str, owner: Mapping[str, Any], *, horizon: float
) -> tuple[model.Suggestion | None, model.Estimate | None]:
    """A waiting pod another scheduler should place: the fix that names kai as its scheduler (on the
    pod, or on the pod template of the workload that made it: `owner`), verified on a fork of the
    simulation, and the start it gives the pod's workload; (None, None) when kai would not run it either."""
    namespace, name = key.split("/", 1)
    patch = patches.scheduler_name_patch(owner, namespace=namespace or None, ours=SCHEDULER_NAME)
    if patch is None:
        return None, None
    owned = None if patch.kind == "Pod" else (patch.kind, patch.name)  # the workload that makes its pods

    def started(fork: Simulation) -> bool:
        return any(
            p.ours and p.status == TaskStatus.RUNNING and (p.owner == owned if owned else k == key)
            for k, p in fork.pods.items()
            if k.startswith(f"{namespace}/")
        )

    estimate = forecast.start_after_patches(sim, (patch,), started, horizon=horizon)
    if estimate is None or estimate.start is None:
        return None, None
    target = f"the pod template of {patch.kind} {patch.name}" if owned else name
    change = f"set the schedulerName of {target} to {SCHEDULER_NAME}"
    fix = model.Suggestion(change=change, patches=(patch,), verified=True, size=(0, 0.0))
    text = f"{estimate.text} after its fix ({change}); without it, kai leaves it to its scheduler"
    return fix, model.Estimate(start=estimate.start, text=text, after_fix=change)


def _settled(sim: Simulation, key: str, doc: dict[str, Any]) -> dict[str, Any]:
    """A pod that is not waiting: where it runs and why there, or who evicted it and why."""
    found = sim.pods[key]
    fields: dict[str, Any] = {
        "phase": RUNNING_PHASES[found.status],
        "reason": None,
        "evidence": {},
        "otherReasons": [],
        "suggestions": [],
        "position": None,
        "estimatedStart": None,
        "estimate": "",
        "estimateAfterFix": None,
    }
    if found.status == TaskStatus.RELEASING:
        eviction = next((e for e in reversed(sim.totals.evictions) if e.pod == key), None)
        why = next(
            (e.message for e in reversed(sim.totals.events) if e.object == f"Pod/{key}" and e.reason == "Evicted"), ""
        )
        if eviction is not None:
            prefix = f"evicted by {eviction.action}: "
            for_whom = ""
            if eviction.preemptor is not None:
                namespace, name = eviction.preemptor.split("/", 1)
                group = sim.podgroups.get((namespace, name))
                workload = workload_of(group.podgroup) if group is not None else f"PodGroup/{name}"
                for_whom = f" for {workload.split('/', 1)[1]}"
            fields["message"] = (
                f"evicted at {format_timestamp(eviction.time)} by {eviction.action}{for_whom}: "
                f"{why.removeprefix(prefix)}"
            )
            fields["evidence"] = {"action": eviction.action, "preemptor": eviction.preemptor}
        return fields
    if found.status == TaskStatus.SUCCEEDED:
        fields["message"] = f"{key.split('/', 1)[1]} succeeded"
        return fields
    strategy = (
        sim.config.gpu_placement
        if found.pod.requests.get("nvidia.com/gpu") or found.gpu_portion
        else (sim.config.cpu_placement)
    )
    scheduled = any(e.object == f"Pod/{key}" and e.reason == "Scheduled" for e in sim.totals.events)
    since = format_timestamp(found.start_time) if found.start_time is not None else "the start"
    if scheduled:
        fields["message"] = f"running on {found.node} since {since}, placed by {PLACEMENT.get(strategy, strategy)}"
    else:
        fields["message"] = f"running on {found.node} since {since}; it was bound there before the scheduler saw it"
    fields["evidence"] = {"node": found.node, "placement": strategy if scheduled else None}
    return fields


def podgroup_key(sim: Simulation, key: str) -> str:
    """A PodGroup's namespace/name, also found by the name of its workload (`build-pod`)."""
    assert sim.last_cycle is not None, "kai sim runs at least one cycle"
    return explaining.podgroup_key(sim.last_cycle[0], key)
