"""The evictions view: who was evicted, when, by which action, for whom, and why.

TIME is virtual time since the start of the simulation; BY names the preemptor's workload.
Each eviction's reason (the victim's Evicted event) follows the table.
"""

from __future__ import annotations

from rich.console import RenderableType

from kai.api.fields import parse_timestamp
from kai.cli.views import layout
from kai.cli.views.capture import ClusterView
from kai.cli.views.timeline import object_name
from kai.cli.views.workloads import humanize, preemptor_workload


def render(view: ClusterView, *, wide: bool) -> list[RenderableType]:
    doc = view.doc
    if not doc["evictions"]:
        return []
    grid = layout.table(["TIME", "POD", "ACTION", "BY"], title="Evictions", right=["TIME"])
    for e in doc["evictions"]:
        namespace, _, name = e["pod"].partition("/")
        pod = e["pod"] if wide or namespace != "default" else name
        when = layout.since(parse_timestamp(e["time"]) - view.start)
        layout.add_row(grid, [when, pod, e["action"], preemptor_workload(doc, e["preemptor"])])
    reasons = []
    for event in doc["events"]:
        if event["reason"] == "Evicted":
            reasons.append(
                (object_name(event["object"]), event["message"] if wide else humanize(doc, event["message"]))
            )
    return [grid, layout.notes(reasons, title="Why evicted")]
