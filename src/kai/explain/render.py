"""Explanations as the `kai explain` contract's JSON, and the text form that says the same things.

The text is written from the JSON document, so the two can never disagree. Times are RFC 3339.
"""

from __future__ import annotations

from typing import Any

from kai.api import pod as api_pod
from kai.api.fields import format_timestamp
from kai.explain import model

INVALID_POD = "InvalidPod"
GPU_SHARING_ANNOTATIONS = (
    api_pod.GPU_FRACTION,
    api_pod.GPU_MEMORY,
    api_pod.GPU_FRACTION_NUM_DEVICES,
    api_pod.GPU_FRACTION_CONTAINER,
)


def _patch(patch: model.Patch) -> dict[str, Any]:
    return {
        "apiVersion": patch.api_version,
        "kind": patch.kind,
        "namespace": patch.namespace,
        "name": patch.name,
        "mergePatch": patch.merge_patch,
    }


def _evidence(evidence: model.Evidence) -> dict[str, Any]:
    return dict(sorted(evidence.items()))


def podgroup_document(expl: model.Explanation, *, kind: str = "PodGroup", name: str | None = None) -> dict[str, Any]:
    """The contract's JSON for a PodGroup (or, with kind Pod and the pod's name, for one of its pods)."""
    waiting = expl.phase not in (model.RUNNING, model.SUCCEEDED, model.FAILED) and bool(expl.reasons)
    dominant = expl.reason if waiting else None
    workload = expl.workload.split("/", 1)[-1]
    position = expl.position
    return {
        "kind": kind,
        "namespace": expl.namespace,
        "name": name or expl.name,
        "podGroup": expl.name,
        "workload": expl.workload,
        "queue": expl.queue,
        "phase": expl.phase,
        "reason": dominant.token if dominant is not None else None,
        "message": expl.message if dominant is not None else f"{workload} is {expl.phase.lower()}",
        "evidence": _evidence(dominant.evidence) if dominant is not None else {},
        "otherReasons": [
            {"reason": r.token, "message": r.message, "evidence": _evidence(r.evidence)} for r in expl.reasons[1:]
        ]
        if waiting
        else [],
        "suggestions": [
            {"change": s.change, "patches": [_patch(p) for p in s.patches], "verified": s.verified}
            for s in expl.suggestions
        ]
        if waiting
        else [],
        "position": {
            "inQueue": position.in_queue,
            "ahead": [
                {
                    "podGroup": a.podgroup,
                    "workload": a.workload,
                    "gpu": a.gpu,
                    "priority": a.priority,
                    "created": format_timestamp(a.created),
                }
                for a in position.ahead
            ],
            "factors": _factors(position.factors),
            # a job that waits in no queue: where it would stand once this fix is made
            **({"queue": position.queue, "afterFix": position.after_fix} if position.after_fix is not None else {}),
        }
        if position is not None
        else None,
        "estimatedStart": format_timestamp(expl.estimated_start) if expl.estimated_start is not None else None,
        "estimate": expl.estimate,
        # the fix the estimate assumes made now (its change), when the job does not start without one
        "estimateAfterFix": expl.estimate_after_fix,
    }


def _factors(factors: model.Evidence) -> dict[str, Any]:
    out = dict(sorted(factors.items()))
    created = out.get("created")
    if isinstance(created, float):
        out["created"] = format_timestamp(created)
    return out


def not_our_scheduler(scheduler: str, ours: str) -> str:
    """Why kai leaves a pod alone, and the field that hands it to kai."""
    return f'spec.schedulerName is "{scheduler}"; set it to {ours} for kai to schedule this pod'


def _ungrouped_pod_document(
    *,
    namespace: str,
    name: str,
    phase: str,
    reason: str | None,
    message: str,
    evidence: model.Evidence,
    estimate: str,
    fix: model.Suggestion | None = None,
    start: float | None = None,
    workload: str | None = None,
) -> dict[str, Any]:
    """The contract's document for a pod that belongs to no PodGroup kai schedules (`workload`: its top
    owner's kind/name when known, else the pod's own)."""
    return {
        "kind": "Pod",
        "namespace": namespace,
        "name": name,
        "podGroup": None,
        "workload": workload or f"Pod/{name}",
        "queue": None,
        "phase": phase,
        "reason": reason,
        "message": message,
        "evidence": dict(evidence),
        "otherReasons": [],
        "suggestions": []
        if fix is None
        else [{"change": fix.change, "patches": [_patch(p) for p in fix.patches], "verified": fix.verified}],
        "position": None,
        "estimatedStart": format_timestamp(start) if start is not None else None,
        "estimate": estimate,
        "estimateAfterFix": fix.change if fix is not None and start is not None else None,
    }


def foreign_pod_document(
    *,
    namespace: str,
    name: str,
    scheduler: str,
    ours: str,
    phase: str,
    node: str | None,
    fix: model.Suggestion | None = None,
    estimate: model.Estimate | None = None,
    workload: str | None = None,
) -> dict[str, Any]:
    """The contract's document for a pod another scheduler places (NotOurScheduler while it waits); a
    simulated cluster gives the waiting pod its verified fix (naming kai as its scheduler) and the
    start that fix gives it."""
    waiting = phase == "Pending"
    return _ungrouped_pod_document(
        namespace=namespace,
        name=name,
        phase=phase,
        reason=model.NOT_OUR_SCHEDULER if waiting else None,
        message=not_our_scheduler(scheduler, ours) if waiting else f"{phase.lower()} on {node}",
        evidence={"schedulerName": scheduler},
        estimate=estimate.text if estimate is not None and waiting else "",
        fix=fix if waiting else None,
        start=estimate.start if estimate is not None and waiting else None,
        workload=workload,
    )


def refused_pod_document(*, namespace: str, name: str, problem: str) -> dict[str, Any]:
    """The contract's document for a pod the scheduler cannot read (a live cluster keeps such pods;
    `kai sim` refuses them when it loads the manifests): InvalidGpuSharing for a GPU-sharing
    annotation, InvalidPod otherwise."""
    sharing = any(f"annotations.{key}" in problem for key in GPU_SHARING_ANNOTATIONS)
    return _ungrouped_pod_document(
        namespace=namespace,
        name=name,
        phase="Pending",
        reason=model.INVALID_GPU_SHARING if sharing else INVALID_POD,
        message=f"kai cannot schedule pod {name}: {problem}",
        evidence={"problem": problem},
        estimate=model.NEVER_STARTS,
    )


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def podgroup_text(doc: dict[str, Any]) -> str:
    """The text form of a PodGroup or pod document."""
    lines = []
    what = f"{doc['kind']} {doc['namespace']}/{doc['name']}"
    workload = doc["workload"].replace("/", " ", 1)
    if doc["kind"] == "Pod" and doc["podGroup"] is not None:
        what += f" (PodGroup {doc['podGroup']}, {workload})"
    elif doc["kind"] != "Pod" or doc["workload"] != f"Pod/{doc['name']}":
        what += f" ({workload})"
    lines.append(f"{what}, queue {doc['queue'] or '<none>'}: {doc['phase']}")
    if doc["reason"] is None:
        lines.append(f"  {doc['message']}")
    else:
        lines.append(f"  Why:    {doc['reason']}: {doc['message'].split('; to run it: ')[0]}")
        for other in doc["otherReasons"]:
            lines.append(f"  Also:   {other['reason']}: {other['message']}")
        for i, suggestion in enumerate(doc["suggestions"]):
            lines.append(f"  {'Fix:' if i == 0 else '':<7} {suggestion['change']}")
        if not doc["suggestions"] and doc["phase"] == "Pending":
            lines.append(f"  Fix:    {model.NO_FIX}")
    position = doc["position"]
    if position is not None:
        ahead = position["ahead"]
        place = f"{_ordinal(position['inQueue'])} in queue {position.get('queue') or doc['queue']}"
        if ahead:
            names = ", ".join(f"{a['workload'].split('/', 1)[-1]} ({a['gpu']:g} GPUs)" for a in ahead[:5])
            more = f" and {len(ahead) - 5} more" if len(ahead) > 5 else ""
            place += f", behind {names}{more}"
        if position.get("afterFix"):
            place += f", after its fix ({position['afterFix']})"
        lines.append(f"  Order:  {place}")
    if doc["estimate"]:
        lines.append(f"  Start:  {doc['estimate']}")
    return "\n".join(lines)
