"""The pod grouper as a controller, for every adapter: which PodGroup a pod belongs to.

A pod that names its PodGroup (`pod-group-name`) keeps it. Any other pod's owner chain is walked
through the cluster state and handed to the pure pod grouper (`kai.podgrouper`), which derives
the PodGroup from the top owner. The adapter applies the outcome: it creates the PodGroup if it
does not exist yet (an existing PodGroup, including one a user created, is never changed), sets
the pod's `pod-group-name` annotation and subgroup label, and records the warnings as events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from kai.api import pod as api_pod
from kai.api.meta import ObjectMeta
from kai.api.podgroup import PodGroup, SubGroup, format_duration
from kai.api.priority import PriorityClass
from kai.cluster.state import ClusterState
from kai.podgrouper import base, model, queues, top_owner
from kai.podgrouper import config as grouper_config
from kai.podgrouper import grouping as grouper
from kai.podgrouper.model import GroupingWarning, OwnerReference

PODGROUP_API_VERSION = "scheduling.run.ai/v2alpha2"


class Grouped(msgspec.Struct, frozen=True, kw_only=True):
    """The pod belongs to `podgroup` (derived from `owner`); `subgroup` is its subgroup label."""

    podgroup: PodGroup
    owner: OwnerReference
    top_owner_kind: str
    top_owner_name: str
    subgroup: str | None
    warnings: tuple[GroupingWarning, ...]


class NotGrouped(msgspec.Struct, frozen=True, kw_only=True):
    """No PodGroup could be derived: the pod waits, and `reason`/`message` say why."""

    reason: str
    message: str


def config_for(queue_label_key: str, priority_classes: Mapping[str, PriorityClass]) -> grouper_config.GrouperConfig:
    return grouper_config.GrouperConfig(
        queue_label_key=queue_label_key,
        priority_classes={name: pc.value for name, pc in priority_classes.items()},
    )


def explicit_podgroup(pod: Mapping[str, Any]) -> str | None:
    """The PodGroup a pod names itself with its `pod-group-name` annotation, if any."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    name = annotations.get(api_pod.POD_GROUP_ANNOTATION)
    return str(name) if name else None


def derive(
    pod: Mapping[str, Any], *, state: ClusterState, config: grouper_config.GrouperConfig, now: float
) -> Grouped | NotGrouped:
    """The PodGroup the pod grouper derives for a pod from its top owner."""
    chain = top_owner.owner_chain(pod=pod, lookup=state.lookup)
    if isinstance(chain, model.GroupingError):
        return NotGrouped(reason=chain.reason, message=chain.message)
    view = base.ClusterView(lookup=state.lookup, list_pods=state.list_pods)
    result = grouper.group_pod(pod=pod, chain=chain, config=config, view=view)
    if isinstance(result, model.GroupingError):
        return NotGrouped(reason=result.reason, message=result.message)
    hint = queues.missing_label_hint(base=chain.top_owner, pod=pod, config=config)
    top_meta = chain.top_owner.get("metadata") or {}
    return Grouped(
        podgroup=_podgroup(result, now=now),
        owner=result.owner,
        top_owner_kind=str(chain.top_owner.get("kind", "")),
        top_owner_name=str(top_meta.get("name", "")),
        subgroup=result.pod_sub_group,
        warnings=(*result.warnings, *((hint,) if hint is not None else ())),
    )


def _podgroup(result: model.PodGroupMetadata, *, now: float) -> PodGroup:
    return PodGroup(
        meta=ObjectMeta(
            name=result.name,
            namespace=result.namespace,
            uid=f"pg-{result.owner.uid}",
            labels=dict(result.labels),
            annotations=dict(result.annotations),
            creation_timestamp=now,
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


def podgroup_manifest(grouped: Grouped, *, queue_label_key: str) -> dict[str, Any]:
    """The PodGroup object to create on a cluster, as KAI's pod grouper writes it."""
    pg = grouped.podgroup
    spec: dict[str, Any] = {"minMember": pg.min_member, "queue": pg.queue}
    if pg.priority_class_name:
        spec["priorityClassName"] = pg.priority_class_name
    if pg.preemptibility:
        spec["preemptibility"] = pg.preemptibility
    if pg.sub_groups:
        spec["subGroups"] = [
            {"name": s.name, "minMember": s.min_member, **({"parent": s.parent} if s.parent else {})}
            for s in pg.sub_groups
        ]
    if pg.preemption_delay is not None:
        spec["preemptionDelay"] = format_duration(pg.preemption_delay)
    if pg.staleness_grace_period is not None:
        spec["stalenessGracePeriod"] = format_duration(pg.staleness_grace_period)
    if not pg.safe_to_consolidate:
        spec["safeToConsolidate"] = False
    labels = dict(pg.meta.labels)
    labels.setdefault(queue_label_key, pg.queue)
    owner = grouped.owner
    return {
        "apiVersion": PODGROUP_API_VERSION,
        "kind": "PodGroup",
        "metadata": {
            "name": pg.name,
            "namespace": pg.meta.namespace,
            "labels": labels,
            "annotations": dict(pg.meta.annotations),
            "ownerReferences": [
                {
                    "apiVersion": owner.api_version,
                    "kind": owner.kind,
                    "name": owner.name,
                    "uid": owner.uid,
                    "controller": False,
                    "blockOwnerDeletion": False,
                }
            ],
        },
        "spec": spec,
    }


def pod_patch(grouped: Grouped) -> dict[str, Any]:
    """The pod's metadata once grouped: its PodGroup annotation and, for a subgroup, its label."""
    meta: dict[str, Any] = {"annotations": {api_pod.POD_GROUP_ANNOTATION: grouped.podgroup.name}}
    if grouped.subgroup:
        meta["labels"] = {api_pod.SUBGROUP_LABEL: grouped.subgroup}
    return {"metadata": meta}


__all__: Sequence[str] = (
    "Grouped",
    "NotGrouped",
    "config_for",
    "derive",
    "explicit_podgroup",
    "pod_patch",
    "podgroup_manifest",
)
