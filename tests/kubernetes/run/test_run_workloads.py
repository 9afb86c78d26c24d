"""Workloads as users submit them, on a cluster: KubeRay's `batchScheduler.name=kai-scheduler`
integration works unchanged. KubeRay sets `schedulerName: kai-scheduler` on the pods it creates and
copies the `kai.scheduler/queue` label; it creates no PodGroup, so kai's pod grouper must.

The operator is not installed: the test installs the RayCluster CRD, applies the seed's manifest
as is, and creates the pods the way KubeRay would (the simulator's emulation of the operator
writes them: names, labels, owner references).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kai.kubernetes import client as kc
from kai.kubernetes import resources
from kai.sim import controllers
from tests.kubernetes.run.conftest import NodeFactory, Objects, RunKai
from tests.kubernetes.run.support import eventually, get, items
from tests.kubernetes.run.test_run_scheduling import node_of

SEED_MANIFEST = Path(__file__).parents[2] / "sim_controllers" / "manifests" / "ray-cluster.kai-scheduler.yaml"

RAY_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "rayclusters.ray.io"},
    "spec": {
        "group": "ray.io",
        "names": {
            "kind": "RayCluster",
            "plural": "rayclusters",
            "singular": "raycluster",
            "listKind": "RayClusterList",
        },
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            }
        ],
    },
}


async def install_ray_crd(kube: kc.KubeClient) -> None:
    try:
        await kube.request("POST", resources.CUSTOM_RESOURCE_DEFINITIONS.path(), body=RAY_CRD)
    except kc.ApiError as err:
        if err.code != 409:
            raise
    for _ in range(100):
        try:
            await kube.request("GET", "/apis/ray.io/v1/rayclusters")
            return
        except kc.ApiError:
            await asyncio.sleep(0.1)


async def create_operator_pods(kube: kc.KubeClient, owner: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods KubeRay creates for a RayCluster (schedulerName and queue label included)."""
    controller = controllers.controller_for(owner)
    assert controller is not None
    result = controller.reconcile(owner=owner, children=(), names=controllers.SeededNameSource(seed="kuberay"))
    created = []
    for pod in result.create:
        namespace = pod["metadata"]["namespace"]
        created.append(await kube.request("POST", resources.PODS.path(namespace=namespace), body=pod))
    return created


async def test_kuberay_raycluster_is_gang_scheduled(
    kube: kc.KubeClient, namespace: str, objects: Objects, nodes: NodeFactory, run_kai: RunKai
) -> None:
    await install_ray_crd(kube)
    await nodes(gpus=8)
    cluster = next(o for o in await objects.create(SEED_MANIFEST.read_text()) if o["kind"] == "RayCluster")
    made = await create_operator_pods(kube, cluster)
    assert len(made) == 3 and all(p["spec"]["schedulerName"] == "kai-scheduler" for p in made)
    async with run_kai():

        async def all_bound() -> list[dict[str, Any]] | None:
            found = await items(kube, resources.PODS, namespace)
            return found if len(found) == 3 and all(node_of(p) for p in found) else None

        found = await eventually(all_bound, timeout=40)
        names = {p["metadata"]["annotations"]["pod-group-name"] for p in found}
        assert names == {f"pg-raycluster-sample-{cluster['metadata']['uid']}"}
        group = await get(kube, resources.PODGROUPS, names.pop(), namespace)
        assert group["spec"]["queue"] == "team-a"
        assert group["spec"]["minMember"] == 3
        assert {s["name"] for s in group["spec"].get("subGroups") or []} >= {"worker"}
        assert group["metadata"]["ownerReferences"][0]["kind"] == "RayCluster"
