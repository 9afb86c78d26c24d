"""The queues view: `kubectl get queues` as the seeds show it, then what the scheduler made of them.

The first table has the columns of KAI's Queue CRD (NAME, PRIORITY, PARENT, CHILDREN,
DISPLAYNAME; PRIORITY and DISPLAYNAME as written in the spec, empty when left out; DISPLAYNAME
only with -o wide or when some queue has one, to fit 80 columns). The second
has each queue's name, then a row per resource: QUOTA, LIMIT, FAIR SHARE, ALLOCATED and REQUESTED, gpu in
devices, cpu in cores (`500m` for millicores) and memory in bytes (`512Gi`); `-` is unlimited
(-1). `-o wide` adds OVER-QUOTA WEIGHT and the allocation of NON-PREEMPTIBLE pods. The
default-parent-queue/default-queue pair the simulator adds is left out while nothing uses it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rich.console import RenderableType

from kai.cli.views import layout
from kai.cli.views.capture import ClusterView

MB = 1e6  # the Queue CRD counts memory in megabytes

UNITS: dict[str, Callable[[float], str]] = {
    "gpu": layout.gpus,
    "cpu": layout.cpu,
    "memory": lambda mb: layout.memory(mb * MB),
}


def shown(view: ClusterView) -> list[dict[str, Any]]:
    """The queues worth showing: all applied ones, and the simulator's defaults once something uses them."""
    out = []
    for q in view.doc["queues"]:
        spec = view.queues.get(q["name"])
        used = any(q["requested"].values()) or any(q["allocated"].values())
        if spec is None or spec.applied or used:
            out.append(q)
    return out


def render(view: ClusterView, *, wide: bool) -> list[RenderableType]:
    queues = shown(view)
    if not queues:
        return ["No queues."]
    named = wide or any(spec.display_name for spec in view.queues.values())
    crd = layout.table(["NAME", "PRIORITY", "PARENT", "CHILDREN", *(["DISPLAYNAME"] if named else [])], title="Queues")
    for q in queues:
        spec = view.queues.get(q["name"])
        children = json.dumps(q["children"], separators=(",", ":")) if q["children"] else ""
        row = [q["name"], spec.priority if spec else "", q["parent"] or "", children]
        layout.add_row(crd, [*row, spec.display_name if spec else ""] if named else row)
    columns = ["QUEUE", "QUOTA", "LIMIT", "FAIR SHARE", "ALLOCATED", "REQUESTED"]
    if wide:
        columns += ["OVER-QUOTA WEIGHT", "NON-PREEMPTIBLE"]
    figures = layout.table(columns, title="Queue resources (- is unlimited)")
    for q in queues:
        layout.add_row(figures, [q["name"]] + [""] * (len(columns) - 1))
        for resource in ("gpu", "cpu", "memory"):
            unit = UNITS[resource]
            row = [
                f"  {resource}",
                layout.limit_or_amount(q["quota"][resource], unit(q["quota"][resource])),
                layout.limit_or_amount(q["limit"][resource], unit(q["limit"][resource])),
                unit(q["fairShare"][resource]),
                unit(q["allocated"][resource]),
                unit(q["requested"][resource]),
            ]
            if wide:
                row += [f"{q['overQuotaWeight'][resource]:g}", unit(q["allocatedNonPreemptible"][resource])]
            layout.add_row(figures, row)
    return [crd, figures]
