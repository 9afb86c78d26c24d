"""Where `kai sim`'s time goes on target 1's input, phase by phase, as the cluster grows.

The input is target 1's (`benchmarks.clusters.allocate_manifests`: N nodes x 8 GPUs, 10 pending pods
per node in gangs of 1-64, as one JSON `v1 List`). Each phase runs in this process the way `kai sim
-f FILE --actions allocate -o json` runs it (`kai.cli.simulate`, `kai.cli.sim_cmd`), with the garbage
collector handled as the command handles it, and is timed on its own in CPU seconds:

* load: reading the file, decoding the JSON, the strict field checks and the typed objects
  (`kai.sim.loader.load_paths`);
* setup: the simulated cluster's store (`kai.sim.engine.Simulation`): uids, creation times, pods;
* cycle: one scheduling cycle: the snapshot, the session, allocate, the effects applied to the store;
* output: the contract's document and its JSON text (`kai.sim.output.build`, `kai.cli.json_text`).

The stdlib's `json.loads` of the same text is timed beside them (collector on, as a plain script
runs it): the anchor target 1 is stated against.
"""

from __future__ import annotations

import json
import pathlib
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from msgspec.structs import replace

from benchmarks.clusters import allocate_manifests
from kai.cli import json_text
from kai.cluster import collector
from kai.core.session import SchedulerConfig
from kai.sim import output
from kai.sim.engine import Simulation
from kai.sim.loader import load_paths

PHASES = ("load", "setup", "cycle", "output")


@dataclass(kw_only=True, slots=True)
class SimRow:
    nodes: int
    pods: int
    megabytes: float  # size of the JSON input
    parse: float  # stdlib json.loads of the input, the anchor
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.seconds.values())


def measure(nodes: int, pods: int) -> SimRow:
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "cluster.json"
        text = json.dumps(allocate_manifests(nodes=nodes, pods=pods))
        path.write_text(text)
        start = time.process_time()
        json.loads(text)
        row = SimRow(nodes=nodes, pods=pods, megabytes=len(text) / 2**20, parse=time.process_time() - start)
        del text
        config = replace(SchedulerConfig(), actions=("allocate",))
        start = time.process_time()
        with collector.paused(freeze=True):
            loaded = load_paths([str(path)], extra_keys=frozenset({config.queue_label_key}))
        row.seconds["load"] = time.process_time() - start
    assert not loaded.errors, loaded.errors[:3]
    start = time.process_time()
    with collector.paused(freeze=True):
        simulation = Simulation(loaded.objects, config=config, start_time=None)
    row.seconds["setup"] = time.process_time() - start
    start = time.process_time()
    simulation.run(cycles=None, until_idle=False, max_time=3600.0)
    row.seconds["cycle"] = time.process_time() - start
    start = time.process_time()
    with collector.paused(freeze=True):
        json_text.dumps(output.build(simulation))
    row.seconds["output"] = time.process_time() - start
    return row


def study(node_counts: Sequence[int], pods_per_node: int = 10) -> list[SimRow]:
    measure(10, 10 * pods_per_node)  # the modules each phase imports on first use, not counted
    return [measure(nodes, pods_per_node * nodes) for nodes in node_counts]


def table(rows: Sequence[SimRow]) -> str:
    head = ["nodes", "pods", "input MB", *PHASES, "total", "pods/s", "json.loads (anchor)", "total / anchor"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for r in rows:
        cells = [f"{r.nodes:,}", f"{r.pods:,}", f"{r.megabytes:.1f}"]
        cells += [f"{r.seconds[p]:.2f}" for p in PHASES]
        cells += [f"{r.total:.2f}", f"{r.pods / max(r.total, 1e-9):,.0f}", f"{r.parse:.2f}"]
        cells.append(f"{r.total / max(r.parse, 1e-9):.1f}x")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(rows: Sequence[SimRow], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    nodes = [r.nodes for r in rows]
    for phase in (*PHASES, "total"):
        values = [r.total if phase == "total" else r.seconds[phase] for r in rows]
        ax.plot(nodes, values, marker="o", label=phase, linewidth=2.5 if phase == "total" else 1.2)
    ax.plot(nodes, [r.parse for r in rows], "k--", label="json.loads of the input (anchor)")
    ax.plot(nodes, [rows[0].total * n / nodes[0] for n in nodes], "k:", label="linear from the first size")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("nodes (8 GPUs each; 10 pending pods per node)")
    ax.set_ylabel("CPU seconds")
    ax.set_title("kai sim, one allocate cycle, JSON in and out: phases")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
