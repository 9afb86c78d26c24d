"""A fix's merge patches applied to a running simulation, as a user would apply them now.

`kai explain` estimates when a workload that does not start as things are would start once its first
fix is made: on a copy of the simulation (`Simulation.fork`) each patch of the fix is applied to the
object as it is stored. A patched object is replaced, keeping its uid and creation time (what
`kubectl apply` does), and a workload is recreated with it, so its controller makes its pods again
from the patched template and the pod grouper groups them anew (its PodGroup keeps its name, which
the workload's uid makes); a patch that is null deletes the object (RFC 7386: the result is null),
with everything it owns, its running pods over their grace period.
"""

from __future__ import annotations

from collections.abc import Sequence

from kai.api.errors import InputError, Source
from kai.api.manifest import Document, SkippedObject, Workload, group_of, parse_document
from kai.core.model import TaskStatus
from kai.explain import model
from kai.explain.patches import apply_merge_patch
from kai.sim import reconcile
from kai.sim.engine import Simulation
from kai.sim.loader import without_nulls

FIX_SOURCE = Source(file="<fix>", index=0)


def apply_patches(sim: Simulation, patches: Sequence[model.Patch]) -> bool:
    """Apply every patch to the simulation's objects; False (the simulation then half patched) when an
    object is missing or its patched form is not a valid object."""
    return all(_apply(sim, patch) for patch in patches)


def _apply(sim: Simulation, patch: model.Patch) -> bool:
    namespace = patch.namespace or ""
    before = sim.lookup(namespace, patch.api_version, patch.kind, patch.name)
    if before is None:
        return False
    after = apply_merge_patch(before, patch.merge_patch)
    replacement = None
    if after is not None:
        try:
            parsed = parse_document(Document(raw=without_nulls(after), source=FIX_SOURCE))
            if isinstance(parsed, Workload):
                reconcile.validate_workload(parsed)
        except InputError:
            return False
        if isinstance(parsed, SkippedObject):
            return False
        replacement = parsed
    if not _delete(sim, patch, namespace, keeps_running=replacement is not None):
        return False
    if replacement is not None:
        sim.create(replacement, without_nulls(after))
    return True


def _delete(sim: Simulation, patch: model.Patch, namespace: str, *, keeps_running: bool) -> bool:
    """Take the object out of the store; False for a running pod that would be replaced (a pod's spec
    cannot change while it runs)."""
    group = group_of(patch.api_version)
    if group == "" and patch.kind == "Pod":
        key = f"{namespace}/{patch.name}"
        pod = sim.pods.get(key)
        if pod is None:
            return False
        if keeps_running and pod.status != TaskStatus.PENDING:
            return False
        sim.delete_pod(key, reason="deleted by the fix the estimate assumes made")
        return True
    for found, workload in sorted(sim.workloads.items()):
        if workload.kind == patch.kind and workload.meta.namespace == namespace and workload.name == patch.name:
            sim.delete_workload(found)
            return True
    sim.raw_objects.pop((namespace, group, patch.kind, patch.name), None)
    if patch.kind == "PodGroup":
        return sim.podgroups.pop((namespace, patch.name), None) is not None
    if patch.kind == "Queue":
        return sim.queues.pop(patch.name, None) is not None
    if patch.kind == "PriorityClass":
        return sim.priority_classes.pop(patch.name, None) is not None
    if patch.kind == "Node":
        return sim.nodes.pop(patch.name, None) is not None
    return False
