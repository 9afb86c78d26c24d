"""`kai run` says why a workload waits in `kai explain`'s words, on the objects a user reads: the
PodGroup's scheduling condition, its pods' `PodScheduled` condition, one Warning event per reason
(and one more when the reason changes), the pending-groups metric; applying the fix it names makes
the workload run, and all of it clears."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from string import Template
from typing import Any

from kai.kubernetes import client as kc
from kai.kubernetes import resources
from tests.kubernetes.controlplane import ControlPlane
from tests.kubernetes.run.conftest import NodeFactory, Objects, RunKai
from tests.kubernetes.run.support import (
    DEPARTMENT,
    QUEUE,
    KaiRun,
    events_matching,
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


async def test_a_new_reason_is_announced_once_and_replaces_the_old_words_everywhere(
    kube: kc.KubeClient,
    namespace: str,
    objects: Objects,
    nodes: NodeFactory,
    run_kai: RunKai,
) -> None:
    """A gang of two waits for its second pod; once that pod comes, the gang asks more than its queue's
    limit: one new Warning event, the condition and both pods say the new words; then it runs."""
    department, q = unique("dept"), unique("team")
    await objects.create(DEPARTMENT.substitute(name=department))
    await objects.create(QUEUE.substitute(name=q, parent=department, gpu_quota=2, gpu_limit=2))
    await nodes(gpus=8)
    pod = """
apiVersion: v1
kind: Pod
metadata:
  name: $name
  annotations: {pod-group-name: pair}
spec:
  schedulerName: kai-scheduler
  containers:
  - name: main
    image: example.invalid/idle
    resources:
      limits: {nvidia.com/gpu: "$gpus"}
"""
    await objects.create(f"""
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata: {{name: pair}}
spec: {{minMember: 2, queue: {q}}}
""")
    await objects.create(Template(pod).substitute(name="pair-0", gpus=1))

    def warnings(event: dict[str, Any]) -> bool:
        return (event.get("regarding") or {}).get("name") == "pair" and event.get("type") == "Warning"

    async def condition_says(message: str) -> dict[str, Any] | None:
        found = await get(kube, resources.PODGROUPS, "pair", namespace)
        conditions = (found.get("status") or {}).get("schedulingConditions") or []
        return conditions[0] if conditions and conditions[0]["message"] == message else None

    async def pods_say(message: str, *names: str) -> bool:
        for name in names:
            found = pod_scheduled(await get(kube, resources.PODS, name, namespace))
            if found is None or (found.get("status"), found.get("reason"), found.get("message")) != (
                "False",
                "Unschedulable",
                message,
            ):
                return False
        return True

    incomplete = "pair cannot start: 2 pods must start together, 1 exists; to run it: reduce minMember to 1"
    over = f"pair needs 5 GPUs, more than queue {q}'s gpu limit of 2 GPUs; to run it: raise {q}'s gpu limit from 2 to 5"
    async with run_kai() as kai:
        said = await eventually(lambda: condition_says(incomplete))
        assert said["reasons"][0]["reason"] == "GangIncomplete", said
        await eventually(lambda: pods_say(incomplete, "pair-0"))
        first = await events_matching(kube, namespace, warnings)
        assert [(e["reason"], e["note"]) for e in first] == [("GangIncomplete", incomplete)]

        # the second pod comes: the gang is whole, and asks 5 GPUs of a queue limited to 2
        await objects.create(Template(pod).substitute(name="pair-1", gpus=4))
        said = await eventually(lambda: condition_says(over))
        assert (said["reason"], said["reasons"][0]["reason"]) == ("OverLimit", "OverLimit"), said
        await eventually(lambda: pods_say(over, "pair-0", "pair-1"))
        await events_matching(kube, namespace, warnings, at_least=2)
        pending = f'kai_podgroups_pending{{queue="{q}",reason="OverLimit"}} 1.0'

        async def counted() -> bool:
            return pending in await kai.metrics()

        await eventually(counted)

        # cycles go on with the new reason: no further event
        seen = await cycles(kai)

        async def three_more() -> bool:
            return await cycles(kai) >= seen + 3

        await eventually(three_more)
        events = [e for e in await items(kube, resources.EVENTS, namespace) if warnings(e)]
        events.sort(key=lambda e: str(e.get("eventTime")))
        assert [(e["reason"], e["note"]) for e in events] == [("GangIncomplete", incomplete), ("OverLimit", over)]

        # the fix it names: the gang runs, and the condition, the pods' messages and the count clear
        await kube.request(
            "PATCH",
            resources.QUEUES.path(name=q),
            body={"spec": {"resources": {"gpu": {"limit": 5}}}},
            content_type=kc.MERGE_PATCH,
        )

        async def bound() -> bool:
            for name in ("pair-0", "pair-1"):
                found = await get(kube, resources.PODS, name, namespace)
                if not (found.get("spec") or {}).get("nodeName"):
                    return False
            return True

        await eventually(bound)

        async def cleared() -> bool:
            found = await get(kube, resources.PODGROUPS, "pair", namespace)
            return not (found.get("status") or {}).get("schedulingConditions")

        await eventually(cleared)
        for name in ("pair-0", "pair-1"):
            after = pod_scheduled(await get(kube, resources.PODS, name, namespace))
            assert after is None or after.get("status") == "True", after

        async def uncounted() -> bool:
            return f'kai_podgroups_pending{{queue="{q}"' not in await kai.metrics()

        await eventually(uncounted)
        events = [e for e in await items(kube, resources.EVENTS, namespace) if warnings(e)]
        assert len(events) == 2, "running is not a reason: no further Warning"
