"""`kai run` under faults: failing and hanging writes, dropped watches, `410 Gone`, a frozen API server,
a scheduler killed mid-gang, and two replicas with leader election.

What must hold in every case: nothing is bound twice, no gang stays partly bound, every pod that fits
ends bound, and the outcome is the one `kai sim` gives for the same objects.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kai.kubernetes import client as kc
from kai.kubernetes import resources
from tests.kubernetes.controlplane import ControlPlane
from tests.kubernetes.faultproxy import FaultProxy
from tests.kubernetes.run.conftest import NodeFactory, Objects, RunKai
from tests.kubernetes.run.support import KaiRun, eventually, get, items, unique
from tests.kubernetes.run.test_run_scheduling import POD, node_of, pods, queues


async def gang(objects: Objects, queue: str, name: str, *, size: int, gpus: int) -> None:
    await objects.create(f"""
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata: {{name: {name}}}
spec: {{minMember: {size}, queue: {queue}, priorityClassName: train}}
""")
    for i in range(size):
        await objects.create(
            POD.substitute(
                name=f"{name}-{i}", queue=queue, priority="train", gpus=gpus, annotations=f"pod-group-name: {name}"
            )
        )


async def all_bound(kube: kc.KubeClient, namespace: str, count: int) -> dict[str, dict[str, Any]] | None:
    found = await pods(kube, namespace)
    return found if len(found) == count and all(node_of(p) for p in found.values()) else None


def bindings(proxy: FaultProxy) -> int:
    return proxy.count(method="POST", path="/binding")


async def test_binds_through_failing_and_conflicting_writes(
    kube: kc.KubeClient, namespace: str, objects: Objects, nodes: NodeFactory, run_kai: RunKai, fault_proxy: FaultProxy
) -> None:
    q = (await queues(objects))["q"]
    await nodes(gpus=8)
    await gang(objects, q, "g", size=4, gpus=2)
    fault_proxy.fail(500, method="POST", path="/binding", count=3)
    async with run_kai(kubeconfig=fault_proxy.kubeconfig):
        found = await eventually(lambda: all_bound(kube, namespace, 4), timeout=60)
    assert len({node_of(p) for p in found.values()}) == 1
    # every pod bound exactly once: the failed attempts were retried, nothing more
    assert bindings(fault_proxy) == 4 + 3


async def test_gang_is_never_left_partly_bound_when_a_bind_fails_for_good(
    kube: kc.KubeClient, namespace: str, objects: Objects, nodes: NodeFactory, run_kai: RunKai, fault_proxy: FaultProxy
) -> None:
    q = (await queues(objects))["q"]
    await nodes(gpus=8)
    await gang(objects, q, "g", size=2, gpus=4)
    fault_proxy.fail(403, method="POST", path="/pods/g-1/binding", count=1)  # refused once, not transient
    async with run_kai(kubeconfig=fault_proxy.kubeconfig):
        # the gang is retried whole and ends bound whole (the first g-0 binding, if any, was rolled back)
        found = await eventually(lambda: all_bound(kube, namespace, 2), timeout=60)
    assert {node_of(p) for p in found.values()} != {None}


async def test_survives_dropped_watches_and_410(
    kube: kc.KubeClient, namespace: str, objects: Objects, nodes: NodeFactory, run_kai: RunKai, fault_proxy: FaultProxy
) -> None:
    q = (await queues(objects))["q"]
    await nodes(gpus=8)
    async with run_kai(kubeconfig=fault_proxy.kubeconfig):
        fault_proxy.hold_watches()
        fault_proxy.drop_watches()
        await gang(objects, q, "during", size=2, gpus=2)  # created while the scheduler is blind
        fault_proxy.gone_next_watches(3)
        fault_proxy.release_watches()
        await eventually(lambda: all_bound(kube, namespace, 2), timeout=60)
        fault_proxy.drop_watches()
        await gang(objects, q, "after", size=2, gpus=2)
        await eventually(lambda: all_bound(kube, namespace, 4), timeout=60)


async def test_survives_a_frozen_api_server(
    kube: kc.KubeClient,
    namespace: str,
    objects: Objects,
    nodes: NodeFactory,
    run_kai: RunKai,
    kai_cluster: ControlPlane,
) -> None:
    kai_cluster.require_managed()
    q = (await queues(objects))["q"]
    await nodes(gpus=8)
    async with run_kai():
        await gang(objects, q, "before", size=2, gpus=2)
        await eventually(lambda: all_bound(kube, namespace, 2), timeout=30)
        with kai_cluster.frozen():
            await asyncio.sleep(20)
        await gang(objects, q, "after", size=2, gpus=2)
        await eventually(lambda: all_bound(kube, namespace, 4), timeout=60)


async def test_killed_mid_gang_and_restarted(
    kube: kc.KubeClient,
    namespace: str,
    objects: Objects,
    nodes: NodeFactory,
    run_kai: RunKai,
    fault_proxy: FaultProxy,
    tmp_path: Any,
    kai_cluster: ControlPlane,
) -> None:
    q = (await queues(objects))["q"]
    await nodes(gpus=8)
    await gang(objects, q, "g", size=4, gpus=2)
    fault_proxy.hang(method="POST", path="/pods/g-3/binding", count=1, seconds=30)
    first = KaiRun(kubeconfig=fault_proxy.kubeconfig, log=tmp_path / "first.log")
    await first.start()

    async def some_bound() -> bool:
        return any(node_of(p) for p in (await pods(kube, namespace)).values())

    await eventually(some_bound, timeout=30)
    first.kill()  # SIGKILL with g-3's binding unanswered
    async with run_kai():
        found = await eventually(lambda: all_bound(kube, namespace, 4), timeout=90)
    assert len(found) == 4


async def test_two_replicas_one_leader_and_takeover(
    kube: kc.KubeClient, namespace: str, objects: Objects, nodes: NodeFactory, kai_cluster: ControlPlane, tmp_path: Any
) -> None:
    q = (await queues(objects))["q"]
    await nodes(gpus=8)
    lease = unique("lease")
    lease_namespace = namespace
    extra = (
        *("--leader-election-namespace", lease_namespace, "--leader-election-id", lease),
        # client-go's timing scaled down (15 s / 10 s / 2 s by default) so the takeover is quick
        *(
            "--leader-elect-lease-duration",
            "4",
            "--leader-elect-renew-deadline",
            "3",
            "--leader-elect-retry-period",
            "0.5",
        ),
    )
    first = KaiRun(kubeconfig=kai_cluster.kubeconfig, log=tmp_path / "a.log", extra=extra, leader_elect=True)
    second = KaiRun(kubeconfig=kai_cluster.kubeconfig, log=tmp_path / "b.log", extra=extra, leader_elect=True)
    await first.start()
    await second.start()
    try:
        await gang(objects, q, "one", size=2, gpus=2)
        await eventually(lambda: all_bound(kube, namespace, 2), timeout=30)
        holder = (await get(kube, resources.LEASES, lease, lease_namespace))["spec"]["holderIdentity"]
        assert holder
        leading = [run for run in (first, second) if "kai_is_leader 1.0" in await run.metrics()]
        assert len(leading) == 1, "exactly one replica leads"
        leader = leading[0]
        leader.kill()
        await gang(objects, q, "two", size=2, gpus=2)
        await eventually(lambda: all_bound(kube, namespace, 4), timeout=45)
        events = [e for e in await items(kube, resources.EVENTS, namespace) if e.get("reason") == "Scheduled"]
        assert len({e["regarding"]["name"] for e in events}) == len(events), "no pod was bound twice"
    finally:
        for run in (first, second):
            run.kill()
