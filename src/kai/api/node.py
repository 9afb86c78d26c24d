"""Nodes: allocatable resources, labels, taints and whether new pods may land there."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from kai.api.errors import Source
from kai.api.fields import Reader
from kai.api.meta import ObjectMeta, read_meta
from kai.api.quantity import QuantityError, amount, cpu_millis

GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
DEFAULT_GPU_MEMORY_MIB = 100  # KAI's DefaultGpuMemory when the label is missing


class Taint(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    value: str
    effect: str  # NoSchedule, PreferNoSchedule, NoExecute


class Node(msgspec.Struct, frozen=True, kw_only=True):
    meta: ObjectMeta
    allocatable: Mapping[str, float]  # cpu millicores, memory bytes, others base units; pods a count
    taints: tuple[Taint, ...]
    unschedulable: bool
    ready: bool

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def gpu_memory_mib(self) -> int:
        """Memory of each GPU on the node, from the GPU feature discovery label."""
        text = self.meta.labels.get(GPU_MEMORY_LABEL, "")
        try:
            value = int(text)
        except ValueError:
            return DEFAULT_GPU_MEMORY_MIB
        return value if value > 0 else DEFAULT_GPU_MEMORY_MIB


class NodeBody(msgspec.Struct, frozen=True, kw_only=True):
    """What a node's spec and status say, apart from its metadata (nodes of one type share one)."""

    allocatable: Mapping[str, float]
    taints: tuple[Taint, ...]
    unschedulable: bool
    ready: bool


def read_node_body(top: Reader) -> NodeBody:
    """The spec and status of the node whose top-level mapping `top` reads."""
    status = top.child("status")
    key = "allocatable" if status.has("allocatable") else "capacity"
    resources = status.string_map(key)
    allocatable: dict[str, float] = {}
    for name, value in resources.items():
        try:
            allocatable[name] = cpu_millis(value) if name == "cpu" else amount(value)
        except QuantityError as exc:
            raise status.error(f"{key}.{name}", str(exc)) from None
    allocatable.setdefault("pods", 110.0)
    spec = top.child("spec")
    taints = []
    for taint in spec.children("taints"):
        effect = taint.text("effect")
        if effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise taint.error("effect", f'must be NoSchedule, PreferNoSchedule or NoExecute, got "{effect}"')
        taints.append(Taint(key=taint.text("key"), value=taint.text("value"), effect=effect))
    ready = True
    for cond in status.children("conditions"):
        if cond.text("type") == "Ready":
            ready = cond.text("status") == "True"
    return NodeBody(
        allocatable=allocatable, taints=tuple(taints), unschedulable=spec.flag("unschedulable", False), ready=ready
    )


def node_of(meta: ObjectMeta, body: NodeBody) -> Node:
    return Node(
        meta=meta, allocatable=body.allocatable, taints=body.taints, unschedulable=body.unschedulable, ready=body.ready
    )


def parse_node(raw: Mapping[str, Any], *, source: Source | None) -> Node:
    meta = read_meta(raw, source=source, kind="Node", namespaced=False)
    return node_of(meta, read_node_body(Reader(raw, source=source, kind="Node", name=meta.name)))
