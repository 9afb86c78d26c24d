"""`kai run` says why a workload waits in `kai explain`'s words, on the objects a user reads: the
PodGroup's scheduling condition, its pods' `PodScheduled` condition, one Warning event per reason,
the pending-groups metric; applying the fix it names makes the workload run, and all of it clears."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from typing import Any

from kai.kubernetes import client as kc
from kai.kubernetes import resources
from tests.kubernetes.controlplane import ControlPlane
from tests.kubernetes.run.conftest import NodeFactory, Objects, RunKai
from tests.kubernetes.run.support import (
    DEPARTMENT,
    QUEUE,
    KaiRun,
    eventually,
    get,
    items,
    resource_for,
    unique,
)

CYCLES = re.compile(r"^kai_cycle_duration_seconds_count (\S+)$", re.MULTILINE)


def explain(plane: ControlPlane, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "kai.cli.main", "explain", *args, "--kubeconfig", str(plane.kubeconfig), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


async def cycles(kai: KaiRun) -> float:
    found = CYCLES.search(await kai.metrics())
    return float(found.group(1)) if found else 0.0


def pod_scheduled(pod: dict[str, Any]) -> dict[str, Any] | None:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "PodScheduled"), None)


async def test_a_waiting_group_says_why_in_explains_words_until_its_fix_makes_it_run(
    kube: kc.KubeClient,
    namespace: str,
    objects: Objects,
    nodes: NodeFactory,
    run_kai: RunKai,
    kai_cluster: ControlPlane,
) -> None:
    department, q = unique("dept"), unique("team")
    await objects.create(DEPARTMENT.substitute(name=department))
    await objects.create(QUEUE.substitute(name=q, parent=department, gpu_quota=2, gpu_limit=2))
    await nodes(gpus=8)
    await objects.create(f"""
apiVersion: v1
kind: Pod
metadata:
  name: wide
  labels: {{kai.scheduler/queue: {q}}}
spec:
  schedulerName: kai-scheduler
  containers:
  - name: main
    image: example.invalid/idle
    resources:
      limits: {{nvidia.com/gpu: "4"}}
""")
    async with run_kai() as kai:

        async def condition() -> tuple[str, dict[str, Any]] | None:
            pod = await get(kube, resources.PODS, "wide", namespace)
            group = (pod["metadata"].get("annotations") or {}).get("pod-group-name")
            if not group:
                return None
            found = await get(kube, resources.PODGROUPS, group, namespace)
            conditions = (found.get("status") or {}).get("schedulingConditions") or []
            return (group, conditions[0]) if conditions else None

        group, said = await eventually(condition)
        message = said["message"]
        assert said["reason"] == "OverLimit" and said["reasons"][0]["reason"] == "OverLimit", said
        # the dominant reason and the first verified fix, naming the workload as the user named it
        assert message == (
            f"wide needs 4 GPUs, more than queue {q}'s gpu limit of 2 GPUs"
            f"; to run it: raise {q}'s gpu limit from 2 to 4"
        ), message

        async def marked() -> dict[str, Any] | None:
            found = pod_scheduled(await get(kube, resources.PODS, "wide", namespace))
            return found if found and found.get("status") == "False" else None

        scheduled = await eventually(marked)
        assert (scheduled["reason"], scheduled["message"]) == ("Unschedulable", message)

        doc = await asyncio.to_thread(explain, kai_cluster, "podgroup", f"{namespace}/wide")
        assert (doc["name"], doc["reason"], doc["message"]) == (group, "OverLimit", message)

        pending = f'kai_podgroups_pending{{queue="{q}",reason="OverLimit"}} 1.0'

        async def counted() -> bool:
            return pending in await kai.metrics()

        await eventually(counted)

        # cycles go on with the same reason: the condition stands and no further event is recorded
        seen = await cycles(kai)

        async def three_more() -> bool:
            return await cycles(kai) >= seen + 3

        await eventually(three_more)
        events = [
            e
            for e in await items(kube, resources.EVENTS, namespace)
            if (e.get("regarding") or {}).get("name") == group and e.get("type") == "Warning"
        ]
        # the one reason is announced once: not again while the condition's write is on its way, nor
        # twice when the PodGroup was made in the cycle that first explained it
        assert [(e["reason"], e["note"]) for e in events] == [("OverLimit", message)]

        # the fix, applied as `kubectl patch --type merge` would: the pod runs and every trace clears
        [fix] = doc["suggestions"][:1]
        for patch in fix["patches"]:
            res = resource_for({"apiVersion": patch["apiVersion"], "kind": patch["kind"]})
            path = res.path(namespace=patch["namespace"], name=patch["name"])
            await kube.request("PATCH", path, body=patch["mergePatch"], content_type=kc.MERGE_PATCH)

        async def bound() -> bool:
            pod = await get(kube, resources.PODS, "wide", namespace)
            return bool((pod.get("spec") or {}).get("nodeName"))

        await eventually(bound)

        async def cleared() -> bool:
            found = await get(kube, resources.PODGROUPS, group, namespace)
            return not (found.get("status") or {}).get("schedulingConditions")

        await eventually(cleared)
        after = pod_scheduled(await get(kube, resources.PODS, "wide", namespace))
        assert after is None or after.get("status") == "True", after

        async def uncounted() -> bool:
            return f'kai_podgroups_pending{{queue="{q}"' not in await kai.metrics()

        await eventually(uncounted)
