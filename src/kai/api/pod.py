"""Pods as the scheduler sees them: requests, placement constraints, GPU-sharing annotations.

The effective request follows Kubernetes: the sum over containers, at least the largest init
container, plus pod overhead; a resource given only as a limit is requested at the limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from kai.api.errors import Source
from kai.api.fields import Reader
from kai.api.meta import ObjectMeta, read_meta
from kai.api.quantity import QuantityError, amount, cpu_millis

GPU_RESOURCE = "nvidia.com/gpu"
GPU_FRACTION = "gpu-fraction"
GPU_MEMORY = "gpu-memory"
GPU_FRACTION_NUM_DEVICES = "gpu-fraction-num-devices"
GPU_FRACTION_CONTAINER = "gpu-fraction-container-name"
MPS = "mps"
GPU_SHARING_ANNOTATIONS = (GPU_FRACTION, GPU_MEMORY, GPU_FRACTION_NUM_DEVICES, GPU_FRACTION_CONTAINER, MPS)
_GPU_SHARING = frozenset(GPU_SHARING_ANNOTATIONS)
POD_GROUP_ANNOTATION = "pod-group-name"
SUBGROUP_LABEL = "kai.scheduler/subgroup-name"
TASK_PRIORITY_LABEL = "kai.scheduler/task-priority"
GPU_GROUP_LABEL = "runai-gpu-group"
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")


class NodeSelectorRequirement(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...]


class NodeSelectorTerm(msgspec.Struct, frozen=True, kw_only=True):
    """All expressions must hold; `fields` are matchFields on `metadata.name`."""

    expressions: tuple[NodeSelectorRequirement, ...]
    fields: tuple[NodeSelectorRequirement, ...] = ()


class Toleration(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    operator: str  # Equal or Exists
    value: str
    effect: str  # "" matches every effect


class GpuShare(msgspec.Struct, frozen=True, kw_only=True):
    """A GPU-sharing request: a portion of each of `num_devices` devices, by fraction or by memory."""

    fraction: float | None
    memory_mib: int | None
    num_devices: int


class Pod(msgspec.Struct, frozen=True, kw_only=True):
    """A pod as read. A frozen msgspec Struct, not a dataclass: the simulator's store builds one per pod it
    reads and again when it stamps the uid and creation time (`msgspec.structs.replace`, one C call)."""

    meta: ObjectMeta
    scheduler_name: str
    node_name: str
    phase: str
    requests: Mapping[str, float]  # cpu millicores, memory bytes, nvidia.com/gpu devices, others base units
    node_selector: Mapping[str, str] = msgspec.field(default_factory=dict)
    affinity_terms: tuple[NodeSelectorTerm, ...] = ()  # required node affinity: any term must hold
    tolerations: tuple[Toleration, ...] = ()
    priority_class_name: str = ""
    termination_grace_seconds: float = 30.0
    gpu_share: GpuShare | None = None

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def namespace(self) -> str:
        return self.meta.namespace

    @property
    def key(self) -> str:
        return f"{self.meta.namespace}/{self.meta.name}"


def _container_requests(container: Reader) -> dict[str, float]:
    resources = container.child("resources")
    limits = resources.string_map("limits")
    requests = resources.string_map("requests")
    merged = dict(limits)
    merged.update(requests)
    out: dict[str, float] = {}
    for name, value in merged.items():
        key = "requests" if name in requests else "limits"
        try:
            out[name] = cpu_millis(value) if name == "cpu" else amount(value)
        except QuantityError as exc:
            raise resources.error(f"{key}.{name}", str(exc)) from None
        if out[name] < 0:
            raise resources.error(f"{key}.{name}", f"must not be negative, got {value}")
    return out


def parse_pod_spec_requests(spec: Reader) -> dict[str, float]:
    """The effective resource request of a pod spec (also used for pod templates)."""
    total: dict[str, float] = {}
    for container in spec.children("containers"):
        for name, value in _container_requests(container).items():
            total[name] = total.get(name, 0.0) + value
    for container in spec.children("initContainers"):
        for name, value in _container_requests(container).items():
            total[name] = max(total.get(name, 0.0), value)
    overhead = spec.string_map("overhead")
    for res_name, text in overhead.items():
        try:
            value = cpu_millis(text) if res_name == "cpu" else amount(text)
        except QuantityError as exc:
            raise spec.error(f"overhead.{res_name}", str(exc)) from None
        total[res_name] = total.get(res_name, 0.0) + value
    return total


def _requirements(items: list[Reader]) -> tuple[NodeSelectorRequirement, ...]:
    out = []
    for expr in items:
        operator = expr.text("operator")
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
            raise expr.error("operator", f'must be In, NotIn, Exists, DoesNotExist, Gt or Lt, got "{operator}"')
        values = tuple(str(v) for v in expr.sequence("values"))
        out.append(NodeSelectorRequirement(key=expr.text("key"), operator=operator, values=values))
    return tuple(out)


def _affinity_terms(spec: Reader) -> tuple[NodeSelectorTerm, ...]:
    required = spec.child("affinity").child("nodeAffinity").child("requiredDuringSchedulingIgnoredDuringExecution")
    terms = []
    for term in required.children("nodeSelectorTerms"):
        terms.append(
            NodeSelectorTerm(
                expressions=_requirements(term.children("matchExpressions")),
                fields=_requirements(term.children("matchFields")),
            )
        )
    return tuple(terms)


def _tolerations(spec: Reader) -> tuple[Toleration, ...]:
    out = []
    for tol in spec.children("tolerations"):
        operator = tol.text("operator", "Equal")
        if operator not in ("Equal", "Exists"):
            raise tol.error("operator", f'must be Equal or Exists, got "{operator}"')
        out.append(
            Toleration(key=tol.text("key"), operator=operator, value=tol.text("value"), effect=tol.text("effect"))
        )
    return tuple(out)


def parse_gpu_share(annotations: Mapping[str, str], requests: Mapping[str, float], reader: Reader) -> GpuShare | None:
    """Validate the GPU-sharing annotations; None for a pod that does not share a GPU."""
    # As KAI's admission and scheduler: an annotation with an empty value counts as absent.
    fraction_text = annotations.get(GPU_FRACTION) or None
    memory_text = annotations.get(GPU_MEMORY) or None
    if fraction_text is None and memory_text is None:
        if GPU_FRACTION_NUM_DEVICES in annotations:
            raise reader.error(
                f"metadata.annotations.{GPU_FRACTION_NUM_DEVICES}", f"needs {GPU_FRACTION} or {GPU_MEMORY}"
            )
        if annotations.get(MPS) == "true":
            raise reader.error(f"metadata.annotations.{MPS}", f"is only allowed with {GPU_FRACTION} or {GPU_MEMORY}")
        return None
    container = annotations.get(GPU_FRACTION_CONTAINER)
    if container is not None:
        spec = reader.child("spec")
        names = [c.text("name") for key in ("initContainers", "containers") for c in spec.children(key)]
        if container not in names:
            raise reader.error(
                f"metadata.annotations.{GPU_FRACTION_CONTAINER}",
                f'names no container of the pod: "{container}" (containers: {", ".join(names)})',
            )
    if fraction_text is not None and memory_text is not None:
        raise reader.error(f"metadata.annotations.{GPU_MEMORY}", f"cannot be combined with {GPU_FRACTION}")
    if requests.get(GPU_RESOURCE, 0.0) > 0:
        which = GPU_FRACTION if fraction_text is not None else GPU_MEMORY
        raise reader.error(f"metadata.annotations.{which}", f"cannot be combined with a {GPU_RESOURCE} request")
    fraction: float | None = None
    memory: int | None = None
    if fraction_text is not None:
        try:
            fraction = float(fraction_text)
        except ValueError:
            raise reader.error(
                f"metadata.annotations.{GPU_FRACTION}",
                f'must be a number between 0 and 1, got "{fraction_text}"',
            ) from None
        if not 0 < fraction < 1:
            raise reader.error(
                f"metadata.annotations.{GPU_FRACTION}",
                f'must be greater than 0 and less than 1, got "{fraction_text}"; request whole GPUs with '
                f"{GPU_RESOURCE}",
            )
    if memory_text is not None:
        try:
            memory = int(memory_text)
        except ValueError:
            raise reader.error(
                f"metadata.annotations.{GPU_MEMORY}", f'must be a whole number of MiB, got "{memory_text}"'
            ) from None
        if memory <= 0:
            raise reader.error(f"metadata.annotations.{GPU_MEMORY}", f'must be greater than 0, got "{memory_text}"')
    devices_text = annotations.get(GPU_FRACTION_NUM_DEVICES, "1")
    try:
        devices = int(devices_text)
    except ValueError:
        devices = 0
    if devices < 1:
        raise reader.error(
            f"metadata.annotations.{GPU_FRACTION_NUM_DEVICES}",
            f'must be a whole number >= 1, got "{devices_text}"',
        )
    return GpuShare(fraction=fraction, memory_mib=memory, num_devices=devices)


class PodBody(msgspec.Struct, frozen=True, kw_only=True):
    """What a pod's spec and status say, apart from its metadata (pods of a gang share one)."""

    scheduler_name: str
    node_name: str
    phase: str
    requests: Mapping[str, float]
    node_selector: Mapping[str, str]
    affinity_terms: tuple[NodeSelectorTerm, ...]
    tolerations: tuple[Toleration, ...]
    priority_class_name: str
    termination_grace_seconds: float


def read_pod_body(top: Reader) -> PodBody:
    """The spec and status of the pod whose top-level mapping `top` reads."""
    spec = top.child("spec")
    if not spec.sequence("containers"):
        raise spec.error("containers", "must list at least one container")
    requests = parse_pod_spec_requests(spec)
    phase = top.child("status").text("phase", "Pending")
    if phase not in PHASES:
        raise top.error("status.phase", f'must be one of {", ".join(PHASES)}, got "{phase}"')
    grace = spec.number("terminationGracePeriodSeconds", 30.0)
    return PodBody(
        scheduler_name=spec.text("schedulerName", "default-scheduler"),
        node_name=spec.text("nodeName"),
        phase=phase,
        requests=requests,
        node_selector=spec.string_map("nodeSelector"),
        affinity_terms=_affinity_terms(spec),
        tolerations=_tolerations(spec),
        priority_class_name=spec.text("priorityClassName"),
        termination_grace_seconds=max(0.0, grace),
    )


def pod_of(meta: ObjectMeta, body: PodBody, raw: Mapping[str, Any], *, source: Source | None) -> Pod:
    """The pod of this metadata and body; `raw` is the whole object, read (and named in the errors) by the
    GPU-sharing checks of a pod with one of their annotations."""
    gpu_share = None
    if not meta.annotations.keys().isdisjoint(_GPU_SHARING):  # most pods: no Reader to make
        gpu_share = parse_gpu_share(
            meta.annotations, body.requests, Reader(raw, source=source, kind="Pod", name=meta.name)
        )
    return Pod(
        meta=meta,
        scheduler_name=body.scheduler_name,
        node_name=body.node_name,
        phase=body.phase,
        requests=body.requests,
        node_selector=body.node_selector,
        affinity_terms=body.affinity_terms,
        tolerations=body.tolerations,
        priority_class_name=body.priority_class_name,
        termination_grace_seconds=body.termination_grace_seconds,
        gpu_share=gpu_share,
    )


def parse_pod(raw: Mapping[str, Any], *, source: Source | None) -> Pod:
    meta = read_meta(raw, source=source, kind="Pod", namespaced=True)
    return pod_of(meta, read_pod_body(Reader(raw, source=source, kind="Pod", name=meta.name)), raw, source=source)
