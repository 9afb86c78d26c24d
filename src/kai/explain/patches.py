"""Changes as RFC 7386 merge patches on the objects the user applied.

Each change is made on a deep copy of the input object it concerns (a PodGroup or Queue the user
wrote, else the workload's top owner) and the merge patch is the difference between the two, so a
list the patch must touch (containers, Ray worker groups) is written whole, as RFC 7386 requires.
A change no input object can express (a minMember the pod grouper derives from the workload) gives
no patch, and is then not suggested. Ending a job deletes the objects that made its pods: their
patch is null (RFC 7386: the result of applying it is null, no object).

Pod templates are found wherever they sit in a workload (a Pod's own spec, a Deployment's
template, each Ray worker group, each Kubeflow replica, a JobSet's nested Job template): any mapping
with a `containers` list is a pod spec. Only the templates whose pods ask what the changed pods ask
are changed.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

from kai.api.errors import InputError
from kai.api.fields import Reader
from kai.api.pod import parse_pod_spec_requests
from kai.core.model import Snapshot
from kai.explain import changes, model

PODGROUP_KIND = "PodGroup"
QUEUE_KIND = "Queue"
PRIORITY_LABEL = "priorityClassName"
RAY_PRIORITY_LABEL = "ray.io/priority-class-name"
PREEMPTIBILITY_LABEL = "kai.scheduler/preemptibility"
Raw = dict[str, Any]


def merge_diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """The RFC 7386 merge patch that turns `before` into `after`."""
    out: dict[str, Any] = {key: None for key in before if key not in after}
    for key, value in after.items():
        if key not in before:
            out[key] = value
        elif before[key] != value:
            old = before[key]
            out[key] = merge_diff(old, value) if isinstance(old, Mapping) and isinstance(value, Mapping) else value
    return out


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: apply `patch` to `target` and return the result (`target` is not changed)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = apply_merge_patch(out.get(key), value)
    return out


PODGROUP_API_VERSION = "scheduling.run.ai/v2alpha2"
QUEUE_API_VERSION = "scheduling.run.ai/v2"


def pod_specs(obj: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], Raw]]:
    """Every pod spec inside an object (a mapping with a `containers` list), with its path."""
    if isinstance(obj, dict):
        if isinstance(obj.get("containers"), list):
            yield path, obj
            return
        for key in sorted(obj):
            yield from pod_specs(obj[key], (*path, key))
    elif isinstance(obj, list):
        for i, item in enumerate(obj):
            yield from pod_specs(item, (*path, i))


def scheduler_name_patch(obj: Mapping[str, Any], *, namespace: str | None, ours: str) -> model.Patch | None:
    """The merge patch that hands an object's pods to kai: each of its pod specs (a bare pod's own, a
    workload's templates) names `ours` as its scheduler. None when every one already does."""
    edited = copy.deepcopy(dict(obj))
    for _, spec in pod_specs(edited):
        spec["schedulerName"] = ours
    diff = merge_diff(obj, edited)
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not diff or not isinstance(name, str):
        return None
    return model.Patch(
        api_version=str(obj.get("apiVersion", "")),
        kind=str(obj.get("kind", "")),
        namespace=namespace,
        name=name,
        merge_patch=diff,
    )


def _requests(spec: Raw) -> dict[str, float]:
    try:
        return parse_pod_spec_requests(Reader(spec, source=None, kind="Pod", name=""))
    except InputError:
        return {}


def _quantity(resource: str, value: float) -> str:
    if resource == "cpu":
        return f"{round(value)}m"
    return f"{value:g}" if resource != "memory" else str(round(value))


def _set_request(spec: Raw, resource: str, was: float, amount: float) -> bool:
    """Change the one container that asks for `resource` so the pod asks `amount`; False if unclear."""
    holders = []
    for container in spec.get("containers") or []:
        res = container.get("resources") or {}
        if resource in (res.get("limits") or {}) or resource in (res.get("requests") or {}):
            holders.append(container)
    if len(holders) != 1:
        return False
    resources = holders[0]["resources"]
    current = _requests({"containers": [holders[0]]}).get(resource, 0.0)
    target = current - (was - amount)
    if target <= 0:
        return False
    for section in ("limits", "requests"):
        if resource in (resources.get(section) or {}):
            resources[section][resource] = _quantity(resource, target)
    return True


class _Editor:
    """Deep copies of the input objects a suggestion changes, made on demand."""

    def __init__(self, facts: model.Facts) -> None:
        self.facts = facts
        self.originals: dict[model.ObjectKey, Mapping[str, Any]] = {}
        self.copies: dict[model.ObjectKey, Raw] = {}
        self.deleted: set[model.ObjectKey] = set()

    def get(self, key: model.ObjectKey | None) -> Raw | None:
        if key is None:
            return None
        if key not in self.copies:
            found = self.facts.objects(key)
            if found is None:
                return None
            self.originals[key] = found
            self.copies[key] = copy.deepcopy(dict(found))
        return self.copies[key]

    def delete(self, key: model.ObjectKey) -> bool:
        """Delete the object (False if there is none)."""
        if self.get(key) is None:
            return False
        self.deleted.add(key)
        return True

    def patches(self) -> tuple[model.Patch, ...]:
        out = []
        for key in sorted(self.copies, key=lambda k: (k.kind, k.namespace, k.name)):
            diff = None if key in self.deleted else merge_diff(self.originals[key], self.copies[key])
            if diff or key in self.deleted:
                out.append(
                    model.Patch(
                        api_version=str(self.originals[key].get("apiVersion") or key.api_version),
                        kind=key.kind,
                        namespace=key.namespace or None,
                        name=key.name,
                        merge_patch=diff,
                    )
                )
        return tuple(out)


def _section(obj: Raw, key: str) -> Raw:
    """`obj[key]` as an object to edit, made empty where it is missing or null (`labels: null` reads
    as no labels, as the API server stores it)."""
    found = obj.get(key)
    if not isinstance(found, dict):
        found = obj[key] = {}
    return found


def _labels(obj: Raw) -> Raw:
    return _section(_section(obj, "metadata"), "labels")


def _job_object(editor: _Editor, snapshot: Snapshot, job_index: int) -> tuple[Raw | None, bool]:
    """The object that carries the job's settings: the PodGroup the user wrote, else the top owner."""
    job = snapshot.jobs[job_index]
    facts = editor.facts.workloads.get(job.key)
    if facts is None:
        return None, False
    if facts.podgroup_is_input:
        key = model.ObjectKey(
            api_version=PODGROUP_API_VERSION, kind=PODGROUP_KIND, namespace=job.namespace, name=job.name
        )
        return editor.get(key), True
    return editor.get(facts.owner), False


def _apply(editor: _Editor, snapshot: Snapshot, change: changes.Change) -> bool:
    facts = editor.facts
    if isinstance(change, changes.RaiseQueue):
        queue = editor.get(
            model.ObjectKey(api_version=QUEUE_API_VERSION, kind=QUEUE_KIND, namespace="", name=change.queue)
        )
        if queue is None:
            return False
        section = _section(_section(_section(queue, "spec"), "resources"), ("gpu", "cpu", "memory")[change.resource])
        value = change.crd_amount
        section[change.field] = int(value) if float(value).is_integer() else value
        return True
    if isinstance(change, changes.SetPodRequest | changes.DropNodeSelector):
        return _edit_templates(editor, snapshot, change)
    if isinstance(change, changes.EndJob):
        return _end(editor, snapshot, change)
    obj, is_podgroup = _job_object(editor, snapshot, change.job)
    if obj is None:
        return False
    if isinstance(change, changes.SetQueue):
        if is_podgroup:
            _section(obj, "spec")["queue"] = change.queue
        else:
            _labels(obj)[facts.queue_label_key] = change.queue
        return True
    if isinstance(change, changes.SetPriorityClass):
        if is_podgroup:
            _section(obj, "spec")["priorityClassName"] = change.name
        elif RAY_PRIORITY_LABEL in _labels(obj):
            _labels(obj)[RAY_PRIORITY_LABEL] = change.name
        else:
            _labels(obj)[PRIORITY_LABEL] = change.name
        return True
    if isinstance(change, changes.SetPreemptible):
        if is_podgroup:
            _section(obj, "spec")["preemptibility"] = "preemptible"
        else:
            _labels(obj)[PREEMPTIBILITY_LABEL] = "preemptible"
        return True
    if isinstance(change, changes.SetMinMember):
        if not is_podgroup:
            return False
        _section(obj, "spec")["minMember"] = change.min_member
        return True
    return False


def _end(editor: _Editor, snapshot: Snapshot, change: changes.EndJob) -> bool:
    """Delete the objects that made the ending job's pods that hold room (its workload, or bare pods)."""
    owners: list[model.ObjectKey] = []
    for t in snapshot.jobs[change.job].tasks:
        task = snapshot.tasks[t]
        if task.status not in changes.ENDING:
            continue
        owner = editor.facts.owner_of(task.key)
        if owner is None:
            return False
        if owner not in owners:
            owners.append(owner)
    return bool(owners) and all(editor.delete(owner) for owner in owners)


def _edit_templates(
    editor: _Editor, snapshot: Snapshot, change: changes.SetPodRequest | changes.DropNodeSelector
) -> bool:
    """Edit the pod templates (or bare pods) that made the job's pending pods."""
    owners: list[model.ObjectKey] = []
    for t in snapshot.jobs[change.job].tasks:
        task = snapshot.tasks[t]
        if isinstance(change, changes.SetPodRequest) and not change.matches(task):
            continue
        owner = editor.facts.pod_owners.get(task.key)
        if owner is None:
            return False
        if owner not in owners:
            owners.append(owner)
    if not owners:
        return False
    for owner in owners:
        obj = editor.get(owner)
        if obj is None:
            return False
        edited = False
        for _, spec in pod_specs(obj):
            if isinstance(change, changes.SetPodRequest):
                name = snapshot.resources.names[change.resource]
                if abs(_requests(spec).get(name, 0.0) - change.was) < 1e-9:
                    if not _set_request(spec, name, change.was, change.amount):
                        return False
                    edited = True
            else:
                selector = spec.get("nodeSelector")
                if isinstance(selector, dict) and selector.get(change.key) == change.value:
                    del selector[change.key]
                    edited = True
        if not edited:
            return False
    return True


def patches_for(
    suggestion: tuple[changes.Change, ...], snapshot: Snapshot, facts: model.Facts
) -> tuple[model.Patch, ...] | None:
    """The merge patches that make the changes on the input objects; None if one cannot be made."""
    editor = _Editor(facts)
    for change in suggestion:
        if not _apply(editor, snapshot, change):
            return None
    patches = editor.patches()
    return patches or None
