"""How each action's cost grows with the cluster: per-action CPU seconds from 500 to 20,000 nodes.

Two clusters per size (seeded, `benchmarks.clusters`): the allocate cluster of target 1 (10 pending
pods per node, nothing running) and the busy cluster of target 2 (20 running pods per node, nodes/2
pending jobs needing reclaim and preempt). The session is opened and the actions run one by one as
`run_cycle` does, each timed on its own; snapshot building and session opening are timed too.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from benchmarks.clusters import Cluster, allocate_cluster, reclaim_cluster
from kai.core.session import SchedulerConfig
from kai.scheduler import registry
from kai.scheduler.cycle import open_session

CLUSTERS = ("allocate", "busy")
STEPS = ("snapshot", "session", "allocate", "consolidation", "reclaim", "preempt", "stalegangeviction")


@dataclass(kw_only=True, slots=True)
class Row:
    cluster: str
    nodes: int
    pods: int
    pending_jobs: int
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.seconds.values())


def measure(name: str, cluster: Cluster) -> Row:
    row = Row(cluster=name, nodes=len(cluster.nodes), pods=len(cluster.pods), pending_jobs=cluster.pending_jobs)
    start = time.process_time()
    built = cluster.built()
    row.seconds["snapshot"] = time.process_time() - start
    config = SchedulerConfig()
    start = time.process_time()
    session = open_session(built.snapshot, config)
    row.seconds["session"] = time.process_time() - start
    for name_ in config.actions:
        action = registry.make_action(name_)
        start = time.process_time()
        if action is not None:
            action.execute(session)
        row.seconds[name_] = time.process_time() - start
    return row


def study(node_counts: Sequence[int], clusters: Sequence[str] = CLUSTERS) -> list[Row]:
    rows = []
    for nodes in node_counts:
        if "allocate" in clusters:
            rows.append(measure("allocate", allocate_cluster(nodes=nodes, pods=10 * nodes)))
        if "busy" in clusters:
            rows.append(measure("busy", reclaim_cluster(nodes=nodes)))
    return rows


def table(rows: Sequence[Row]) -> str:
    head = ["cluster", "nodes", "pods", "pending jobs", *STEPS, "total"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
    for r in rows:
        cells = [r.cluster, f"{r.nodes:,}", f"{r.pods:,}", f"{r.pending_jobs:,}"]
        cells += [f"{r.seconds.get(s, 0.0):.2f}" for s in STEPS] + [f"{r.total:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(rows: Sequence[Row], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [c for c in CLUSTERS if any(r.cluster == c for r in rows)]
    fig, axes = plt.subplots(1, len(shown), figsize=(5.5 * len(shown), 4.2), sharey=True, squeeze=False)
    for ax, cluster in zip(axes[0], shown, strict=True):
        mine = [r for r in rows if r.cluster == cluster]
        nodes = [r.nodes for r in mine]
        for step in (*STEPS, "total"):
            values = [r.total if step == "total" else r.seconds.get(step, 0.0) for r in mine]
            if max(values, default=0.0) < 0.005:
                continue
            ax.plot(nodes, values, marker="o", label=step, linewidth=2.5 if step == "total" else 1.2)
        ax.plot(nodes, [mine[0].total * n / nodes[0] for n in nodes], "k:", label="linear from the first size")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("nodes (8 GPUs each)")
        ax.set_title(
            "allocate cluster (10 pending pods per node)"
            if cluster == "allocate"
            else "busy cluster (20 running pods per node, reclaim and preempt)"
        )
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("CPU seconds")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
