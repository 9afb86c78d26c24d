"""Groupers for KubeRay: RayCluster, RayJob and RayService (``ray.io`` v1 and v1alpha1).

One PodGroup per top owner (KAI ``plugins/ray``). The gang is computed from the RayCluster:
  * 1 for the head, plus, for each worker group that is not ``suspended``,
    ``(minReplicas if minReplicas > 0 else replicas) * numOfHosts`` (numOfHosts defaults to 1);
    a group with ``minReplicas > replicas`` is an error;
  * subgroups: ``headgroup`` (1) and one per counted worker group, named ``groupName`` (or
    ``worker-group-<index>``) with that group's count; a pod joins the subgroup named by its
    ``ray.io/group`` label.
A RayJob's cluster is the one named in ``status.rayClusterName``; a RayService's is
``status.activeServiceStatus.rayClusterName``, else ``status.pendingServiceStatus.rayClusterName``.
The label ``ray.io/priority-class-name`` on the top owner sets the PriorityClass above all others.
Pure, no side effects; the RayCluster is read through the context's ``ClusterView``.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec.structs import replace

from kai.podgrouper import base, model, objects

RAY_GROUP_LABEL = "ray.io/group"
HEAD_GROUP = "headgroup"
RAY_PRIORITY_LABEL = "ray.io/priority-class-name"


def _gang(cluster: objects.RawObject) -> tuple[int, tuple[model.SubGroup, ...]] | model.GroupingError:
    """The RayCluster's gang size and subgroups."""
    total = 1
    sub_groups = [model.SubGroup(name=HEAD_GROUP, min_member=1)]
    groups = objects.get_list(cluster, "spec", "workerGroupSpecs", owner=cluster) or ()
    for index, group in enumerate(groups):
        where = f"spec.workerGroupSpecs[{index}]"
        if objects.get_bool(group, "suspended", owner=cluster, at=where):
            # A suspended worker group runs no pods.
            continue
        replicas = objects.get_int(group, "replicas", owner=cluster, at=where) or 0
        min_replicas = objects.get_int(group, "minReplicas", owner=cluster, at=where) or 0
        if min_replicas > replicas:
            return base.workload_error(
                cluster,
                f"worker group {index} has minReplicas {min_replicas} above replicas {replicas}",
                f"set spec.workerGroupSpecs[{index}].replicas to at least minReplicas",
            )
        if replicas == 0 and min_replicas == 0:
            # An empty worker group adds nothing to the gang.
            continue
        hosts = objects.get_int(group, "numOfHosts", owner=cluster, at=where)
        hosts = 1 if hosts is None else hosts
        count = (min_replicas if min_replicas > 0 else replicas) * hosts
        total += count
        group_name = objects.get_str(group, "groupName", owner=cluster, at=where) or f"worker-group-{index}"
        sub_groups.append(model.SubGroup(name=group_name, min_member=count))
    return total, tuple(sub_groups)


def _group_with_cluster(ctx: base.GroupingContext, cluster: objects.RawObject) -> model.GroupingResult:
    owner = ctx.chain.top_owner
    gang = _gang(cluster)
    if isinstance(gang, model.GroupingError):
        return gang
    total, sub_groups = gang
    ray_priority = objects.labels(owner).get(RAY_PRIORITY_LABEL, "")
    override = (
        (ray_priority, f"from the {RAY_PRIORITY_LABEL} label on {objects.describe(owner)}") if ray_priority else None
    )
    result = base.default_metadata(ctx, priority_override=override)
    if isinstance(result, model.GroupingError):
        return result
    pod_group = objects.labels(ctx.pod).get(RAY_GROUP_LABEL)
    pod_sub_group = pod_group if any(sg.name == pod_group for sg in sub_groups) else None
    return replace(result, min_member=total, sub_groups=sub_groups, pod_sub_group=pod_sub_group)


def _cluster_named_in_status(
    ctx: base.GroupingContext, paths: Sequence[tuple[str, ...]]
) -> objects.RawObject | model.GroupingError:
    owner = ctx.chain.top_owner
    cluster_name: str | None = None
    for path in paths:
        cluster_name = objects.get_str(owner, *path, owner=owner)
        if cluster_name is not None:
            break
    if not cluster_name:
        return model.GroupingError(
            reason="RayClusterNotFound",
            message=(
                f"{objects.describe(owner)} names no RayCluster in {' or '.join('.'.join(p) for p in paths)} "
                f"yet, so its gang size is unknown. To fix: make sure the KubeRay operator is running; it "
                f"creates the RayCluster and records its name."
            ),
        )
    namespace = objects.namespace(owner)
    # The cluster is usually on the owner chain (pod -> RayCluster -> RayJob); else look it up.
    for candidate in ctx.chain.owners:
        if objects.kind(candidate) == "RayCluster" and objects.name(candidate) == cluster_name:
            return candidate
    found = ctx.view.lookup(namespace, objects.api_version(owner), "RayCluster", cluster_name)
    if found is None:
        return model.GroupingError(
            reason="RayClusterNotFound",
            message=(
                f"{objects.describe(owner)} refers to RayCluster {namespace}/{cluster_name}, which does not "
                f"exist. To fix: wait for the KubeRay operator to create it, or recreate "
                f"{objects.describe(owner)}."
            ),
        )
    return found


def group_ray_cluster(ctx: base.GroupingContext) -> model.GroupingResult:
    return _group_with_cluster(ctx, ctx.chain.top_owner)


def group_ray_job(ctx: base.GroupingContext) -> model.GroupingResult:
    cluster = _cluster_named_in_status(ctx, (("status", "rayClusterName"),))
    if isinstance(cluster, model.GroupingError):
        return cluster
    return _group_with_cluster(ctx, cluster)


def group_ray_service(ctx: base.GroupingContext) -> model.GroupingResult:
    cluster = _cluster_named_in_status(
        ctx,
        (
            ("status", "activeServiceStatus", "rayClusterName"),
            ("status", "pendingServiceStatus", "rayClusterName"),
        ),
    )
    if isinstance(cluster, model.GroupingError):
        return cluster
    return _group_with_cluster(ctx, cluster)
