"""The pod grouper's entry point: one pod and its owner chain in, PodGroup metadata or an error out.

Callers (the simulator, the Kubernetes adapter) do the I/O around it::

    chain = top_owner.owner_chain(pod=pod, lookup=store.get)          # 1. walk the owners
    if isinstance(chain, model.GroupingError): record a Warning event on the pod
    result = grouping.group_pod(pod=pod, chain=chain, config=config, view=view)   # 2. decide
    # 3. create/update the PodGroup, annotate the pod with pod-group-name, label it with
    #    kai.scheduler/subgroup-name, record result.warnings (or the error) as Warning events.

Like KAI's pod controller, an existing PodGroup's queue is never changed by the caller on update.
"""

from __future__ import annotations

from msgspec.structs import replace

from kai.podgrouper import base, model, objects, top_owner
from kai.podgrouper import config as cfg


def group_pod(
    *,
    pod: objects.RawObject,
    chain: top_owner.OwnerChain,
    config: cfg.GrouperConfig,
    view: base.ClusterView = base.EMPTY_VIEW,
) -> model.GroupingResult:
    """The PodGroup metadata for ``pod``, or why there is none. Pure, no side effects.

    Picks the grouper registered for the chain's top owner (``registry``), then copies the pod's
    node-pool label onto the PodGroup labels when the PodGroup has none. A malformed field in any
    object becomes an ``InvalidWorkload`` error rather than an exception.
    """
    assert chain.pod is pod or chain.pod == pod, "the owner chain belongs to another pod"
    from kai.podgrouper import registry  # every grouper module: imported when a pod first needs grouping

    ctx = base.GroupingContext(pod=pod, chain=chain, config=config, view=view)
    grouper = registry.grouper_for(top_owner=chain.top_owner)
    try:
        result = grouper.group(ctx)
    except objects.InvalidObjectError as err:
        # A field of the wrong type: report it as data, like every other grouping failure.
        return model.GroupingError(
            reason="InvalidWorkload", message=f"{err}. To fix: correct the field and re-apply the object."
        )
    if isinstance(result, model.GroupingError):
        return result
    if result.min_member < 1:
        # The PodGroup CRD requires minMember >= 1; the API server would reject this PodGroup.
        return model.GroupingError(
            reason="InvalidWorkload",
            message=(
                f"{objects.describe(chain.top_owner)} asks for a gang of {result.min_member} pods for "
                f"PodGroup {result.name}, but a PodGroup needs at least 1. To fix: set the workload's "
                f"minimum (e.g. schedulingPolicy.minAvailable) to at least 1."
            ),
            warnings=result.warnings,
        )
    assert result.pod_sub_group is None or any(sg.name == result.pod_sub_group for sg in result.sub_groups)
    node_pool_key = config.node_pool_label_key
    node_pool = objects.labels(pod).get(node_pool_key)
    if node_pool_key and node_pool is not None and node_pool_key not in result.labels:
        # The PodGroup follows its pod's node pool (scheduling shard).
        return replace(result, labels={**result.labels, node_pool_key: node_pool})
    return result
