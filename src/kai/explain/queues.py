"""A queue explained: its settings, its fair share and how each level of the tree produced it,
what it holds and borrows, which of its jobs reclaim could take, and its waiting jobs in order.

The fair share is the cycle's own (the proportion plugin's division); the per-level breakdown
repeats only the deserved phase through `division.deserved_portion`, the function the division
itself uses, and attributes the rest to the over-quota phase. Reclaim candidates are the victim
pool's, in its victim order.
"""

from __future__ import annotations

from typing import Any

from kai.actions.common.victims import VictimPool
from kai.core.model import Job, TaskStatus
from kai.core.resources import MB
from kai.explain import analysis, model, position, render, words
from kai.plugins.proportion.division import deserved_portion

EPS = 1e-9
RESOURCES = ("gpu", "cpu", "memory")


def _vector(values: Any) -> dict[str, float]:
    """Queue space to the Queue CRD's units (gpu devices, cpu millicores, memory megabytes)."""
    gpu, cpu, memory = (float(v) for v in values)
    return {
        "gpu": round(gpu, 9),
        "cpu": round(cpu, 9),
        "memory": round(memory / MB if memory != -1 else -1.0, 9),
    }


def queue_document(ctx: analysis.Context, name: str, explanations: dict[str, model.Explanation]) -> dict[str, Any]:
    """Everything `kai explain queue NAME` says, as a JSON document."""
    snap, session = ctx.snapshot, ctx.session
    q = snap.queue_by_name[name]
    queue = snap.queues[q]
    quota, limit = queue.deserved, queue.limit
    allocated = session.queue_allocated[q]
    borrowed = [max(0.0, float(allocated[r] - quota[r])) if quota[r] != -1 else 0.0 for r in range(3)]
    subtree = _subtree(ctx, q)
    waiting = waiting_in(ctx, name)
    pool = VictimPool(session)
    over = [float(allocated[r] - session.fair_share[q, r]) for r in range(3)]
    reclaimable = [
        {
            "podGroup": job.key,
            "workload": job.workload,
            "queue": snap.queues[job.queue].name,
            "priority": job.priority,
            "gpu": float(
                session.job_request([snap.tasks[t] for t in job.tasks if session.status[t] == TaskStatus.RUNNING])[0]
            ),
        }
        for leaf in sorted(subtree)
        for _, job in pool.by_queue.get(leaf, [])
    ]
    return {
        "kind": "Queue",
        "name": queue.name,
        "parent": snap.queues[queue.parent].name if queue.parent >= 0 else None,
        "children": sorted(snap.queues[c].name for c in queue.children),
        "priority": queue.priority,
        "quota": _vector(quota),
        "limit": _vector(limit),
        "overQuotaWeight": dict(zip(RESOURCES, (float(w) for w in queue.weight), strict=True)),
        "fairShare": _vector(session.fair_share[q]),
        "fairShareSteps": _steps(ctx, q),
        "allocated": _vector(allocated),
        "allocatedNonPreemptible": _vector(session.queue_allocated_np[q]),
        "requested": _vector(session.queue_request[q]),
        "borrowed": _vector(borrowed),
        "overFairShare": _vector([max(0.0, o) for o in over]),
        "reclaimable": reclaimable if any(o > EPS for o in over) else [],
        "reclaimCandidates": reclaimable,
        "waiting": [render.podgroup_document(explanations[j.key]) for j in waiting if j.key in explanations],
    }


def waiting_in(ctx: analysis.Context, name: str) -> list[Job]:
    """The jobs waiting in the queue's subtree, as the document lists them: by leaf queue name, then in
    the session's job order."""
    snap, session = ctx.snapshot, ctx.session
    subtree = _subtree(ctx, snap.queue_by_name[name])
    return sorted(
        (j for j in snap.jobs if j.queue in subtree and position.waiting(session, j)),
        key=lambda j: (snap.queues[j.queue].name, session.job_key(j)),
    )


def _subtree(ctx: analysis.Context, queue: int) -> set[int]:
    out = {queue}
    stack = list(ctx.snapshot.queues[queue].children)
    while stack:
        q = stack.pop()
        out.add(q)
        stack.extend(ctx.snapshot.queues[q].children)
    return out


def _steps(ctx: analysis.Context, queue: int) -> list[dict[str, Any]]:
    """GPU fair share level by level, from the top of the tree down to the queue."""
    snap, session = ctx.snapshot, ctx.session
    path = session.ancestors(queue)[::-1]
    steps = []
    for q in path:
        parent = snap.queues[q].parent
        siblings = [s.index for s in snap.queues if s.parent == parent]
        amount = float(snap.total[0]) if parent < 0 else float(session.fair_share[parent, 0])
        quota = float(snap.queues[q].deserved[0])
        limit = float(snap.queues[q].limit[0])
        request = float(session.queue_request[q, 0])
        deserved = deserved_portion(total=amount, deserved=quota, limit=limit, request=request)
        fair = float(session.fair_share[q, 0])
        steps.append(
            {
                "queue": snap.queues[q].name,
                "sharedBy": sorted(snap.queues[s].name for s in siblings),
                "amount": amount,
                "requested": request,
                "fromQuota": deserved,
                "overQuota": max(0.0, fair - deserved),
                "weight": float(snap.queues[q].weight[0]),
                "siblingWeights": float(sum(snap.queues[s].weight[0] for s in siblings)),
                "fairShare": fair,
            }
        )
    return steps


def queue_text(doc: dict[str, Any]) -> str:
    def gpus(value: float) -> str:
        return "unlimited" if value == -1 else words.number(0, value)

    lines = [f"Queue {doc['name']}" + (f" (in {doc['parent']})" if doc["parent"] else "")]
    if doc["children"]:
        lines.append(f"  Children:   {', '.join(doc['children'])}")
    lines.append(
        f"  GPUs:       quota {gpus(doc['quota']['gpu'])}, limit {gpus(doc['limit']['gpu'])}, "
        f"over-quota weight {doc['overQuotaWeight']['gpu']:g}, priority {doc['priority']}"
    )
    lines.append(
        f"  Fair share: {gpus(doc['fairShare']['gpu'])} GPUs; allocated {gpus(doc['allocated']['gpu'])} "
        f"({gpus(doc['allocatedNonPreemptible']['gpu'])} non-preemptible), "
        f"requested {gpus(doc['requested']['gpu'])}, borrowed {gpus(doc['borrowed']['gpu'])}"
    )
    for step in doc["fairShareSteps"]:
        among = ", ".join(step["sharedBy"])
        lines.append(
            f"    {step['queue']}: {gpus(step['fairShare'])} of the {gpus(step['amount'])} shared by {among} = "
            f"{gpus(step['fromQuota'])} from its quota + {gpus(step['overQuota'])} over quota "
            f"(weight {step['weight']:g} of {step['siblingWeights']:g}; requested {gpus(step['requested'])})"
        )
    if doc["reclaimable"]:
        names = ", ".join(f"{r['workload'].split('/', 1)[-1]} ({r['gpu']:g} GPUs)" for r in doc["reclaimable"])
        lines.append(
            f"  Reclaim:    {gpus(doc['overFairShare']['gpu'])} GPUs over its fair share; "
            f"reclaim may take, in this order: {names}"
        )
    elif doc["reclaimCandidates"]:
        lines.append("  Reclaim:    within its fair share; reclaim takes nothing from it")
    if doc["waiting"]:
        lines.append("  Waiting:")
        for i, item in enumerate(doc["waiting"], start=1):
            name = item["workload"].split("/", 1)[-1]
            lines.append(f"    {i}. {name} ({item['reason']}): {item['message']}")
    return "\n".join(lines)
