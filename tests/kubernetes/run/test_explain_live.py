"""`kai explain --kubeconfig` against a real API server: it reads the live objects, runs one dry
cycle, explains, and writes nothing (no PodGroup, no pod annotation, no binding)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

from kai.kubernetes import client as kc
from kai.kubernetes import resources
from tests.kubernetes.controlplane import ControlPlane
from tests.kubernetes.run.conftest import NodeFactory, Objects
from tests.kubernetes.run.support import get, items, unique


def explain(plane: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kai.cli.main", "explain", *args, "--kubeconfig", str(plane.kubeconfig)],
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_explain_a_live_cluster_writes_nothing(
    kube: kc.KubeClient, namespace: str, objects: Objects, nodes: NodeFactory, kai_cluster: ControlPlane
) -> None:
    await nodes(gpus=4)
    queue = unique("team")
    await objects.create(f"""
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {{name: {queue}}}
spec:
  resources:
    gpu: {{quota: -1, limit: -1, overQuotaWeight: 1}}
    cpu: {{quota: -1, limit: -1, overQuotaWeight: 1}}
    memory: {{quota: -1, limit: -1, overQuotaWeight: 1}}
""")
    await objects.create(f"""
apiVersion: v1
kind: Pod
metadata:
  name: huge
  labels: {{kai.scheduler/queue: {queue}}}
spec:
  schedulerName: kai-scheduler
  containers:
  - name: main
    image: example.invalid/idle
    resources:
      limits: {{nvidia.com/gpu: "64"}}
""")
    before = await get(kube, resources.PODS, "huge", namespace)

    done = await asyncio.to_thread(explain, kai_cluster, "podgroup", f"{namespace}/huge", "-o", "json")
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    assert (doc["workload"], doc["queue"], doc["phase"]) == ("Pod/huge", queue, "Pending")
    assert doc["reason"] == "PodTooLarge"
    assert doc["message"].startswith("pod huge asks 64 GPUs; the largest node has ")
    [suggestion] = doc["suggestions"]
    assert suggestion["change"].startswith("reduce to ") and suggestion["verified"] is True
    [patch] = suggestion["patches"]
    assert (patch["kind"], patch["namespace"], patch["name"]) == ("Pod", namespace, "huge")
    # no time on a live cluster: what starts it is its fix
    never = "none: it does not start unless something changes"
    assert doc["estimate"] == f"{never}, such as its fix ({suggestion['change']})"

    done = await asyncio.to_thread(explain, kai_cluster, "queue", queue, "-o", "json")
    assert done.returncode == 0, done.stderr
    assert [w["reason"] for w in json.loads(done.stdout)["waiting"]] == ["PodTooLarge"]

    done = await asyncio.to_thread(explain, kai_cluster, "podgroup", f"{namespace}/nothing")
    assert done.returncode == 2
    assert f"podgroup {namespace}/nothing does not exist" in done.stderr

    await objects.create(f"""
apiVersion: v1
kind: Pod
metadata:
  name: shared
  labels: {{kai.scheduler/queue: {queue}}}
  annotations: {{gpu-fraction: "1.5"}}
spec:
  schedulerName: kai-scheduler
  containers: [{{name: main, image: example.invalid/idle}}]
""")
    done = await asyncio.to_thread(explain, kai_cluster, "pod", f"{namespace}/shared", "-o", "json")
    assert done.returncode == 0, done.stderr
    refused = json.loads(done.stdout)
    assert refused["reason"] == "InvalidGpuSharing"
    assert "gpu-fraction" in refused["message"]

    after = await get(kube, resources.PODS, "huge", namespace)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert await items(kube, resources.PODGROUPS, namespace) == []
