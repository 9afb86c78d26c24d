"""Tables for people: pods like `kubectl get pods` with NODE, GPU-FRACTION and GPU-GROUP, then queues."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def _fmt(value: float) -> str:
    return f"{value:g}"


def pods_table(doc: dict[str, Any], *, title: str = "Pods") -> Table:
    namespaces = {p["namespace"] for p in doc["pods"]}
    table = Table(title=title, title_justify="left", header_style="bold")
    cols = ["NAME", "STATUS", "NODE", "QUEUE", "GPU-FRACTION", "GPU-GROUP"]
    if len(namespaces) > 1:
        cols.insert(0, "NAMESPACE")
    for col in cols:
        table.add_column(col, no_wrap=col in ("NAME", "GPU-GROUP"))
    for p in doc["pods"]:
        node = p["node"] or (f"({p['nominatedNode']})" if p["nominatedNode"] else "<none>")
        row = [
            p["name"],
            p["phase"],
            node,
            p["queue"] or "<none>",
            _fmt(p["gpuFraction"]) if p["gpuFraction"] is not None else "<none>",
            ",".join(g[:8] for g in p["gpuGroups"]) or "<none>",
        ]
        if len(namespaces) > 1:
            row.insert(0, p["namespace"])
        table.add_row(*row)
    return table


def pending_reasons(doc: dict[str, Any]) -> list[str]:
    """One line per waiting PodGroup (or ungrouped pod): why it is not running."""
    lines = []
    seen: set[str] = set()
    owners: dict[str, str] = {}
    for p in doc["pods"]:
        if p["owner"] and p["podGroup"]:
            owners.setdefault(f"{p['namespace']}/{p['podGroup']}", f"{p['owner']['kind']} {p['owner']['name']}")
    for g in doc["podGroups"]:
        key = f"{g['namespace']}/{g['name']}"
        who = owners.get(key, g["name"])
        for c in g["conditions"]:
            lines.append(f"{who} ({c['reason']}): {c['message']}")
            seen.add(key)
    for p in doc["pods"]:
        if p["phase"] == "Pending" and p["message"] and f"{p['namespace']}/{p['podGroup']}" not in seen:
            lines.append(f"{p['name']} ({p['reason']}): {p['message']}")
    return lines


def queues_table(doc: dict[str, Any]) -> Table:
    table = Table(title="Queues (GPUs)", title_justify="left", header_style="bold")
    for col in ("QUEUE", "PARENT", "PRIORITY", "QUOTA", "LIMIT", "FAIR SHARE", "ALLOCATED", "REQUESTED"):
        table.add_column(col, no_wrap=col in ("QUEUE", "PARENT"))

    def amount(v: float) -> str:
        return "-" if v == -1 else _fmt(round(v, 3))

    for q in doc["queues"]:
        table.add_row(
            q["name"],
            q["parent"] or "",
            str(q["priority"]),
            amount(q["quota"]["gpu"]),
            amount(q["limit"]["gpu"]),
            amount(q["fairShare"]["gpu"]),
            amount(q["allocated"]["gpu"]),
            amount(q["requested"]["gpu"]),
        )
    return table


def evictions_table(doc: dict[str, Any]) -> Table:
    table = Table(title="Evictions", title_justify="left", header_style="bold")
    for col in ("TIME", "POD", "ACTION", "PREEMPTOR"):
        table.add_column(col)
    for e in doc["evictions"]:
        table.add_row(e["time"], e["pod"], e["action"], e["preemptor"] or "")
    return table


def print_tables(doc: dict[str, Any], console: Console) -> None:
    console.print(f"clock {doc['clock']} after {doc['cycles']} cycle(s)")
    console.print(pods_table(doc))
    reasons = pending_reasons(doc)
    if reasons:
        console.print("[bold]Why waiting[/bold]")
        for line in reasons:
            console.print(f"  {line}", highlight=False)
    console.print(queues_table(doc))
    if doc["evictions"]:
        console.print(evictions_table(doc))
