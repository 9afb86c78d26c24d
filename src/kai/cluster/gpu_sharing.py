"""GPU sharing made real on a cluster: reservation pods, device settings, and their accounting.

On a cluster a shared device must be held by something the kubelet and every other scheduler see.
As KAI's binder does, kai keeps one **reservation pod** per shared device (GPU group): a pod in the
reservation namespace, pinned to the node, requesting one whole `nvidia.com/gpu`, labelled
`app=kai-resource-reservation` and `runai-gpu-group=<group>`; the device plugin gives it a real
device, whose UUID the pod reports in its annotation `run.ai/reserve_for_gpu_index`. The sharers of
the device get that UUID in `NVIDIA_VISIBLE_DEVICES`.

This module holds the rules, pure (no I/O, no clock); the Kubernetes adapter performs the writes
(`kai.kubernetes.reservations`), and the simulator, which emulates devices itself
(`kai.sim.binder`), uses only `device_env`:

* `plan_reservations`: which reservation pods to create (a group in use without one) and which to
  delete (a group nobody uses any more, a duplicate, one on the wrong node); the same rule serves a
  bind, the last sharer leaving, and the resync after a restart;
* `account_reservations`: a reservation pod and the sharers of its device are one whole used GPU
  of the node, never two: the sharers' group already counts the device, so the reservation pod is
  counted without its GPU (its other requests still count);
* `device_env`: the values a sharer's containers get (`NVIDIA_VISIBLE_DEVICES`, `GPU_PORTION`,
  `RUNAI_NUM_OF_GPUS`), for device indices in the simulator and device UUIDs on a cluster.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import msgspec

from kai.api import pod as api_pod
from kai.cluster.reservation_names import APP_LABEL, RESERVATION_APP
from kai.core.model import TaskStatus
from kai.core.snapshot_builder import PodState

DEVICE_UUID_ANNOTATION = "run.ai/reserve_for_gpu_index"
CONFIGMAP_ANNOTATION = "runai/shared-gpu-configmap"
CDI_DEVICE_PREFIX = "k8s.device-plugin.nvidia.com/gpu="
VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
GPU_PORTION = "GPU_PORTION"
NUM_OF_GPUS = "RUNAI_NUM_OF_GPUS"
DEVICE_ENV_KEYS = (VISIBLE_DEVICES, NUM_OF_GPUS, GPU_PORTION)

# The task states in which a pod holds its shared devices (as the snapshot builder counts them).
HOLDING = (TaskStatus.RUNNING, TaskStatus.ALLOCATED, TaskStatus.RELEASING)


def format_portion(portion: float) -> str:
    """A portion as KAI's binder writes it (`%.2f`)."""
    return f"{portion:.2f}"


def device_env(devices: Sequence[str], portion: float | None) -> dict[str, str]:
    """What a bound pod's containers get: the visible devices, and for a shared pod its portion.

    `portion` is None for a pod of whole GPUs; for a shared pod it is the portion of each device.
    """
    visible = ",".join(devices)
    if portion is None:
        return {VISIBLE_DEVICES: visible} if devices else {}
    share = format_portion(portion)
    return {VISIBLE_DEVICES: visible, GPU_PORTION: share, NUM_OF_GPUS: share}


def visible_device_names(uuids: Sequence[str], *, cdi: bool) -> list[str]:
    """Device UUIDs as `NVIDIA_VISIBLE_DEVICES` names them: plain, or as CDI device names."""
    return [f"{CDI_DEVICE_PREFIX}{uuid}" if cdi else uuid for uuid in uuids]


def reservation_group(labels: Mapping[str, str]) -> str | None:
    """The GPU group a reservation pod holds, or None if the labels are not a reservation pod's."""
    if labels.get(APP_LABEL) != RESERVATION_APP:
        return None
    return labels.get(api_pod.GPU_GROUP_LABEL) or None


# ------------------------------------------------------------------------------------------ accounting
def _held_groups(ours: Sequence[PodState]) -> set[tuple[str, str]]:
    held: set[tuple[str, str]] = set()
    for state in ours:
        if state.node and state.status in HOLDING and state.pod.gpu_share is not None:
            for group in state.gpu_groups:
                held.add((state.node, group))
    return held


def account_reservations(ours: Sequence[PodState], foreign: Sequence[PodState]) -> Sequence[PodState]:
    """The foreign pods as a cycle counts them: a reservation pod whose device is held by sharers of
    ours on the same node is counted without its `nvidia.com/gpu` (the sharers' group counts the
    device as one whole used GPU). A reservation pod nobody shares any more holds its device until it
    is gone, and counts whole."""
    if not any(reservation_group(s.pod.meta.labels) for s in foreign):
        return foreign
    held = _held_groups(ours)
    out: list[PodState] = []
    for state in foreign:
        group = reservation_group(state.pod.meta.labels)
        if group is not None and state.node and (state.node, group) in held:
            requests = {k: v for k, v in state.pod.requests.items() if k != api_pod.GPU_RESOURCE}
            state = msgspec.structs.replace(state, pod=msgspec.structs.replace(state.pod, requests=requests))
        out.append(state)
    return out


# ------------------------------------------------------------------------------------------ reservations
class Reservation(msgspec.Struct, frozen=True, kw_only=True):
    """A reservation pod as the cluster shows it (or as the adapter just created it)."""

    pod: str  # namespace/name
    node: str
    group: str
    uuid: str | None  # the device's UUID once the pod reported it
    terminating: bool
    created: float


class Reserve(msgspec.Struct, frozen=True, kw_only=True):
    """Create a reservation pod for `group` on `node`."""

    node: str
    group: str


class Release(msgspec.Struct, frozen=True, kw_only=True):
    """Delete the reservation pod `pod` (namespace/name); `why` is for logs and events."""

    pod: str
    node: str
    group: str
    why: str


ReservationEffect = Reserve | Release


class DeviceUse(msgspec.Struct, frozen=True, kw_only=True):
    """Which shared devices (node, group) pods of ours use.

    `keep`: a pod holds the device (bound, running or terminating: its containers may still use it,
    or its binding is under way), so its reservation pod stays. `need`: a pod runs on it or is being
    bound to it, on a node that exists, so a missing reservation pod is made again (a terminating
    pod's device is not reserved anew).
    """

    keep: frozenset[tuple[str, str]]
    need: frozenset[tuple[str, str]]


def device_use(
    ours: Sequence[PodState], binding: Sequence[tuple[str, Sequence[str]]], *, nodes: Collection[str]
) -> DeviceUse:
    """The shared devices in use, from the pods of ours and this cycle's binds ((node, groups) each)."""
    keep = _held_groups(ours)
    need: set[tuple[str, str]] = set()
    for state in ours:
        running = state.status in (TaskStatus.RUNNING, TaskStatus.ALLOCATED)
        if state.node and state.node in nodes and running and state.pod.gpu_share is not None:
            need.update((state.node, group) for group in state.gpu_groups)
    for node, groups in binding:
        keep.update((node, group) for group in groups)
        need.update((node, group) for group in groups)
    return DeviceUse(keep=frozenset(keep), need=frozenset(need))


def plan_reservations(*, use: DeviceUse, reservations: Sequence[Reservation]) -> tuple[ReservationEffect, ...]:
    """The reservation pods to create and delete so that every shared device in use has exactly one.

    Per group, in a fixed order:
    1. a reservation pod whose group no pod holds any more is deleted (the last sharer left, or the
       pod was left behind by a restart);
    2. a reservation pod on another node than the group's is deleted (the group lives on one node);
    3. of several reservation pods for a group, one is kept: the one that reported its device UUID,
       then the oldest, then the first by name; the others are deleted (no double reservation);
    4. a device a pod needs without a live reservation pod gets one.
    Terminating reservation pods are already on their way out: never deleted again, never kept.
    """
    effects: list[ReservationEffect] = []
    by_group: dict[str, list[Reservation]] = {}
    for reservation in reservations:
        if not reservation.terminating:
            by_group.setdefault(reservation.group, []).append(reservation)
    nodes_of = {group: node for node, group in sorted(use.keep)}
    for group in sorted(by_group):
        live = by_group[group]
        node = nodes_of.get(group)
        if node is None:
            for r in sorted(live, key=lambda r: r.pod):
                effects.append(Release(pod=r.pod, node=r.node, group=group, why="no pod uses its device any more"))
            continue
        misplaced = [r for r in live if r.node != node]
        for r in sorted(misplaced, key=lambda r: r.pod):
            effects.append(Release(pod=r.pod, node=r.node, group=group, why=f"its group lives on node {node}"))
        placed = sorted((r for r in live if r.node == node), key=lambda r: (r.uuid is None, r.created, r.pod))
        for r in placed[1:]:
            effects.append(Release(pod=r.pod, node=r.node, group=group, why=f"{placed[0].pod} already reserves it"))
    for node, group in sorted(use.need):
        if not any(r.node == node for r in by_group.get(group, ())):
            effects.append(Reserve(node=node, group=group))
    return tuple(effects)


# ------------------------------------------------------------------------------------------ device settings
class ContainerRef(msgspec.Struct, frozen=True, kw_only=True):
    """The container that gets a shared pod's device settings: `index` in `containers`, or in
    `initContainers` when `init` (KAI names its ConfigMap `<base>-<index>`, `<base>-i<index>` for init)."""

    name: str
    index: int
    init: bool

    @property
    def suffix(self) -> str:
        return f"i{self.index}" if self.init else str(self.index)


def fraction_container(pod: Mapping[str, Any]) -> ContainerRef | None:
    """The container named by `gpu-fraction-container-name` (init containers first, as KAI looks),
    else the first container; None when the name matches no container."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    spec = pod.get("spec") or {}
    wanted = annotations.get(api_pod.GPU_FRACTION_CONTAINER)
    containers = [c for c in spec.get("containers") or () if isinstance(c, Mapping)]
    if wanted is None:
        return ContainerRef(name=str(containers[0].get("name", "")), index=0, init=False) if containers else None
    for init, items in ((True, spec.get("initContainers") or ()), (False, containers)):
        for index, container in enumerate(c for c in items if isinstance(c, Mapping)):
            if container.get("name") == wanted:
                return ContainerRef(name=str(wanted), index=index, init=init)
    return None


def capabilities_configmap(base: str, container: ContainerRef) -> str:
    """The ConfigMap that carries a shared pod's device settings for `container`."""
    return f"{base}-{container.suffix}"


def referenced_configmaps(pod: Mapping[str, Any], base: str) -> list[str]:
    """The ConfigMaps of the pod's GPU-sharing settings that its containers and volumes reference
    (the capabilities one, and e.g. the `-evar` one that KAI's admission adds), sorted."""
    spec = pod.get("spec") or {}
    names: set[str] = set()
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or ():
            for env in container.get("env") or ():
                ref = (env.get("valueFrom") or {}).get("configMapKeyRef") or {}
                names.add(str(ref.get("name") or ""))
            for source in container.get("envFrom") or ():
                names.add(str((source.get("configMapRef") or {}).get("name") or ""))
    for volume in spec.get("volumes") or ():
        names.add(str((volume.get("configMap") or {}).get("name") or ""))
    return sorted(n for n in names if n.startswith(f"{base}-"))
