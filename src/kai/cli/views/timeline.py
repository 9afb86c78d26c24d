"""The timeline view (`kai sim --timeline`): what happened, in order, at which virtual time.

Every event of the run (bound as `Scheduled`, `Evicted` with its reason, `Killing` when a pod
stops and when its grace period is over, why a gang waits, ...) plus the moments events leave out:
an object `Created`, a pod `Pipelined` onto resources still being released. TIME is virtual time
since the start; it is printed once for the entries of one moment.
"""

from __future__ import annotations

from rich.console import RenderableType

from kai.cli.views import layout
from kai.cli.views.capture import ClusterView
from kai.cli.views.workloads import humanize


def object_name(key: str) -> str:
    """`Pod/default/x` as `pod/x`; other namespaces stay in (`pod/ai-workloads/x`), as do cluster objects."""
    kind, _, rest = key.partition("/")
    namespace, slash, name = rest.partition("/")
    if slash and namespace == "default":
        return f"{kind.lower()}/{name}"
    return f"{kind.lower()}/{rest}"


def _unrepeated(key: str, message: str) -> str:
    """The message without the object's own `namespace/name` (the WHAT column names it already)."""
    _, _, rest = key.partition("/")
    return message.replace(f" {rest} ", " ") if rest.count("/") == 1 else message


def render(view: ClusterView, *, wide: bool) -> list[RenderableType]:
    grid = layout.table(["TIME", "EVENT", "WHAT"], title="Timeline", wrap="WHAT", right=["TIME"])
    previous = None
    for record in view.timeline:
        when = layout.since(record.time - view.start)
        who = object_name(record.object)
        message = record.message if wide else humanize(view.doc, _unrepeated(record.object, record.message))
        layout.add_row(
            grid,
            ["" if when == previous else when, record.reason, f"{who}: {message}" if message else who],
        )
        previous = when
    if not view.timeline:
        return ["Timeline: nothing happened."]
    return [grid]
