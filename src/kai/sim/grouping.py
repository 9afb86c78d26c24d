"""The simulator's pod-grouper controller: every new pod of ours gets its PodGroup.

A pod that names its PodGroup (`pod-group-name`) keeps it. Any other pod's owner chain is walked
through the store and handed to the pure pod grouper (`kai.podgrouper`); the PodGroup it derives
is created once (later pods of the same workload join it, and an existing PodGroup's queue is
never changed), the pod is annotated and labelled with its subgroup, and the grouper's warnings
(legacy queue label, missing queue label) or errors become Warning events on the pod.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kai.api import pod as api_pod
from kai.api.meta import ObjectMeta
from kai.api.podgroup import PodGroup, SubGroup
from kai.podgrouper import base, model, queues, top_owner
from kai.podgrouper import config as grouper_config
from kai.podgrouper import grouping as grouper
from kai.sim.state import SimPod, SimPodGroup

if TYPE_CHECKING:
    from kai.sim.engine import Simulation


def _list_pods(sim: Simulation, namespace: str, match_labels: Mapping[str, str]) -> Sequence[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for key in sorted(sim.pods):
        pod = sim.pods[key]
        if pod.pod.namespace == namespace and all(pod.labels.get(k) == v for k, v in match_labels.items()):
            out.append(pod.raw)
    return out


def _config(sim: Simulation) -> grouper_config.GrouperConfig:
    return grouper_config.GrouperConfig(
        queue_label_key=sim.config.queue_label_key,
        priority_classes={name: pc.value for name, pc in sim.priority_classes.items()},
    )


def _problem(sim: Simulation, pod: SimPod, reason: str, message: str) -> None:
    pod.reason, pod.message = reason, message
    sim.record_event("Warning", reason, f"Pod/{pod.pod.key}", message)


def _podgroup(sim: Simulation, result: model.PodGroupMetadata) -> PodGroup:
    return PodGroup(
        meta=ObjectMeta(
            name=result.name,
            namespace=result.namespace,
            uid=f"pg-{result.owner.uid}",
            labels=dict(result.labels),
            annotations=dict(result.annotations),
            creation_timestamp=sim.now,
        ),
        min_member=result.min_member,
        queue=result.queue,
        priority_class_name=result.priority_class_name,
        preemptibility=str(result.preemptibility) if result.preemptibility else None,
        sub_groups=tuple(SubGroup(name=s.name, min_member=s.min_member, parent=s.parent) for s in result.sub_groups),
        preemption_delay=result.preemption_delay,
        staleness_grace_period=result.staleness_grace_period,
        safe_to_consolidate=result.safe_to_consolidate if result.safe_to_consolidate is not None else True,
    )


def group_new_pods(sim: Simulation) -> None:
    config: grouper_config.GrouperConfig | None = None
    view = base.EMPTY_VIEW
    for key in sorted(sim.pods):
        pod = sim.pods[key]
        if not pod.ours or pod.podgroup is not None:
            continue
        explicit = pod.annotations.get(api_pod.POD_GROUP_ANNOTATION)
        if explicit:
            pod.podgroup = explicit
            continue
        if config is None:
            config = _config(sim)
            view = base.ClusterView(lookup=sim.lookup, list_pods=lambda ns, labels: _list_pods(sim, ns, labels))
        chain = top_owner.owner_chain(pod=pod.raw, lookup=sim.lookup)
        if isinstance(chain, model.GroupingError):
            _problem(sim, pod, chain.reason, chain.message)
            continue
        pod.owner = (
            str(chain.top_owner.get("kind", "")),
            str(chain.top_owner.get("metadata", {}).get("name", "")),
        )
        result = grouper.group_pod(pod=pod.raw, chain=chain, config=config, view=view)
        if isinstance(result, model.GroupingError):
            _problem(sim, pod, result.reason, result.message)
            continue
        hint = queues.missing_label_hint(base=chain.top_owner, pod=pod.raw, config=config)
        for warning in (*result.warnings, *((hint,) if hint is not None else ())):
            sim.record_event("Warning", warning.reason, f"Pod/{key}", warning.message)
        if (result.namespace, result.name) not in sim.podgroups:
            sim.podgroups[(result.namespace, result.name)] = SimPodGroup(podgroup=_podgroup(sim, result), derived=True)
        pod.podgroup = result.name
        pod.annotations[api_pod.POD_GROUP_ANNOTATION] = result.name
        if result.pod_sub_group:
            pod.labels[api_pod.SUBGROUP_LABEL] = result.pod_sub_group
            if pod.pod.meta.labels.get(api_pod.SUBGROUP_LABEL) != result.pod_sub_group:
                meta = dataclasses.replace(pod.pod.meta, labels=dict(pod.labels))
                pod.pod = dataclasses.replace(pod.pod, meta=meta)
