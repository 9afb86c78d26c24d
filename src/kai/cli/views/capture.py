"""The simulated cluster at one virtual moment, as the views read it.

`kai sim -o json` carries what the sim contract fixes; people also want to see what each pod
asks for, the nodes and their GPU devices, and how queues were written (`kubectl get queues`
prints the spec's priority and display name as given). `capture` takes all of that from the
simulation at once, so a view never reaches into the engine itself.
"""

from __future__ import annotations

from typing import Any

import msgspec

from kai.api import pod as api_pod
from kai.api.node import GPU_MEMORY_LABEL, GPU_PRODUCT_LABEL
from kai.sim import output
from kai.sim.engine import EventRecord, Simulation

QUEUE_GROUP = "scheduling.run.ai"


class PodAsk(msgspec.Struct, frozen=True, kw_only=True):
    """What a pod requests: its GPU request as written, and CPU (millicores) and memory (bytes)."""

    gpu: str
    cpu: float
    memory: float


class NodeInfo(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    gpu_model: str
    gpu_memory_mib: str
    gpus: int
    cpu: float
    memory: float
    max_pods: int
    status: str  # Ready, NotReady, Ready,SchedulingDisabled (as kubectl)


class QueueSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A queue as written: the `kubectl get queues` columns that print the spec verbatim."""

    priority: str  # "" when the spec leaves it out
    display_name: str
    applied: bool  # False for the default queues the simulator adds


class ClusterView(msgspec.Struct, frozen=True, kw_only=True):
    doc: dict[str, Any]  # the `kai sim -o json` document at this moment
    start: float
    now: float
    asks: dict[str, PodAsk]  # by "namespace/name"
    nodes: tuple[NodeInfo, ...]
    queues: dict[str, QueueSpec]
    timeline: tuple[EventRecord, ...]

    @property
    def namespaces(self) -> list[str]:
        return sorted({p["namespace"] for p in self.doc["pods"]} | {g["namespace"] for g in self.doc["podGroups"]})


def gpu_request(pod: api_pod.Pod) -> str:
    """The GPU request as the user wrote it: `2` whole GPUs, `0.5` of one, `2x0.5`, `20000Mi`."""
    share = pod.gpu_share
    if share is not None:
        each = f"{share.fraction:g}" if share.fraction is not None else f"{share.memory_mib}Mi"
        return each if share.num_devices == 1 else f"{share.num_devices}x{each}"
    return f"{pod.requests.get(api_pod.GPU_RESOURCE, 0.0):g}"


def _node_status(ready: bool, unschedulable: bool) -> str:
    status = "Ready" if ready else "NotReady"
    return f"{status},SchedulingDisabled" if unschedulable else status


def capture(sim: Simulation) -> ClusterView:
    asks = {
        key: PodAsk(
            gpu=gpu_request(p.pod), cpu=p.pod.requests.get("cpu", 0.0), memory=p.pod.requests.get("memory", 0.0)
        )
        for key, p in sim.pods.items()
    }
    nodes = tuple(
        NodeInfo(
            name=n.name,
            gpu_model=n.meta.labels.get(GPU_PRODUCT_LABEL, ""),
            gpu_memory_mib=n.meta.labels.get(GPU_MEMORY_LABEL, ""),
            gpus=int(n.allocatable.get(api_pod.GPU_RESOURCE, 0.0)),
            cpu=n.allocatable.get("cpu", 0.0),
            memory=n.allocatable.get("memory", 0.0),
            max_pods=int(n.allocatable.get("pods", 0.0)),
            status=_node_status(n.ready, n.unschedulable),
        )
        for n in sorted(sim.nodes.values(), key=lambda n: n.name)
    )
    queues = {}
    for name in sim.queues:
        raw = sim.raw_objects.get(("", QUEUE_GROUP, "Queue", name))
        spec = (raw or {}).get("spec") or {}
        priority = spec.get("priority")
        queues[name] = QueueSpec(
            priority="" if priority is None else str(priority),
            display_name=str(spec.get("displayName") or ""),
            applied=raw is not None,
        )
    return ClusterView(
        doc=output.build(sim),
        start=sim.start,
        now=sim.now,
        asks=asks,
        nodes=nodes,
        queues=queues,
        timeline=tuple(sim.timeline),
    )
