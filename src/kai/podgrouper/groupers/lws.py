"""Grouper for LeaderWorkerSet (``leaderworkerset.x-k8s.io``), as in KAI's LWS plugin.

Every replica of a LeaderWorkerSet (a leader and its workers) is its own gang:
  * name ``pg-<lws>-<uid>-group-<i>`` from the pod's ``leaderworkerset.sigs.k8s.io/group-index``;
  * ``spec.startupPolicy`` ``LeaderCreated`` (default): gang = ``spec.leaderWorkerTemplate.size``;
    ``LeaderReady``: the workers are created only after the leader is ready, so the leader's gang is
    1 until it is scheduled, and the size (the pod's ``leaderworkerset.sigs.k8s.io/size``
    annotation, else the template's) afterwards and for workers;
  * subgroups ``leader`` (1) and ``workers`` (gang - 1, when positive); the leader is the pod with
    ``leaderworkerset.sigs.k8s.io/worker-index: "0"``.
KAI's optional ``kai.scheduler/segment-size`` segmentation of large groups is not implemented.
Pure, no side effects.
"""

from __future__ import annotations

from msgspec.structs import replace

from kai.podgrouper import base, model, objects

GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"


def group_lws(ctx: base.GroupingContext) -> model.GroupingResult:
    lws = ctx.chain.top_owner
    pod = ctx.pod
    size = objects.get_int(lws, "spec", "leaderWorkerTemplate", "size", owner=lws)
    if size is None or size <= 0:
        return base.workload_error(
            lws,
            f"spec.leaderWorkerTemplate.size is {size if size is not None else 'missing'}",
            "set spec.leaderWorkerTemplate.size to the number of pods per group (leader included)",
        )
    policy = objects.get_str(lws, "spec", "startupPolicy", owner=lws) or "LeaderCreated"
    worker_index_text = objects.labels(pod).get(WORKER_INDEX_LABEL)
    if worker_index_text is not None:
        worker_index = objects.parse_int_text(worker_index_text)
        if worker_index is None or worker_index < 0:
            return base.workload_error(
                pod,
                f"label {WORKER_INDEX_LABEL}={worker_index_text!r} is not an index >= 0",
                "let the LeaderWorkerSet controller create the pod",
            )
    is_leader = worker_index_text == "0"
    if policy == "LeaderCreated":
        gang = size
    elif policy == "LeaderReady":
        scheduled = bool(objects.get_str(pod, "spec", "nodeName", owner=pod))
        annotated = objects.parse_int_text(objects.annotations(pod).get(SIZE_ANNOTATION, ""))
        # An unscheduled leader runs alone; its workers appear once it is ready.
        gang = 1 if is_leader and not scheduled else (annotated if annotated is not None else size)
    else:
        return base.workload_error(lws, f'spec.startupPolicy "{policy}" is unknown', "use LeaderCreated or LeaderReady")
    result = base.default_metadata(ctx)
    if isinstance(result, model.GroupingError):
        return result
    sub_groups = [model.SubGroup(name="leader", min_member=1)]
    if gang - 1 > 0:
        sub_groups.append(model.SubGroup(name="workers", min_member=gang - 1))
    pod_sub_group = "leader" if is_leader else ("workers" if gang - 1 > 0 else None)
    name = result.name
    group_index = objects.parse_int_text(objects.labels(pod).get(GROUP_INDEX_LABEL, ""))
    if group_index is not None:
        name = f"{name}-group-{group_index}"
    return replace(result, name=name, min_member=gang, sub_groups=tuple(sub_groups), pod_sub_group=pod_sub_group)
