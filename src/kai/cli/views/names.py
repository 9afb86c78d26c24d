"""The names of the views `kai sim` can print, read from `--show` without importing the table renderer
(a run that prints JSON or YAML never loads rich)."""

from __future__ import annotations

VIEW_NAMES = ("pods", "podgroups", "queues", "nodes", "evictions")  # in the order they print
DEFAULT_SHOW = ("pods", "podgroups", "queues", "evictions")


def parse_show(text: str) -> tuple[str, ...]:
    """`pods,queues` as view names, in the order of VIEW_NAMES; ValueError names an unknown one."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    for name in names:
        if name not in VIEW_NAMES:
            raise ValueError(f'unknown view "{name}"; known views: {", ".join(VIEW_NAMES)}')
    if not names:
        raise ValueError(f"name at least one view: {', '.join(VIEW_NAMES)}")
    return tuple(v for v in VIEW_NAMES if v in names)
