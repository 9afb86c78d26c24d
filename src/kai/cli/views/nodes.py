"""The nodes view: each node's GPUs, device by device, as the binder handed them out.

Default columns: NAME, GPU MODEL (the `nvidia.com/gpu.product` label), USED and FREE GPUs, and
GPU DEVICES: the share of each device in use, in index order (`1` a whole GPU, `0.9` a shared
device holding 0.7 + 0.2, `-` free). Pods still terminating keep their devices. `-o wide` adds
STATUS, GPUS, GPU MEMORY (MiB per device), CPU and MEMORY requested of allocatable, and PODS.
"""

from __future__ import annotations

from collections import defaultdict

from rich.console import RenderableType

from kai.cli.views import layout
from kai.cli.views.capture import ClusterView

HOLDING = ("Running", "Releasing")  # phases in which a pod holds its node's resources


def device_use(view: ClusterView) -> dict[str, dict[int, float]]:
    """Per node, the share of each GPU device in use (whole-GPU pods 1, shared devices their portions)."""
    use: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    for p in view.doc["pods"]:
        if p["phase"] not in HOLDING or p["node"] is None:
            continue
        portion = p["gpuFraction"] if p["gpuGroups"] else 1.0
        for device in p["gpuDevices"]:
            use[p["node"]][device] += portion or 0.0
    return use


def _devices(count: int, use: dict[int, float]) -> str:
    return " ".join(layout.gpus(use[i]) if use.get(i) else "-" for i in range(count))


def render(view: ClusterView, *, wide: bool) -> list[RenderableType]:
    if not view.nodes:
        return ["No nodes."]
    use = device_use(view)
    held: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for p in view.doc["pods"]:
        ask = view.asks.get(f"{p['namespace']}/{p['name']}")
        if p["phase"] in HOLDING and p["node"] is not None and ask is not None:
            totals = held[p["node"]]
            totals[0] += ask.cpu
            totals[1] += ask.memory
            totals[2] += 1
    columns = ["NAME", "GPU MODEL", "USED", "FREE", "GPU DEVICES"]
    if wide:
        columns += ["STATUS", "GPUS", "GPU MEMORY", "CPU", "MEMORY", "PODS"]
    grid = layout.table(columns, title="Nodes")
    for n in view.nodes:
        node_use = use.get(n.name, {})
        used = sum(node_use.values())
        row = [
            n.name,
            n.gpu_model or layout.NONE,
            layout.gpus(used),
            layout.gpus(max(0.0, n.gpus - used)),
            _devices(n.gpus, node_use) if n.gpus else layout.NONE,
        ]
        if wide:
            cpu, memory, count = held.get(n.name, [0.0, 0.0, 0.0])
            row += [
                n.status,
                str(n.gpus),
                f"{n.gpu_memory_mib}Mi" if n.gpu_memory_mib else layout.NONE,
                f"{layout.cpu(cpu)}/{layout.cpu(n.cpu)}",
                f"{layout.memory(memory)}/{layout.memory(n.memory)}",
                f"{int(count)}/{n.max_pods}",
            ]
        layout.add_row(grid, row)
    return [grid]
