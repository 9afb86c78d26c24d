"""How a pod's API state maps to the scheduler's task state, for every adapter.

Succeeded and Failed pods hold nothing. A pod bound to a node whose deletion has been asked for
(`metadata.deletionTimestamp`) is Releasing: its resources are counted as being freed, and
pending pods may be pipelined onto them. Any other bound pod is Running; the rest are Pending.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from kai.api import pod as api_pod
from kai.api.pod import Pod
from kai.core.model import TaskStatus


class ObservedPod(msgspec.Struct, frozen=True, kw_only=True):
    status: TaskStatus
    node: str | None


def observe(pod: Pod) -> ObservedPod:
    """The task state of a pod as the API server shows it."""
    if pod.phase == "Succeeded":
        return ObservedPod(status=TaskStatus.SUCCEEDED, node=pod.node_name or None)
    if pod.phase == "Failed":
        return ObservedPod(status=TaskStatus.FAILED, node=pod.node_name or None)
    if pod.node_name:
        terminating = pod.meta.deletion_timestamp is not None
        return ObservedPod(status=TaskStatus.RELEASING if terminating else TaskStatus.RUNNING, node=pod.node_name)
    return _PENDING


_PENDING = ObservedPod(status=TaskStatus.PENDING, node=None)  # most pods read (frozen: one serves all)


def gpu_groups(labels: Mapping[str, str]) -> tuple[str, ...]:
    """The shared-GPU groups a bound pod holds, read back from its labels as KAI's binder writes them:
    `runai-gpu-group=<first>`, plus `runai-gpu-group/<group>` for each further device."""
    first = labels.get(api_pod.GPU_GROUP_LABEL)
    if not first:
        return ()
    prefix = api_pod.GPU_GROUP_LABEL + "/"
    others = sorted(k[len(prefix) :] for k in labels if k.startswith(prefix) and k[len(prefix) :] != first)
    return (first, *others)


def group_labels(groups: tuple[str, ...]) -> dict[str, str]:
    """The labels KAI's binder writes for a pod's shared-GPU groups (the inverse of `gpu_groups`)."""
    if not groups:
        return {}
    labels = {api_pod.GPU_GROUP_LABEL: groups[0]}
    for group in groups[1:]:
        labels[f"{api_pod.GPU_GROUP_LABEL}/{group}"] = group
    return labels
