"""The PodGroups view: each gang with its queue, priority, minimum and how many of its pods run.

Default columns: WORKLOAD (what the user submitted, `raycluster/ray-big`), QUEUE, MIN
(minMember), RUNNING, PENDING and STATUS; below the tables, one line per waiting gang or pod says
why it is not running. `-o wide` adds REASON, PRIORITY (the class and its value), PREEMPTIBLE and
the PodGroup's NAME. A waiting gang's line and REASON give the dominant reason `kai explain` finds,
and the line its first verified fix (the condition's message).
"""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType

from kai.cli.views import layout, pods
from kai.cli.views.capture import ClusterView
from kai.cli.views.workloads import workload_of, workloads


def dominant(condition: dict[str, Any]) -> str:
    """The condition's dominant reason (`kai explain`'s first reason), else its own reason."""
    reasons = condition.get("reasons") or [condition]
    return str(reasons[0]["reason"])


def _reason(group: dict[str, Any]) -> str:
    return ",".join(dominant(c) for c in group["conditions"]) or layout.NONE


def render(view: ClusterView, *, wide: bool) -> list[RenderableType]:
    groups = view.doc["podGroups"]
    if not groups:
        return ["No PodGroups."]
    columns = ["WORKLOAD", "QUEUE", "MIN", "RUNNING", "PENDING", "STATUS"]
    if wide:
        columns += ["REASON", "PRIORITY", "PREEMPTIBLE", "NAME"]
    out: list[RenderableType] = []
    namespaces = sorted({g["namespace"] for g in groups})
    for namespace in namespaces:
        grid = layout.table(columns, title=pods.title("PodGroups", namespace, namespaces))
        for g in groups:
            if g["namespace"] != namespace:
                continue
            row = [
                workload_of(g),
                g["queue"],
                str(g["minMember"]),
                str(g["running"]),
                str(g["pending"]),
                g["phase"],
            ]
            if wide:
                priority = (
                    f"{g['priorityClassName']} ({g['priority']})"
                    if g["priority"] is not None
                    else g["priorityClassName"]
                )
                row += [_reason(g), priority, "true" if g["preemptible"] else "false", g["name"]]
            layout.add_row(grid, row)
        out.append(grid)
    return out


def waiting(view: ClusterView) -> list[tuple[str, str]]:
    """(who, why) for every waiting gang, pipelined pod, and pending pod outside any gang's reason."""
    doc = view.doc
    names = workloads(doc)
    lines: list[tuple[str, str]] = []
    explained: set[tuple[str, str]] = set()
    for g in doc["podGroups"]:
        for c in g["conditions"]:
            lines.append((names[(g["namespace"], g["name"])], f"{dominant(c)}: {c['message']}"))
            explained.add((g["namespace"], g["name"]))
    for p in doc["pods"]:
        if p["phase"] == "Pipelined" and p["message"]:
            lines.append((f"pod/{p['name']}", f"Pipelined to {p['nominatedNode']}: {p['message']}"))
        elif p["phase"] == "Pending" and p["message"] and (p["namespace"], p["podGroup"]) not in explained:
            lines.append((f"pod/{p['name']}", f"{p['reason']}: {p['message']}"))
    return lines


def render_waiting(view: ClusterView) -> list[RenderableType]:
    lines = waiting(view)
    if not lines:
        return []
    return [layout.notes(lines, title="Why waiting")]
