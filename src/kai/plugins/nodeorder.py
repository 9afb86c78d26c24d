"""Node scores: bin-pack or spread, CPU-only nodes for CPU-only tasks, nominated nodes.

Magnitudes are in `kai.core.scores`; the idle-fit and shared-GPU scores depend on the fit itself
and are added where the fit is computed (`kai.actions.common.placement`).
"""

from __future__ import annotations

import numpy as np

from kai.core.fit import Fit
from kai.core.gpu_devices import DeviceChoice
from kai.core.model import BoolVector, Task
from kai.core.resources import CPU, GPU, Vector
from kai.core.scores import CPU_ONLY_NODE, MAX_PLACEMENT, NOMINATED, SHARED_GPU_FITS
from kai.core.session import Session


def placement_scores(session: Session, task: Task, candidates: BoolVector) -> Vector:
    """Bin-pack: fuller nodes score higher; spread: emptier nodes score higher (per KAI)."""
    uses_gpu = task.request[GPU] > 0 or task.is_shared_gpu
    resource = GPU if uses_gpu else CPU
    strategy = session.config.gpu_placement if uses_gpu else session.config.cpu_placement
    if strategy not in ("binpack", "spread"):
        return np.zeros(session.snapshot.nodes.count)  # another policy (fragmentation) places GPU tasks
    free = session.idle[:, resource]
    scores = np.zeros(session.snapshot.nodes.count)
    if not candidates.any():
        return scores
    if strategy == "spread":
        capacity = session.snapshot.nodes.allocatable[:, resource]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(capacity > 0, free / capacity, 0.0)
        return np.where(candidates, MAX_PLACEMENT * np.clip(ratio, 0.0, 1.0), 0.0)
    lo = float(free[candidates].min())
    hi = float(free[candidates].max())
    if hi == lo:
        return np.where(candidates, MAX_PLACEMENT, 0.0)
    return np.where(candidates, MAX_PLACEMENT * (1.0 - (free - lo) / (hi - lo)), 0.0)


def resource_type_scores(session: Session, task: Task, candidates: BoolVector) -> Vector:
    if task.request[GPU] > 0 or task.is_shared_gpu:
        return np.zeros(session.snapshot.nodes.count)
    cpu_only = session.snapshot.nodes.allocatable[:, GPU] == 0
    return np.where(candidates & cpu_only, CPU_ONLY_NODE, 0.0)


def nominated_scores(session: Session, task: Task, candidates: BoolVector) -> Vector:
    scores = np.zeros(session.snapshot.nodes.count)
    if task.nominated_node >= 0 and candidates[task.nominated_node]:
        scores[task.nominated_node] = NOMINATED
    return scores


class SharedGpuOrder:
    """gpupack/gpuspread at the node level: prefer a node with a shared device the fraction fits on now.

    The device inside the node is the fit's own choice (fullest shared device first for binpack,
    idle devices first for spread; see `kai.core.gpu_devices.choose_devices`).
    """

    def node_bonus(self, session: Session, task: Task, fit: Fit) -> Vector:
        bonus = np.zeros(session.snapshot.nodes.count)
        if task.is_shared_gpu:
            for node, choice in fit.devices.items():
                if choice.existing and not choice.pipelined:
                    bonus[node] = SHARED_GPU_FITS
        return bonus

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
            session.set_gpu_policy(SharedGpuOrder())
