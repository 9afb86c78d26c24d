"""Drives the emulated workload controllers against the simulator's store.

Each pass asks every controller-managed object (Deployments, ReplicaSets, Jobs, RayClusters, ...,
including the ones controllers created) to reconcile against its current children, and applies
the answers the way the API server would: deletes first (a running pod gets its grace period,
other objects are removed with their dependents), then creates, then the owner's new status.
Passes repeat until nothing changes, so a Deployment's ReplicaSet creates its pods in the same
cycle. Controllers are pure (`kai.sim.controllers`); every effect happens here.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kai.api.errors import InputError, Source
from kai.api.fields import format_timestamp
from kai.api.manifest import Document, SkippedObject, Workload, parse_document
from kai.core.model import TaskStatus
from kai.sim import controllers

if TYPE_CHECKING:
    from kai.sim.engine import Simulation

MAX_PASSES = 50
PHASE_VIEW = {
    TaskStatus.PENDING: "Pending",
    TaskStatus.PIPELINED: "Pending",
    TaskStatus.ALLOCATED: "Running",
    TaskStatus.RUNNING: "Running",
    TaskStatus.RELEASING: "Running",
    TaskStatus.SUCCEEDED: "Succeeded",
    TaskStatus.FAILED: "Failed",
}


def validate_workload(workload: Workload) -> None:
    """Raise InputError if the workload's controller cannot act on it, or its pod template is unusable.

    Runs the controller once on an empty store (pure), then parses every pod it would create.
    """
    controller = controllers.controller_for(workload.raw)
    if controller is None:
        return
    owner = copy.deepcopy(dict(workload.raw))
    meta = dict(owner.get("metadata") or {})
    meta.setdefault("uid", "00000000-0000-4000-8000-000000000000")  # the store assigns the real one later
    meta.setdefault("namespace", workload.meta.namespace)
    owner["metadata"] = meta
    result = controller.reconcile(owner=owner, children=(), names=controllers.SeededNameSource(seed="check"))
    if result.errors:
        error = result.errors[0]
        raise InputError(
            source=workload.source,
            kind=workload.kind,
            name=workload.name,
            field=error.field,
            problem=f"{error.message}. To fix: {error.hint}",
        )
    for child in result.create:
        try:
            parse_document(Document(raw=child, source=workload.source or Source(file="-", index=0)))
        except InputError as exc:
            raise InputError(
                source=workload.source,
                kind=workload.kind,
                name=workload.name,
                field=f"pod template ({exc.field})",
                problem=exc.problem,
            ) from None


def pod_view(sim: Simulation, key: str) -> dict[str, Any]:
    """A pod as a controller would read it from the API server now."""
    pod = sim.pods[key]
    view = dict(pod.raw)
    meta = dict(view.get("metadata") or {})
    meta["labels"] = dict(pod.labels)
    meta["annotations"] = dict(pod.annotations)
    if pod.status == TaskStatus.RELEASING and pod.release_at is not None:
        meta["deletionTimestamp"] = format_timestamp(pod.release_at)
    view["metadata"] = meta
    spec = dict(view.get("spec") or {})
    if pod.node is not None:
        spec["nodeName"] = pod.node
    view["spec"] = spec
    status = dict(view.get("status") or {})
    status["phase"] = PHASE_VIEW[pod.status]
    view["status"] = status
    return view


def children_index(sim: Simulation) -> dict[str, list[Mapping[str, Any]]]:
    """Every pod (as `pod_view` shows it) and workload, under the uid of each owner it references."""
    index: dict[str, list[Mapping[str, Any]]] = {}
    for key, pod in sim.ordered_pods():
        if not pod.pod.meta.owner_references:
            continue  # an orphan is no controller's child (the parsed references are the document's)
        view = pod_view(sim, key)
        for ref in view["metadata"].get("ownerReferences") or []:
            index.setdefault(str(ref.get("uid", "")), []).append(view)
    for wkey in sorted(sim.workloads):
        raw = sim.workloads[wkey].raw
        for ref in (raw.get("metadata") or {}).get("ownerReferences") or []:
            index.setdefault(str(ref.get("uid", "")), []).append(raw)
    return index


def _delete(sim: Simulation, ref: controllers.ObjectRef) -> bool:
    """Delete as the API server would; True if the store changed (deleting a pod that is already being
    deleted changes nothing, so a controller that asks again while the pod terminates lets passes end)."""
    key = f"{ref.namespace}/{ref.name}"
    if ref.kind == "Pod":
        pod = sim.pods.get(key)
        if pod is None or pod.status == TaskStatus.RELEASING:
            return False
        sim.delete_pod(key, reason="deleted by its controller")
        return True
    deleted = False
    for wkey, workload in list(sim.workloads.items()):
        if workload.meta.uid == ref.uid or (
            workload.kind == ref.kind and workload.meta.namespace == ref.namespace and workload.name == ref.name
        ):
            sim.delete_workload(wkey)
            deleted = True
    return deleted


def _create(sim: Simulation, owner: Workload, raw: Mapping[str, Any]) -> bool:
    """Create a controller's object; True if the store changed (False if it is refused)."""
    body = copy.deepcopy(dict(raw))
    meta = dict(body.get("metadata") or {})
    meta.setdefault("creationTimestamp", format_timestamp(sim.now))
    meta.setdefault("namespace", owner.meta.namespace)
    body["metadata"] = meta
    source = owner.source or Source(file="-", index=0)
    try:
        parsed = parse_document(Document(raw=body, source=source))
    except InputError as exc:
        sim.record_event("Warning", "FailedCreate", f"{owner.kind}/{owner.meta.namespace}/{owner.name}", str(exc))
        return False
    if isinstance(parsed, SkippedObject):
        return False
    sim.create(parsed, body)
    return True


def reconcile_all(sim: Simulation, names: controllers.NameSource) -> bool:
    """Run controller passes until a pass changes nothing in the store; True if any pass did."""
    changed_any = False
    if not sim.workloads:
        return False  # no controller to ask
    for _ in range(MAX_PASSES):
        changed = False
        index = children_index(sim)
        for wkey in sorted(sim.workloads):
            workload = sim.workloads.get(wkey)
            if workload is None:
                continue
            controller = controllers.controller_for(workload.raw)
            if controller is None:
                continue
            result = controller.reconcile(
                owner=workload.raw, children=index.get(workload.meta.uid, ()), names=names, now=sim.now
            )
            if result.requeue_at is None:
                sim.wakeups.pop(wkey, None)
            else:
                sim.wakeups[wkey] = result.requeue_at
            for event in result.events:
                sim.record_event(event.type, event.reason, event.object_key, event.message)
            for error in result.errors:
                sim.record_event(
                    "Warning", "InvalidSpec", f"{workload.kind}/{workload.meta.namespace}/{workload.name}", str(error)
                )
            applied = [_delete(sim, ref) for ref in result.delete]
            applied += [_create(sim, workload, obj) for obj in result.create]
            if result.status is not None and wkey in sim.workloads:
                sim.set_workload_status(wkey, result.status)
                applied.append(True)
            if any(applied):
                changed = True
                index = children_index(sim)
        changed_any = changed_any or changed
        if not changed:
            break
    return changed_any
