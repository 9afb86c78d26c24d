"""Resource vectors: every request, capacity and usage in the core is a float64 numpy vector.

Core resources sit at fixed positions so code can index them by constant; extended resources
(MIG slices, ephemeral storage, hugepages, ...) get positions after them, assigned per snapshot.
Units are the scheduler's internal ones: cpu in millicores, memory in bytes, gpu in devices
(fractions allowed), pods as a count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float64]

CPU = 0
MEMORY = 1
GPU = 2
PODS = 3
CORE_NAMES: tuple[str, ...] = ("cpu", "memory", "nvidia.com/gpu", "pods")
# The three resources that queues divide: the Queue CRD's gpu, cpu and memory, in vector order.
QUEUE_RESOURCES: tuple[int, ...] = (GPU, CPU, MEMORY)
QUEUE_RESOURCE_NAMES: tuple[str, ...] = ("gpu", "cpu", "memory")
MB = 1_000_000.0


class ResourceIndex:
    """Maps resource names to vector positions; core resources first, then sorted extended ones."""

    __slots__ = ("_names", "_positions")

    def __init__(self, extended: Iterable[str] = ()) -> None:
        extra = sorted({name for name in extended if name not in CORE_NAMES})
        self._names: tuple[str, ...] = CORE_NAMES + tuple(extra)
        self._positions: dict[str, int] = {name: i for i, name in enumerate(self._names)}

    @property
    def size(self) -> int:
        return len(self._names)

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    def position(self, name: str) -> int | None:
        return self._positions.get(name)

    def zeros(self) -> Vector:
        return np.zeros(self.size, dtype=np.float64)

    def vector(self, amounts: Mapping[str, float]) -> Vector:
        """A vector from a name->amount map; names this index does not know are ignored."""
        out = self.zeros()
        for name, amount in amounts.items():
            pos = self._positions.get(name)
            if pos is not None:
                out[pos] += amount
        return out


UNLIMITED = -1.0  # a queue quota or limit of -1: no bound


def allocatable_share(deserved: Vector, fair_share: Vector, limit: Vector) -> Vector:
    """What a queue may hold (gpu, cpu, memory), as KAI's ResourceShare.GetAllocatableShare computes it.

    With an unlimited quota (-1) it is the limit (itself -1 when unlimited); otherwise the larger of the
    quota and the fair share, capped by the limit unless the limit is -1. Any other negative value is
    used as it is, as KAI does.
    """
    share = np.maximum(deserved, fair_share)
    capped = np.where(limit == UNLIMITED, share, np.minimum(share, limit))
    out: Vector = np.where(deserved == UNLIMITED, limit, capped)
    return out
