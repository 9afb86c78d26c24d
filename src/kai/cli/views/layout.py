"""Tables laid out as kubectl prints them, and the units people read.

kubectl never cuts a cell: columns are as wide as their content, separated by three spaces, and a
row wider than the terminal simply wraps at the terminal's edge. `emit` does the same for the key
columns; only a view's free-text column (a message) wraps inside its own column, so the text stays
readable in an 80-column terminal.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from kai.api.podgroup import format_duration

NONE = "<none>"  # what kubectl prints for a missing value
UNLIMITED = "-"  # a quota or limit of -1
_UNBOUNDED = 100_000


def table(
    columns: Sequence[str], *, title: str | None = None, wrap: str | None = None, right: Sequence[str] = ()
) -> Table:
    """A borderless table: bold headers, three spaces between columns, no column ever truncated.

    `wrap` names the one column whose text may wrap (inside its column); every other column keeps
    its content on one line, whole.
    """
    grid = Table(
        title=title,
        title_justify="left",
        title_style="bold",
        box=None,
        padding=(0, 3, 0, 0),
        pad_edge=False,
        header_style="bold",
        show_header=True,
    )
    for name in columns:
        grid.add_column(
            name,
            no_wrap=name != wrap,
            overflow="fold" if name == wrap else "ignore",
            justify="right" if name in right else "left",
        )
    return grid


def notes(rows: Sequence[tuple[str, str]], *, title: str, indent: int = 2) -> Table:
    """Two-column notes under a title (`who  what`): the first column stays whole, the text wraps
    under itself. The first column must hold single words (names)."""
    grid = Table(
        title=title,
        title_justify="left",
        title_style="bold",
        box=None,
        show_header=False,
        padding=(0, 2, 0, 0),
        pad_edge=False,
    )
    grid.add_column(no_wrap=True, overflow="ignore")
    grid.add_column(overflow="fold")
    for who, what in rows:
        grid.add_row(Text(" " * indent + who), Text(what))
    return grid


def emit(console: Console, renderable: RenderableType) -> None:
    """Print without cutting anything: never narrower than the renderable's narrowest layout.

    Lines are printed without trailing blanks; a line wider than the console is left for the
    terminal to wrap, as kubectl's are.
    """
    measured = Measurement.get(console, console.options.update_width(_UNBOUNDED), renderable)
    # a table whose every column keeps its text on one line needs its full width; otherwise the
    # narrowest layout (wrapping columns at their longest word) keeps every cell whole
    rigid = isinstance(renderable, Table) and all(column.no_wrap for column in renderable.columns)
    width = max(console.width, measured.maximum if rigid else measured.minimum)
    for line in console.render_lines(renderable, console.options.update_width(width), pad=False):
        text = Text()
        for segment in line:
            if not segment.control:
                text.append(segment.text, segment.style)
        text.rstrip()
        console.print(text, soft_wrap=True, highlight=False)


def gpus(value: float) -> str:
    """GPU devices: `8`, `0.5`, `1.9` (fractions allowed, at most three decimals)."""
    return f"{round(value, 3):g}"


def cpu(millicores: float) -> str:
    """CPU as a Kubernetes quantity: whole cores (`48`) or millicores (`500m`)."""
    milli = round(millicores)
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def memory(num_bytes: float) -> str:
    """Memory as a Kubernetes quantity in the largest unit that divides it exactly (`512Gi`, `32G`)."""
    value = round(num_bytes)
    if value == 0:
        return "0"
    for suffix, size in (("Ti", 2**40), ("T", 10**12), ("Gi", 2**30), ("G", 10**9), ("Mi", 2**20), ("M", 10**6)):
        if value % size == 0:
            return f"{value // size}{suffix}"
    return f"{value / 2**30:.1f}Gi"


def limit_or_amount(value: float, shown: str) -> str:
    return UNLIMITED if value == -1 else shown


def since(seconds: float) -> str:
    """Virtual time since the start of the simulation, as Go prints a duration (`0s`, `30s`, `1m0s`)."""
    return format_duration(round(seconds, 3))


def add_row(grid: Table, values: Sequence[str]) -> None:
    """Add a row of plain text (never read as rich markup: `["team-a"]` stays as written)."""
    grid.add_row(*(Text(v) for v in values))
