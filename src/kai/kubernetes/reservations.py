"""Reservation pods on a real cluster: created, awaited and deleted as `kai.cluster.gpu_sharing` plans.

KAI's binder holds every shared device with a reservation pod (see `kai.cluster.gpu_sharing`); so
does `kai run`. This module is the Kubernetes side:

* it indexes the reservation pods from the cache's pod events (`on_object`), including the ones it
  has created or deleted and not yet seen come back through the watch, so a cycle never plans a
  second pod for a device whose first is on its way;
* every cycle, `reconcile` plans with `plan_reservations` (the groups kai's pods hold or are being
  bound to, against the reservation pods there are) and sends the creations and deletions: a device
  whose last sharer left loses its reservation pod, and after a restart the pods left behind are
  removed and the missing ones recreated;
* `device_uuids` is what a bind waits for: the UUID each reserved device reports in the annotation
  `run.ai/reserve_for_gpu_index` (set by the reservation image, `kai.reservation`), within the
  timeout; a reservation that fails (no UUID in time, or its pod failed) is deleted, as KAI's binder
  does, and the bind is reported failed so the pods are scheduled again.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import string
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kai.api import pod as api_pod
from kai.api.fields import parse_timestamp
from kai.cluster import gpu_sharing as sharing
from kai.cluster.reservation_names import APP_LABEL, RESERVATION_APP
from kai.core.snapshot_builder import PodState
from kai.kubernetes import resources
from kai.kubernetes.options import ReservationSettings
from kai.kubernetes.writer import Writer

log = logging.getLogger(__name__)

RESERVATION_CONTAINER = "resource-reservation"
NAME_PREFIX = "gpu-reservation"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"  # cluster autoscalers leave the node while the device is held
_SUFFIX_ALPHABET = string.ascii_lowercase + string.digits


class ReservationFailed(Exception):
    """A device could not be reserved; the message says which and why, for the pod's event."""


def reservation_pod(*, name: str, node: str, group: str, settings: ReservationSettings) -> dict[str, Any]:
    """The reservation pod for `group` on `node`, as KAI's binder makes it: pinned to the node, one
    whole `nvidia.com/gpu` so the device plugin allocates a real device, labelled with its group."""
    gpu = {api_pod.GPU_RESOURCE: "1"}
    spec: dict[str, Any] = {
        "nodeName": node,
        "serviceAccountName": settings.service_account,
        "containers": [
            {
                "name": RESERVATION_CONTAINER,
                "image": settings.image,
                "imagePullPolicy": "IfNotPresent",
                "resources": {"limits": dict(gpu), "requests": dict(gpu)},
                "env": [
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                ],
            }
        ],
    }
    if settings.runtime_class:
        spec["runtimeClassName"] = settings.runtime_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": settings.namespace,
            "labels": {APP_LABEL: RESERVATION_APP, api_pod.GPU_GROUP_LABEL: group},
            "annotations": {DO_NOT_DISRUPT: "true"},
        },
        "spec": spec,
    }


def _reservation_name(node: str) -> str:
    suffix = "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(5))
    return f"{NAME_PREFIX}-{node}-{suffix}"[:253]


class _Seen(msgspec.Struct):
    reservation: sharing.Reservation
    failed: str | None  # why the pod failed (phase Failed), if it did


@dataclass(slots=True)
class DeviceReservations:
    """The reservation pods of one `kai run`, kept in step with the shared devices in use."""

    writer: Writer
    settings: ReservationSettings = field(default_factory=ReservationSettings)
    clock: Callable[[], float] = time.time
    spawn: Callable[[Any], None] | None = None  # the applier's task spawner (so shutdown drains them)
    _seen: dict[str, _Seen] = field(default_factory=dict)  # pod namespace/name -> as the watch shows it
    _creating: dict[str, sharing.Reservation] = field(default_factory=dict)  # group -> created, not yet seen
    _deleting: set[str] = field(default_factory=set)  # pods whose deletion was sent
    _failures: dict[str, str] = field(default_factory=dict)  # pod -> why creating it failed
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    created: int = 0
    deleted: int = 0

    # ----------------------------------------------------------------- what the watch shows
    def on_object(self, obj: Mapping[str, Any], deleted: bool) -> None:
        """A cache listener: keeps the index of reservation pods (in our namespace) current."""
        if obj.get("kind") != "Pod":
            return
        meta = obj.get("metadata") or {}
        if meta.get("namespace") != self.settings.namespace:
            return
        labels = meta.get("labels") or {}
        group = sharing.reservation_group(labels)
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        if group is None:
            return
        creating = self._creating.get(group)
        if creating is not None and creating.pod == key:
            del self._creating[group]
        if deleted:
            self._seen.pop(key, None)
            self._deleting.discard(key)
        else:
            status = obj.get("status") or {}
            annotations = meta.get("annotations") or {}
            failed = None
            if status.get("phase") == "Failed":
                failed = str(status.get("message") or status.get("reason") or "the pod failed")
            self._seen[key] = _Seen(
                reservation=sharing.Reservation(
                    pod=key,
                    node=str((obj.get("spec") or {}).get("nodeName") or ""),
                    group=group,
                    uuid=str(annotations.get(sharing.DEVICE_UUID_ANNOTATION) or "") or None,
                    terminating=meta.get("deletionTimestamp") is not None or key in self._deleting,
                    created=_created(meta),
                ),
                failed=failed,
            )
        self._changed.set()

    def reservations(self) -> list[sharing.Reservation]:
        """Every reservation pod there is or is about to be, as the planner reads them."""
        out = [
            s.reservation if s.reservation.pod not in self._deleting else _terminating(s.reservation)
            for s in self._seen.values()
        ]
        out.extend(r for r in self._creating.values() if r.pod not in self._seen)
        return out

    # ----------------------------------------------------------------- every cycle
    def reconcile(
        self, ours: Sequence[PodState], binding: Sequence[tuple[str, Sequence[str]]], *, nodes: Collection[str]
    ) -> None:
        """Create and delete reservation pods so every shared device in use has exactly one."""
        self.reconcile_use(sharing.device_use(ours, binding, nodes=nodes))

    def reconcile_use(self, use: sharing.DeviceUse) -> None:
        """`reconcile` for a device use already known (a skipped cycle reuses its settled cycle's)."""
        for effect in sharing.plan_reservations(use=use, reservations=self.reservations()):
            if isinstance(effect, sharing.Reserve):
                self.ensure(effect.node, effect.group)
            else:
                self.release(effect.pod, why=effect.why)

    def ensure(self, node: str, group: str) -> sharing.Reservation:
        """The live reservation pod of `group` on `node`, creating it if there is none (idempotent:
        the check and the registration happen before any await)."""
        for seen in self._seen.values():
            r = seen.reservation
            if r.group == group and r.node == node and not r.terminating and r.pod not in self._deleting:
                return r
        creating = self._creating.get(group)
        if creating is not None and creating.node == node:
            return creating
        name = _reservation_name(node)
        reservation = sharing.Reservation(
            pod=f"{self.settings.namespace}/{name}",
            node=node,
            group=group,
            uuid=None,
            terminating=False,
            created=self.clock(),
        )
        self._creating[group] = reservation
        self._run(self._create(reservation, name))
        return reservation

    def release(self, pod: str, *, why: str) -> None:
        """Delete a reservation pod (grace period 0, as KAI's binder does)."""
        if pod in self._deleting:
            return
        self._deleting.add(pod)
        for group, creating in list(self._creating.items()):
            if creating.pod == pod:
                del self._creating[group]
        log.info("deleting reservation pod %s: %s", pod, why)
        self._run(self._delete(pod))

    def _run(self, coro: Any) -> None:
        if self.spawn is not None:
            self.spawn(coro)
        else:
            asyncio.get_running_loop().create_task(coro)

    async def _create(self, reservation: sharing.Reservation, name: str) -> None:
        manifest = reservation_pod(name=name, node=reservation.node, group=reservation.group, settings=self.settings)
        outcome = await self.writer.create(resources.PODS, self.settings.namespace, manifest)
        if outcome.ok:
            self.created += 1
            log.info("created reservation pod %s for GPU group %s", reservation.pod, reservation.group)
            return
        log.warning("creating reservation pod %s failed: %s", reservation.pod, outcome.message)
        if self._creating.get(reservation.group) == reservation:
            del self._creating[reservation.group]
        hint = ""
        if outcome.code == 404:
            hint = f" (does the namespace {self.settings.namespace} exist? the chart creates it)"
        self._failures[reservation.pod] = f"creating it failed: {outcome.message}{hint}"
        self._changed.set()

    async def _delete(self, pod: str) -> None:
        namespace, name = pod.split("/", 1)
        outcome = await self.writer.delete_pod(namespace, name, grace_seconds=0)
        if outcome.ok:
            self.deleted += 1
        else:
            log.warning("deleting reservation pod %s failed: %s", pod, outcome.message)
            self._deleting.discard(pod)

    # ----------------------------------------------------------------- what a bind waits for
    async def device_uuids(self, node: str, groups: Sequence[str]) -> list[str]:
        """The UUIDs of the devices of `groups` on `node`, once their reservation pods report them;
        raises ReservationFailed (after deleting the reservation) when one does not in time."""
        deadline = self.clock() + self.settings.timeout
        uuids: list[str] = []
        for group in groups:
            uuids.append(await self._device_uuid(node, group, deadline))
        return uuids

    async def _device_uuid(self, node: str, group: str, deadline: float) -> str:
        while True:
            reservation = self.ensure(node, group)
            seen = self._seen.get(reservation.pod)
            if seen is not None and seen.reservation.uuid:
                return seen.reservation.uuid
            failure = self._failures.pop(reservation.pod, None)
            if failure is None and seen is not None and seen.failed:
                failure = f"it failed: {seen.failed}"
                self.release(reservation.pod, why=failure)
            if failure is not None:
                raise ReservationFailed(f"reservation pod {reservation.pod} on node {node}: {failure}")
            remaining = deadline - self.clock()
            if remaining <= 0:
                self.release(reservation.pod, why="no device UUID in time")
                raise ReservationFailed(
                    f"reservation pod {reservation.pod} on node {node} reported no device UUID "
                    f"({sharing.DEVICE_UUID_ANNOTATION}) within {self.settings.timeout:g}s: is the NVIDIA device "
                    "plugin running on the node, and can the reservation image start there?"
                )
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), timeout=remaining)
            except TimeoutError:
                continue


def _terminating(reservation: sharing.Reservation) -> sharing.Reservation:
    return msgspec.structs.replace(reservation, terminating=True)


def _created(meta: Mapping[str, Any]) -> float:
    text = meta.get("creationTimestamp")
    if not text:
        return 0.0
    try:
        return parse_timestamp(str(text))
    except ValueError:
        return 0.0
