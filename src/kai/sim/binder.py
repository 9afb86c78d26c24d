"""The simulator's device plugin: which physical GPUs of its node a bound pod gets.

For every bound pod it records the GPU indices the pod uses (whole GPUs for `nvidia.com/gpu`
requests, one device per shared GPU group for fractions) and the environment a real GPU stack
gives the container: `NVIDIA_VISIBLE_DEVICES`, `GPU_PORTION` and `RUNAI_NUM_OF_GPUS`
(`kai.cluster.gpu_sharing.device_env`, as on a cluster, with indices for UUIDs). Indices are
handed out lowest-free-first, so runs are reproducible. The labels and annotations KAI's binder
writes are planned with every other write (`kai.cluster.effects.bind_metadata`).
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec

from kai.cluster.gpu_sharing import device_env


class NodeDevices(msgspec.Struct):
    capacity: int
    holders: dict[int, str] = msgspec.field(default_factory=dict)  # device index -> "pod:<ns/name>" | "group:<id>"

    def free(self) -> Iterator[int]:
        """The free device indices, lowest first, found lazily: a node may declare a huge capacity
        (nothing bounds `nvidia.com/gpu`), so the free ones are never listed whole."""
        return (i for i in range(self.capacity) if i not in self.holders)

    def index_of_group(self, group: str) -> int | None:
        for index, holder in self.holders.items():
            if holder == f"group:{group}":
                return index
        return None


class Binding(msgspec.Struct, frozen=True, kw_only=True):
    devices: tuple[int, ...]
    env: dict[str, str]


class DeviceLedger:
    """Device indices per node; groups live while any pod uses them."""

    def __init__(self) -> None:
        self.nodes: dict[str, NodeDevices] = {}

    def _node(self, node: str, capacity: int) -> NodeDevices:
        devices = self.nodes.get(node)
        if devices is None:
            devices = self.nodes[node] = NodeDevices(capacity=capacity)
        return devices

    def bind(
        self, *, node: str, capacity: int, pod: str, whole_gpus: int, groups: tuple[str, ...], portion: float
    ) -> Binding:
        devices = self._node(node, capacity)
        indices: list[int] = []
        free = devices.free()
        for _ in range(whole_gpus):
            index = next(free, None)
            if index is None:
                break  # more GPUs bound than the node has: report what there is
            devices.holders[index] = f"pod:{pod}"
            indices.append(index)
        for group in groups:
            held = devices.index_of_group(group)
            if held is None:
                held = next(free, None)
                if held is not None:
                    devices.holders[held] = f"group:{group}"
            if held is not None:
                indices.append(held)
        env = device_env([str(i) for i in indices], portion if groups else None)
        return Binding(devices=tuple(indices), env=env)

    def release(self, *, node: str, pod: str, live_groups: set[str]) -> None:
        """Free the pod's whole GPUs, and any group no live pod on the node still uses."""
        devices = self.nodes.get(node)
        if devices is None:
            return
        for index, holder in list(devices.holders.items()):
            if holder == f"pod:{pod}" or (holder.startswith("group:") and holder[6:] not in live_groups):
                del devices.holders[index]
