"""Emulated workload controllers for `kai sim`: Deployments, StatefulSets, Jobs, KubeRay,
Kubeflow, JobSet and LeaderWorkerSet create their child objects and pods the way the real
controllers and operators do, so users can apply the same YAML they would `kubectl apply`.

Each controller is a pure function of raw Kubernetes dicts (see `model.Controller`); the
simulator's store calls `controller_for(obj).reconcile(owner=..., children=..., names=...)`
for every object until nothing changes, and applies the returned `Reconciliation`. What each
kind emulates, and what it leaves out, is documented in its module (`apps`, `batch`, `ray`,
`ray_jobs`, `kubeflow`, `mpi`, `jobset`, `lws`).

The registry (and with it every controller module) is imported when first asked for: a simulation
without workloads, such as a scale benchmark's pods and PodGroups, never needs it.
"""

from typing import TYPE_CHECKING, Any

from kai.sim.controllers.model import (
    Controller,
    Event,
    NameSource,
    Obj,
    ObjectRef,
    Reconciliation,
    SpecError,
)
from kai.sim.controllers.names import SeededNameSource

if TYPE_CHECKING:
    from kai.sim.controllers.registry import CONTROLLERS, controller_for, is_restarting_owner, registry_key

_FROM_REGISTRY = frozenset({"CONTROLLERS", "controller_for", "is_restarting_owner", "registry_key"})


def __getattr__(name: str) -> Any:
    if name in _FROM_REGISTRY:
        from kai.sim.controllers import registry

        return getattr(registry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CONTROLLERS",
    "Controller",
    "Event",
    "NameSource",
    "Obj",
    "ObjectRef",
    "Reconciliation",
    "SeededNameSource",
    "SpecError",
    "controller_for",
    "is_restarting_owner",
    "registry_key",
]
