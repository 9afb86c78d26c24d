"""`kai run` on a steady cluster: once everything is placed, its cycles are skipped (the metrics say
so), and the first change schedules again at once; a pod arriving while nothing waits does not wait
for the schedule period."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kai.kubernetes import client as kc
from tests.kubernetes.run.conftest import NodeFactory, Objects, RunKai
from tests.kubernetes.run.support import KaiRun, eventually, unique
from tests.kubernetes.run.test_run_scheduling import POD, pods, queues


def _sample(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


async def _skipped(kai: KaiRun) -> float:
    return _sample(await kai.metrics(), "kai_cycles_skipped_total")


async def test_a_settled_cluster_skips_cycles_and_still_schedules_new_pods(
    kube: kc.KubeClient, namespace: str, nodes: NodeFactory, objects: Objects, run_kai: RunKai
) -> None:
    await nodes(gpus=4)
    leaf = (await queues(objects))["q"]

    def pod(name: str) -> str:
        return POD.substitute(name=name, queue=leaf, annotations="", priority="train", gpus=1)

    first = unique("first")
    await objects.create(pod(first))
    async with run_kai() as kai:

        async def bound(name: str) -> bool:
            return bool((await pods(kube, namespace))[name]["spec"].get("nodeName"))

        await eventually(lambda: bound(first))
        # nothing waits any more: after the writes settle, cycles are skipped
        await eventually(lambda: _skipped_twice(kai), timeout=30)
        second = unique("second")
        await objects.create(pod(second))
        await eventually(lambda: bound(second))


async def test_a_pod_arriving_while_nothing_waits_is_scheduled_without_waiting_for_the_period(
    kube: kc.KubeClient, namespace: str, nodes: NodeFactory, objects: Objects, run_kai: RunKai, tmp_path: Path
) -> None:
    await nodes(gpus=4)
    leaf = (await queues(objects))["q"]
    config = tmp_path / "hourly.yaml"
    config.write_text("schedulePeriod: 1h\n")  # after its first cycle, only an arrival can start one

    async def bound(name: str) -> bool:
        return bool((await pods(kube, namespace))[name]["spec"].get("nodeName"))

    async with run_kai("--config", str(config)) as kai:

        async def cycled() -> bool:
            return _sample(await kai.metrics(), "kai_cycle_duration_seconds_count") >= 1

        await eventually(cycled)  # the first cycle found nothing waiting
        alone = unique("alone")
        await objects.create(POD.substitute(name=alone, queue=leaf, annotations="", priority="train", gpus=1))
        await eventually(lambda: bound(alone))
        # a pod that names its PodGroup before the PodGroup exists is scheduled when it comes
        late = unique("late")
        await objects.create(
            POD.substitute(
                name=f"{late}-0", queue=leaf, annotations=f"pod-group-name: {late}", priority="train", gpus=1
            )
        )
        await objects.create(f"""
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata: {{name: {late}}}
spec: {{minMember: 1, queue: {leaf}, priorityClassName: train}}
""")
        await eventually(lambda: bound(f"{late}-0"))


async def _skipped_twice(kai: KaiRun) -> bool:
    before = await _skipped(kai)
    await asyncio.sleep(2.5)  # the schedule period is 1 s
    return await _skipped(kai) >= before + 2
