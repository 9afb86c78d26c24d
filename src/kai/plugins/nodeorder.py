"""Node scores: bin-pack or spread, CPU-only nodes for CPU-only tasks, nominated nodes.

Magnitudes are in `kai.core.scores`; the idle-fit and shared-GPU scores depend on the fit itself
and are added where the fit is computed (`kai.actions.common.placement`).
"""

from __future__ import annotations

import numpy as np

from kai.core.fit import Fit
from kai.core.gpu_devices import DeviceChoice
from kai.core.model import NodeIndices, Task
from kai.core.resources import CPU, GPU, Vector
from kai.core.scores import CPU_ONLY_NODE, MAX_PLACEMENT, NOMINATED, SHARED_GPU_FITS
from kai.core.session import Session


def _scaled(value: Vector) -> Vector:
    """Map `value` (lower is better; one per candidate node) onto 0..9: the lowest gets 9, the highest 0."""
    lo = float(value.min())
    hi = float(value.max())
    if hi == lo:
        return np.full(len(value), MAX_PLACEMENT)
    return MAX_PLACEMENT * (1.0 - (value - lo) / (hi - lo))


def placement_scores(session: Session, task: Task, nodes: NodeIndices) -> Vector:
    """Bin-pack or spread, per resource type, on the candidate nodes `nodes`.

    * GPU tasks: KAI's scores on the GPU resource; bin-pack prefers the node with the fewest free
      GPUs, spread the one with the largest free share (free: idle or being released, as in KAI).
    * CPU-only tasks with spread: KAI's spread on CPU.
    * CPU-only tasks with bin-pack: best fit over CPU *and* GPUs (the smallest leftover of both,
      each relative to the largest node), so CPU work fills nodes whose GPUs are already taken
      instead of stranding free GPUs behind a full CPU. KAI bin-packs these on CPU alone; with
      equal free GPUs the two agree. On the public Alibaba trace this lifts the GPU allocation
      ratio of bin-pack above best fit's (see the README's replay table).
    * Under the `fragmentation` GPU policy the FGD plugin scores every task instead.
    """
    if not len(nodes) or session.config.gpu_placement not in ("binpack", "spread"):
        return np.zeros(len(nodes))
    uses_gpu = task.request[GPU] > 0 or task.is_shared_gpu
    strategy = session.config.gpu_placement if uses_gpu else session.config.cpu_placement
    resource = GPU if uses_gpu else CPU
    if strategy == "spread":
        capacity = session.snapshot.nodes.allocatable[nodes, resource]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(capacity > 0, session.free(resource, nodes) / capacity, 0.0)
        return MAX_PLACEMENT * np.clip(ratio, 0.0, 1.0)
    if uses_gpu:
        return _scaled(session.free(GPU, nodes))
    allocatable = session.snapshot.nodes.allocatable
    max_cpu = max(1.0, float(allocatable[:, CPU].max()))
    max_gpu = max(1.0, float(allocatable[:, GPU].max()))
    free_gpu = session.free(GPU, nodes) + shared_gpu_room(session)[nodes]
    leftover = 0.5 * (session.free(CPU, nodes) - task.request[CPU]) / max_cpu + 0.5 * free_gpu / max_gpu
    return _scaled(leftover)


def shared_gpu_room(session: Session) -> Vector:
    """Free portions on each node's shared devices (devices whose holders are all leaving excluded)."""
    return session.shared_room_total


def resource_type_scores(session: Session, task: Task, nodes: NodeIndices) -> Vector:
    """CPU-only tasks prefer the candidate nodes without GPUs."""
    if task.request[GPU] > 0 or task.is_shared_gpu:
        return np.zeros(len(nodes))
    cpu_only = session.snapshot.nodes.allocatable[nodes, GPU] == 0
    return np.where(cpu_only, CPU_ONLY_NODE, 0.0)


def nominated_scores(session: Session, task: Task, nodes: NodeIndices) -> Vector:
    """The task's nominated node, if it is a candidate, outscores every other."""
    scores = np.zeros(len(nodes))
    nominated = task.nominated_node
    if nominated >= 0:
        at = int(np.searchsorted(nodes, nominated))
        if at < len(nodes) and int(nodes[at]) == nominated:
            scores[at] = NOMINATED
    return scores


class SharedGpuOrder:
    """gpupack/gpuspread at the node level.

    With bin-pack, a node with a shared device the fraction fits on is preferred (KAI's
    gpusharingorder, +1000); with spread there is no such preference, as KAI enables that score only
    for bin-pack. The device inside the node is the fit's own choice (fullest shared device first
    for bin-pack, idle devices first for spread; see `kai.core.gpu_devices.choose_devices`).
    """

    def node_bonus(self, session: Session, task: Task, fit: Fit, nodes: NodeIndices) -> Vector:
        if session.config.gpu_device_policy == "spread":
            return np.zeros(len(nodes))
        return np.where(fit.shares_existing[nodes], SHARED_GPU_FITS, 0.0)

    def devices(self, session: Session, task: Task, node: int, fit: Fit) -> DeviceChoice | None:
        return None


class NodeOrderPlugin:
    """Registers every node score above (nodeplacement, resourcetype, nominatednode in KAI)."""

    name = "nodeorder"

    def on_session_open(self, session: Session) -> None:
        session.node_scores.append(placement_scores)
        session.node_scores.append(resource_type_scores)
        session.node_scores.append(nominated_scores)
        if session.config.gpu_placement in ("binpack", "spread"):
            policy = SharedGpuOrder()
            session.set_gpu_policy(policy)
            if session.config.gpu_placement == "binpack":
                # for a whole-GPU task: the fewest free GPUs scaled into 0..9, FITS_IDLE beside it; no
                # resource-type score, no nominated node, no shared-device bonus (Session.packing)
                session.packing.update((placement_scores, resource_type_scores, nominated_scores, policy))
