"""Walk a pod's ownerReferences up to its top owner, the object its PodGroup is derived from.

KAI's pod-grouper follows ``ownerReferences[0]`` of the pod, then of each owner, until it reaches an
object without owners (``pkg/podgrouper/podgrouper/podgrouper.go``). An owner with more than one
owner reference stops the walk with an error, as does an owner that no longer exists (including
one that was deleted and re-created with a new UID). A pod without owners is its own top owner.
We add cycle detection, which KAI does not need because the API server's garbage collector breaks
cycles.

Pure: the caller passes ``lookup``, a read function over its own object store (the simulator's
store or the adapter's informer cache). Failures come back as a ``GroupingError`` value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from kai.podgrouper import model, objects

# lookup(namespace, apiVersion, kind, name) -> the object, or None if it does not exist.
Lookup = Callable[[str, str, str, str], Mapping[str, Any] | None]


class OwnerChain(msgspec.Struct, frozen=True, kw_only=True):
    """A pod and its owners, nearest first: ``owners[0]`` owns the pod, ``owners[-1]`` is the top owner."""

    pod: objects.RawObject
    owners: tuple[objects.RawObject, ...] = ()

    @property
    def top_owner(self) -> objects.RawObject:
        """The last owner, or the pod itself when it has no owner."""
        return self.owners[-1] if self.owners else self.pod


def _identity(obj: objects.RawObject) -> tuple[str, str, str, str]:
    return (
        objects.group_of(objects.api_version(obj)),
        objects.kind(obj),
        objects.namespace(obj),
        objects.name(obj),
    )


def _describe_ref(ref: Mapping[str, Any]) -> str:
    return f'{ref.get("kind") or "object"} "{ref.get("name") or ""}"'


def owner_chain(*, pod: objects.RawObject, lookup: Lookup) -> OwnerChain | model.GroupingError:
    """The owner chain of ``pod``, or a ``GroupingError`` (OwnerNotFound, MultipleOwners, OwnerCycle).

    Pure, no side effects; ``lookup`` is only read. Like KAI, only the pod's first owner reference is
    followed (a pod with several owners is grouped by the first); every owner above it must have at
    most one. Owners are looked up in the pod's namespace.
    """
    refs = objects.owner_references(pod)
    if not refs:
        # A pod without owners is its own top owner.
        return OwnerChain(pod=pod)
    namespace = objects.namespace(pod)
    pod_name = objects.describe(pod)
    owners: list[objects.RawObject] = []
    seen = {_identity(pod)}
    ref = refs[0]
    child = pod
    while True:
        ref_uid = str(ref.get("uid") or "")
        found = lookup(
            namespace,
            str(ref.get("apiVersion") or ""),
            str(ref.get("kind") or ""),
            str(ref.get("name") or ""),
        )
        if found is None or (ref_uid and objects.uid(found) and objects.uid(found) != ref_uid):
            # The owner is gone, or a different object now has its name.
            stale = "" if found is None else f" (an object with that name exists but has uid {objects.uid(found)})"
            return model.GroupingError(
                reason="OwnerNotFound",
                message=(
                    f"{objects.describe(child)} is owned by {_describe_ref(ref)}"
                    f"{f' (uid {ref_uid})' if ref_uid else ''}, which was not found in namespace "
                    f"{namespace or '<none>'}{stale}, so no PodGroup can be created for {pod_name}. "
                    f"To fix: recreate the owner, or delete the orphaned {pod_name}."
                ),
            )
        identity = _identity(found)
        if identity in seen:
            # Owner references loop back to an object already on the chain.
            return model.GroupingError(
                reason="OwnerCycle",
                message=(
                    f"the owner references above {pod_name} form a cycle at {objects.describe(found)}. "
                    f"To fix: remove the circular ownerReference from {objects.describe(found)}."
                ),
            )
        seen.add(identity)
        owners.append(found)
        next_refs = objects.owner_references(found)
        if not next_refs:
            # No owner above: this is the top owner.
            return OwnerChain(pod=pod, owners=tuple(owners))
        if len(next_refs) > 1:
            # Ambiguous chain: KAI refuses to pick one of several owners above the pod.
            listed = ", ".join(_describe_ref(r) for r in next_refs)
            return model.GroupingError(
                reason="MultipleOwners",
                message=(
                    f"{objects.describe(found)} (an owner of {pod_name}) has {len(next_refs)} owner "
                    f"references ({listed}); the pod-grouper follows a single chain of owners. "
                    f"To fix: keep exactly one ownerReference on {objects.describe(found)}."
                ),
            )
        child = found
        ref = next_refs[0]
