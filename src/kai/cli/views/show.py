"""Which views `kai sim` prints, in which order, for the end state and for `--at` snapshots."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.console import Console, RenderableType

from kai.api.fields import format_timestamp
from kai.cli.views import evictions, layout, nodes, podgroups, pods, queues, timeline
from kai.cli.views.capture import ClusterView
from kai.cli.views.names import VIEW_NAMES

VIEWS: dict[str, Callable[..., list[RenderableType]]] = {
    "pods": pods.render,
    "podgroups": podgroups.render,
    "queues": queues.render,
    "nodes": nodes.render,
    "evictions": evictions.render,
}
assert tuple(VIEWS) == VIEW_NAMES


def print_blocks(console: Console, blocks: Sequence[RenderableType]) -> None:
    for block in blocks:
        layout.emit(console, block)
        console.print()


def print_state(console: Console, view: ClusterView, *, show: Sequence[str], wide: bool, heading: str) -> None:
    """One moment of the cluster: a heading, then the chosen views (why gangs wait after pods/podgroups)."""
    console.print(heading, style="bold", highlight=False, soft_wrap=True)
    console.print()
    for name in show:
        print_blocks(console, VIEWS[name](view, wide=wide))
        if name == "podgroups" or (name == "pods" and "podgroups" not in show):
            print_blocks(console, podgroups.render_waiting(view))


def print_timeline(console: Console, view: ClusterView) -> None:
    print_blocks(console, timeline.render(view, wide=False))


def end_heading(view: ClusterView) -> str:
    cycles = view.doc["cycles"]
    return (
        f"Virtual clock {view.doc['clock']} ({layout.since(view.now - view.start)} after the start), "
        f"{cycles} scheduling cycle{'s' if cycles != 1 else ''}"
    )


def at_heading(view: ClusterView, seconds: float) -> str:
    return f"At {layout.since(seconds)} ({format_timestamp(view.start + seconds)})"


def print_warnings(console: Console, view: ClusterView) -> None:
    """Warnings about the manifests themselves (a missing queue label, a bad queue, a pod a controller
    could not create), once each; why gangs wait and evictions have their own views."""
    seen: set[tuple[str, str]] = set()
    rows = []
    for e in view.doc["events"]:
        key = (e["reason"], e["message"])  # the pods of one workload share the workload's warning
        if e["type"] != "Warning" or e["reason"] == "Evicted" or e["object"].startswith("PodGroup/") or key in seen:
            continue
        seen.add(key)
        rows.append((timeline.object_name(e["object"]), f"{e['reason']}: {e['message']}"))
    if rows:
        print_blocks(console, [layout.notes(rows, title="Warnings")])
