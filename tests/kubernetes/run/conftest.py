"""Fixtures of the `kai run` end-to-end suite (on top of `tests/kubernetes/conftest.py`).

* `kai_cluster` (session): the KAI CRDs (as `kai install crds` prints them), the four KAI priority
  classes and the default queues, installed once, as the Helm chart installs them.
* `nodes`: a factory of Ready GPU Nodes with names unique to the test, deleted afterwards.
* `run_kai`: starts `kai run` against the API server (or the fault proxy) and stops it with SIGTERM,
  checking it exits 0.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from kai.deploy.crds import crd_manifests
from kai.kubernetes import client as kc
from kai.kubernetes import resources
from kai.kubernetes.resources import ApiResource
from tests.kubernetes.controlplane import ControlPlane
from tests.kubernetes.objects import create_gpu_node
from tests.kubernetes.run.support import KaiRun, apply, kai_run, resource_for, unique

PRIORITY_CLASSES = """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: train}
value: 50
preemptionPolicy: PreemptLowerPriority
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: build-preemptible}
value: 75
preemptionPolicy: PreemptLowerPriority
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: build}
value: 100
preemptionPolicy: PreemptLowerPriority
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: inference}
value: 125
preemptionPolicy: PreemptLowerPriority
"""

DEFAULT_QUEUES = """
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: default-parent-queue}
spec:
  resources:
    gpu: {quota: 0, limit: -1, overQuotaWeight: 1}
    cpu: {quota: 0, limit: -1, overQuotaWeight: 1}
    memory: {quota: 0, limit: -1, overQuotaWeight: 1}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: default-queue}
spec:
  parentQueue: default-parent-queue
  resources:
    gpu: {quota: 0, limit: -1, overQuotaWeight: 1}
    cpu: {quota: 0, limit: -1, overQuotaWeight: 1}
    memory: {quota: 0, limit: -1, overQuotaWeight: 1}
"""


async def _create_ignoring_conflict(kube: kc.KubeClient, text: str) -> None:
    try:
        await apply(kube, text, namespace="default")
    except kc.ApiError as err:
        if err.code != 409:
            raise


@pytest.fixture
async def kai_cluster(kube: kc.KubeClient, control_plane: ControlPlane) -> ControlPlane:
    for crd in crd_manifests():
        try:
            await kube.request("POST", resources.CUSTOM_RESOURCE_DEFINITIONS.path(), body=crd)
        except kc.ApiError as err:
            if err.code != 409:
                raise
    for crd in crd_manifests():  # served once Established
        name = crd["metadata"]["name"]
        for _ in range(100):
            got = await kube.request("GET", resources.CUSTOM_RESOURCE_DEFINITIONS.path(name=name))
            conditions = (got.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
                break
            await asyncio.sleep(0.1)
    for doc in (*PRIORITY_CLASSES.split("\n---\n"), *DEFAULT_QUEUES.split("\n---\n")):
        await _create_ignoring_conflict(kube, doc)
    return control_plane


NodeFactory = Callable[..., Awaitable[str]]


@pytest.fixture
async def nodes(kube: kc.KubeClient) -> AsyncIterator[NodeFactory]:
    made: list[str] = []

    async def make(gpus: int = 8, **kwargs: Any) -> str:
        name = unique("node")
        await create_gpu_node(kube, name, gpus=gpus, **kwargs)
        made.append(name)
        return name

    yield make
    for name in made:
        try:
            await kube.request("DELETE", resources.NODES.path(name=name))
        except kc.ApiError as err:
            if err.code != 404:
                raise


class Objects:
    """Creates a test's objects as `kubectl create -f` would; deletes its cluster-scoped ones afterwards
    (namespaced ones go with the test's namespace)."""

    def __init__(self, kube: kc.KubeClient, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.cluster_scoped: list[tuple[ApiResource, str]] = []

    async def create(self, text: str) -> list[dict[str, Any]]:
        created = await apply(self.kube, text, namespace=self.namespace)
        for obj in created:
            res = resource_for(obj)
            if not res.namespaced:
                self.cluster_scoped.append((res, obj["metadata"]["name"]))
        return created

    async def cleanup(self) -> None:
        for res, name in reversed(self.cluster_scoped):
            try:
                await self.kube.request("DELETE", res.path(name=name))
            except kc.ApiError as err:
                if err.code != 404:
                    raise


@pytest.fixture
async def objects(kube: kc.KubeClient, namespace: str) -> AsyncIterator[Objects]:
    made = Objects(kube, namespace)
    yield made
    await made.cleanup()


RunKai = Callable[..., AbstractAsyncContextManager[KaiRun]]


@pytest.fixture
def run_kai(kai_cluster: ControlPlane, tmp_path: Path) -> RunKai:
    def start(
        *extra: str, kubeconfig: Path | None = None, leader_elect: bool = False
    ) -> AbstractAsyncContextManager[KaiRun]:
        return kai_run(kubeconfig or kai_cluster.kubeconfig, tmp_path, *extra, leader_elect=leader_elect)

    return start
