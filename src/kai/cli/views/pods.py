"""The pods view: `kubectl get pods` with what the scheduler decided (node, GPUs, shared device).

Default columns: NAME, STATUS, GPU (the request as written: `1`, `0.5`, `2x0.5`, `20000Mi`), NODE,
and GPU-GROUP (the shared device, first 8 characters) when any pod shares a GPU. `-o wide` adds
NOMINATED NODE, QUEUE, PODGROUP, the GPU-GROUP whole and DEVICES (the GPU indices bound, as
NVIDIA_VISIBLE_DEVICES). STATUS reads as kubectl's: an evicted pod is Terminating for its grace
period. One table per namespace, as `kubectl get pods -n NAMESPACE` prints them.
"""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType

from kai.cli.views import layout
from kai.cli.views.capture import ClusterView

STATUS = {"Releasing": "Terminating"}  # kubectl's word for a pod in its termination grace period
SHORT_GROUP = 8


def _groups(pod: dict[str, Any], *, wide: bool) -> str:
    groups = pod["gpuGroups"]
    if not groups:
        return layout.NONE
    return ",".join(groups) if wide else ",".join(g[:SHORT_GROUP] for g in groups)


def title(kind: str, namespace: str, namespaces: list[str]) -> str:
    return kind if namespaces == ["default"] else f"{kind} in namespace {namespace}"


def render(view: ClusterView, *, wide: bool) -> list[RenderableType]:
    pods = view.doc["pods"]
    if not pods:
        return ["No pods."]
    sharing = any(p["gpuGroups"] for p in pods)
    columns = ["NAME", "STATUS", "GPU", "NODE"]
    if wide:
        columns += ["NOMINATED NODE", "QUEUE", "PODGROUP", "GPU-GROUP", "DEVICES"]
    elif sharing:
        columns.append("GPU-GROUP")
    out: list[RenderableType] = []
    namespaces = sorted({p["namespace"] for p in pods})
    for namespace in namespaces:
        grid = layout.table(columns, title=title("Pods", namespace, namespaces))
        for p in pods:
            if p["namespace"] != namespace:
                continue
            ask = view.asks.get(f"{p['namespace']}/{p['name']}")
            row = [
                p["name"],
                STATUS.get(p["phase"], p["phase"]),
                ask.gpu if ask is not None else "0",
                p["node"] or layout.NONE,
            ]
            if wide:
                row += [
                    p["nominatedNode"] or layout.NONE,
                    p["queue"] or layout.NONE,
                    p["podGroup"] or layout.NONE,
                    _groups(p, wide=True),
                    ",".join(str(d) for d in p["gpuDevices"]) or layout.NONE,
                ]
            elif sharing:
                row.append(_groups(p, wide=False))
            layout.add_row(grid, row)
        out.append(grid)
    return out
