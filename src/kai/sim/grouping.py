"""The simulator's pod-grouper controller: every new pod of ours gets its PodGroup.

The rules are the cluster's (`kai.cluster.grouping`); this module applies the outcome to the
simulator's store: the derived PodGroup is created once (later pods of the same workload join
it, and an existing PodGroup is never changed), the pod is annotated and labelled with its
subgroup, and the grouper's warnings or errors become Warning events on the pod.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from kai.api import pod as api_pod
from kai.cluster import grouping
from kai.podgrouper.config import GrouperConfig
from kai.sim.state import SimPodGroup

if TYPE_CHECKING:
    from kai.sim.engine import Simulation


def group_new_pods(sim: Simulation) -> None:
    config: GrouperConfig | None = None
    for key, pod in sim.ordered_pods():
        if not pod.ours or pod.podgroup is not None:
            continue
        explicit = pod.annotations.get(api_pod.POD_GROUP_ANNOTATION)
        if explicit:
            pod.podgroup = explicit
            continue
        if config is None:
            config = grouping.config_for(sim.config.queue_label_key, sim.priority_classes)
        outcome = grouping.derive(pod.raw, state=sim, config=config, now=sim.now)
        if isinstance(outcome, grouping.NotGrouped):
            pod.reason, pod.message = outcome.reason, outcome.message
            sim.record_event("Warning", outcome.reason, f"Pod/{key}", outcome.message)
            continue
        pod.owner = (outcome.top_owner_kind, outcome.top_owner_name)
        for warning in outcome.warnings:
            sim.record_event("Warning", warning.reason, f"Pod/{key}", warning.message)
        pg = outcome.podgroup
        if (pg.meta.namespace, pg.name) not in sim.podgroups:
            sim.podgroups[(pg.meta.namespace, pg.name)] = SimPodGroup(
                podgroup=pg, derived=True, owner_uid=outcome.owner.uid
            )
        pod.podgroup = pg.name
        pod.annotations[api_pod.POD_GROUP_ANNOTATION] = pg.name
        if outcome.subgroup:
            pod.labels[api_pod.SUBGROUP_LABEL] = outcome.subgroup
            if pod.pod.meta.labels.get(api_pod.SUBGROUP_LABEL) != outcome.subgroup:
                meta = msgspec.structs.replace(pod.pod.meta, labels=dict(pod.labels))
                pod.pod = msgspec.structs.replace(pod.pod, meta=meta)
