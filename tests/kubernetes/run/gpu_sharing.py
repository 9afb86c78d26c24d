"""What the GPU-sharing end-to-end tests share: a per-test reservation namespace and a stand-in for the
NVIDIA device plugin and kubelet of the nodes, which no test cluster has.

`FakeDevicePlugin` plays what a GPU node does to a reservation pod kai creates: the kubelet runs it
(phase Running) and the device plugin gives it one of the node's devices, whose UUID the reservation
image writes into the pod's annotation `run.ai/reserve_for_gpu_index`. Devices are handed out
lowest-free-first per node (`GPU-<node>-<index>`), and a device is free again once its
reservation pod is gone. `paused` holds back the UUIDs (a device plugin that has not answered yet).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from kai.kubernetes import client as kc
from kai.kubernetes import resources
from tests.kubernetes.objects import mark_running
from tests.kubernetes.run.support import items

UUID_ANNOTATION = "run.ai/reserve_for_gpu_index"


class FakeDevicePlugin:
    def __init__(self, kube: kc.KubeClient, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.paused = False
        self.given: dict[str, str] = {}  # reservation pod name -> device UUID

    async def reservation_pods(self) -> list[dict[str, Any]]:
        return await items(self.kube, resources.PODS, self.namespace)

    async def step(self) -> None:
        found = await self.reservation_pods()
        live = {p["metadata"]["name"] for p in found}
        self.given = {name: uuid for name, uuid in self.given.items() if name in live}
        if self.paused:
            return
        for pod in found:
            name, node = pod["metadata"]["name"], pod["spec"].get("nodeName")
            if name in self.given or not node or pod["metadata"].get("deletionTimestamp"):
                continue
            taken = {uuid for n, uuid in self.given.items()}
            index = 0
            while f"GPU-{node}-{index}" in taken:
                index += 1
            uuid = f"GPU-{node}-{index}"
            await mark_running(self.kube, self.namespace, name)
            await self.kube.request(
                "PATCH",
                resources.PODS.path(namespace=self.namespace, name=name),
                body={"metadata": {"annotations": {UUID_ANNOTATION: uuid}}},
                content_type=kc.MERGE_PATCH,
            )
            self.given[name] = uuid

    async def run(self) -> None:
        while True:
            with contextlib.suppress(kc.ApiError):
                await self.step()
            await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def device_plugin(kube: kc.KubeClient, namespace: str) -> AsyncIterator[FakeDevicePlugin]:
    plugin = FakeDevicePlugin(kube, namespace)
    task = asyncio.create_task(plugin.run())
    try:
        yield plugin
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
