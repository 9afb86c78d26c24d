"""What a fractional pod's binding waits for on a cluster: its reserved devices and its device settings.

KAI's binder runs a pre-bind step for pods that share a GPU; this is kai's. Before the pods of a
gang are bound (`kai.kubernetes.apply.EffectApplier`, which calls `prepare` with the whole gang):
1. every shared device of every fractional pod of the gang is reserved and its UUID known
   (`kai.kubernetes.reservations`); if one is not, no pod of the gang is bound, each gets a Warning
   event saying why, and the gang is scheduled again;
2. each fractional pod's ConfigMap is written: `NVIDIA_VISIBLE_DEVICES` (the UUIDs of all its
   devices, or their CDI names), `GPU_PORTION` and `RUNAI_NUM_OF_GPUS`, in the ConfigMap the pod's
   container reads them from (named by the pod's `runai/shared-gpu-configmap` annotation, which the
   mutating webhook set with the env references: `kai.cluster.admission`); any other ConfigMap of
   that name the pod references (KAI's admission adds an `-evar` one) is created too, so the
   container can start. Each ConfigMap is owned by its pod and goes with it.
A pod that was admitted without the mutating webhook has no env references: it is bound all the
same (its device is reserved and counted) and gets a Warning event saying how to get the settings.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kai.cluster import effects as fx
from kai.cluster import gpu_sharing as sharing
from kai.kubernetes import resources
from kai.kubernetes.cache import ClusterCache
from kai.kubernetes.reservations import DeviceReservations, ReservationFailed
from kai.kubernetes.writer import Writer

log = logging.getLogger(__name__)

RESERVATION_FAILED = "GPUReservationFailed"
NO_DEVICE_SETTINGS = "GPUSharingEnvMissing"


@dataclass(slots=True)
class SharedGpuBinds:
    cache: ClusterCache
    writer: Writer
    reservations: DeviceReservations
    record: Callable[[Sequence[fx.Effect]], None]  # events, through the applier
    _warned: set[str] = field(default_factory=set)  # pods told they have no device settings
    _failed: set[str] = field(default_factory=set)  # pods told their reservation failed, until bound

    async def prepare(self, gang: Sequence[fx.Bind]) -> bool:
        """Reserve the devices of the gang's fractional pods and write their settings; False if the
        gang must not be bound now."""
        fractional = [b for b in gang if b.gpu_groups]
        if not fractional:
            return True
        self._forget_gone()
        found = await asyncio.gather(
            *(self.reservations.device_uuids(b.node, b.gpu_groups) for b in fractional), return_exceptions=True
        )
        failures = [str(f) for f in found if isinstance(f, BaseException)]
        for failure in found:
            if isinstance(failure, BaseException) and not isinstance(failure, ReservationFailed):
                raise failure
        if failures:
            message = f"GPU reservation failed: {failures[0]}; the pod is scheduled again"
            log.warning("%s", message)
            # once per pod until it is bound: a cause that persists (no namespace, no device plugin)
            # would otherwise repeat the event every cycle
            fresh = [b for b in gang if b.pod not in self._failed]
            self._failed.update(b.pod for b in gang)
            self.record([_warning(pod=b.pod, reason=RESERVATION_FAILED, message=message) for b in fresh])
            return False
        self._failed.difference_update(b.pod for b in gang)
        written = await asyncio.gather(
            *(
                self._write_settings(b, uuids)
                for b, uuids in zip(fractional, found, strict=True)
                if isinstance(uuids, list)
            )
        )
        return all(written)

    def _forget_gone(self) -> None:
        """Drop what was remembered of pods that are gone (so the sets stay as small as the cluster)."""
        if len(self._warned) + len(self._failed) > 1024:
            live = {f"{ns}/{name}" for ns, name in self.cache.pods}
            self._warned &= live
            self._failed &= live

    async def _write_settings(self, bind: fx.Bind, uuids: list[str]) -> bool:
        namespace, name = bind.pod.split("/", 1)
        cached = self.cache.pods.get((namespace, name))
        if cached is None:
            return False
        pod = cached.raw
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        base = annotations.get(sharing.CONFIGMAP_ANNOTATION)
        container = sharing.fraction_container(pod)
        if not base or container is None:
            if bind.pod not in self._warned:
                self._warned.add(bind.pod)
                self.record(
                    [
                        _warning(
                            pod=bind.pod,
                            reason=NO_DEVICE_SETTINGS,
                            message=(
                                f"the pod was admitted without kai's mutating webhook, so its containers get no "
                                f"{sharing.VISIBLE_DEVICES} for the shared GPU (devices {', '.join(uuids)}); enable "
                                "the webhook (kai run --webhook, the chart's webhook.enabled) and recreate the pod"
                            ),
                        )
                    ]
                )
            return True
        devices = sharing.visible_device_names(uuids, cdi=self.reservations.settings.cdi)
        settings = sharing.device_env(devices, bind.gpu_portion)
        capabilities = sharing.capabilities_configmap(base, container)
        names = sorted({capabilities, *sharing.referenced_configmaps(pod, base)})
        owner = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": name,
            "uid": cached.pod.meta.uid,
        }
        results = await asyncio.gather(
            *(self._upsert(namespace, cm, settings if cm == capabilities else {}, owner) for cm in names)
        )
        return all(results)

    async def _upsert(self, namespace: str, name: str, data: Mapping[str, str], owner: Mapping[str, Any]) -> bool:
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "ownerReferences": [dict(owner)]},
            "data": dict(data),
        }
        outcome = await self.writer.create(resources.CONFIG_MAPS, namespace, body)
        if outcome.ok and outcome.already_done and data:
            patch = {"metadata": {"ownerReferences": [dict(owner)]}, "data": dict(data)}
            outcome = await self.writer.patch(resources.CONFIG_MAPS, namespace, name, patch)
        if not outcome.ok:
            log.warning("writing ConfigMap %s/%s failed: %s", namespace, name, outcome.message)
        return outcome.ok


def _warning(*, pod: str, reason: str, message: str) -> fx.RecordEvent:
    return fx.RecordEvent(type="Warning", reason=reason, object=f"Pod/{pod}", message=message)
