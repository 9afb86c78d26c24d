"""The writer against the real API server: what each write's outcome says, retries, give-ups, order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from lightkube.resources import core_v1

from kai.kubernetes import client as kc
from kai.kubernetes import resources
from kai.kubernetes.backoff import Backoff
from kai.kubernetes.writer import Outcome, Writer
from tests.kubernetes import objects
from tests.kubernetes.faultproxy import FaultProxy

FAST = Backoff(initial=0.05, maximum=0.2)
BINDING = r"/pods/[^/]+/binding$"
EVICTION = r"/pods/[^/]+/eviction$"
CONFIG_MAPS = resources.ApiResource.of(core_v1.ConfigMap)


@pytest.fixture
async def node(kube: kc.KubeClient, namespace: str) -> AsyncIterator[str]:
    name = f"node-{namespace}"[:63]
    await objects.create_gpu_node(kube, name)
    yield name
    await kube.request("DELETE", resources.NODES.path(name=name))


@pytest.fixture
async def proxied(fault_proxy: FaultProxy) -> AsyncIterator[kc.KubeClient]:
    async with kc.connect(kubeconfig_path=fault_proxy.kubeconfig, options=kc.ClientOptions(qps=0)) as client:
        yield client


async def get_pod(kube: kc.KubeClient, namespace: str, name: str) -> dict[str, Any]:
    return await kube.request("GET", resources.PODS.path(namespace=namespace, name=name))


async def test_bind_binds_and_a_second_bind_is_already_done_without_retry(
    kube: kc.KubeClient, proxied: kc.KubeClient, fault_proxy: FaultProxy, namespace: str, node: str
) -> None:
    pod = await objects.create_pod(kube, namespace, "p")
    observed: list[tuple[str, Outcome]] = []
    writer = Writer(proxied, backoff=FAST, observe=lambda op, outcome, seconds: observed.append((op, outcome)))
    first = await writer.bind(namespace, "p", uid=pod["metadata"]["uid"], node=node)
    second = await writer.bind(namespace, "p", uid=pod["metadata"]["uid"], node=node)
    assert (first.ok, first.already_done) == (True, False)
    assert (await get_pod(kube, namespace, "p"))["spec"]["nodeName"] == node
    assert (second.ok, second.already_done, second.code) == (True, True, 409)
    assert fault_proxy.count(method="POST", path=BINDING) == 2  # the 409 was not retried
    assert observed == [("bind", first), ("bind", second)]


async def test_bind_of_a_recreated_or_missing_pod_fails(kube: kc.KubeClient, namespace: str, node: str) -> None:
    await objects.create_pod(kube, namespace, "p")
    writer = Writer(kube)
    stale = await writer.bind(namespace, "p", uid="uid-of-an-older-pod", node=node)
    missing = await writer.bind(namespace, "absent", uid=None, node=node)
    assert (stale.ok, stale.already_done, stale.code) == (False, False, 409)
    assert "nodeName" not in (await get_pod(kube, namespace, "p"))["spec"]
    assert (missing.ok, missing.code) == (False, 404)


async def test_bind_retries_through_server_errors_and_a_hung_request(
    kube: kc.KubeClient, proxied: kc.KubeClient, fault_proxy: FaultProxy, namespace: str, node: str
) -> None:
    await objects.create_pod(kube, namespace, "p")
    fault_proxy.fail(500, method="POST", path=BINDING, count=2)
    fault_proxy.hang(method="POST", path=BINDING, count=1)
    writer = Writer(proxied, backoff=FAST, timeout=0.5, attempts=5)
    outcome = await writer.bind(namespace, "p", uid=None, node=node)
    assert (outcome.ok, outcome.already_done) == (True, False)
    assert fault_proxy.count(method="POST", path=BINDING) == 4  # 500, 500, no answer, bound
    assert (await get_pod(kube, namespace, "p"))["spec"]["nodeName"] == node


async def test_bind_gives_up_after_its_attempts(
    kube: kc.KubeClient, proxied: kc.KubeClient, fault_proxy: FaultProxy, namespace: str, node: str
) -> None:
    await objects.create_pod(kube, namespace, "p")
    fault_proxy.fail(503, method="POST", path=BINDING, count=100)
    writer = Writer(proxied, backoff=FAST, attempts=3)
    outcome = await writer.bind(namespace, "p", uid=None, node=node)
    assert (outcome.ok, outcome.code) == (False, 503)
    assert fault_proxy.count(method="POST", path=BINDING) == 3
    assert "nodeName" not in (await get_pod(kube, namespace, "p"))["spec"]


async def test_delete_keeps_the_pods_grace_period_and_a_gone_pod_is_done(
    kube: kc.KubeClient, namespace: str, node: str
) -> None:
    pod = await objects.create_pod(kube, namespace, "p")
    writer = Writer(kube)
    await writer.bind(namespace, "p", uid=None, node=node)
    stale = await writer.delete_pod(namespace, "p", uid="uid-of-an-older-pod")
    deleted = await writer.delete_pod(namespace, "p", uid=pod["metadata"]["uid"])
    missing = await writer.delete_pod(namespace, "absent")
    assert (stale.ok, stale.code) == (False, 409)
    assert (deleted.ok, deleted.already_done) == (True, False)
    terminating = await get_pod(kube, namespace, "p")  # no kubelet: Terminating for the pod's own 30 s
    assert terminating["metadata"]["deletionTimestamp"]
    assert terminating["metadata"]["deletionGracePeriodSeconds"] == 30
    assert (missing.ok, missing.already_done, missing.code) == (True, True, 404)


async def test_eviction_refused_by_a_disruption_budget_but_throttling_is_retried(
    kube: kc.KubeClient, proxied: kc.KubeClient, fault_proxy: FaultProxy, namespace: str, node: str
) -> None:
    for name in ("guarded", "free"):
        await objects.create_pod(kube, namespace, name, labels={"app": name})
    await kube.request(
        "POST",
        f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
        body={
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guard"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
        },
    )
    writer = Writer(proxied, backoff=FAST)
    for name in ("guarded", "free"):
        await writer.bind(namespace, name, uid=None, node=node)
        await objects.mark_running(kube, namespace, name)  # a budget guards running pods only
    refused = await writer.evict(namespace, "guarded")
    fault_proxy.fail(429, method="POST", path=EVICTION, count=1)  # throttled, not a budget: retry
    evicted = await writer.evict(namespace, "free")
    assert (refused.ok, refused.refused, refused.code) == (False, True, 429)
    assert "deletionTimestamp" not in (await get_pod(kube, namespace, "guarded"))["metadata"]
    assert (evicted.ok, evicted.refused) == (True, False)
    assert (await get_pod(kube, namespace, "free"))["metadata"]["deletionTimestamp"]
    assert fault_proxy.count(method="POST", path=EVICTION) == 3


async def test_patch_a_status_and_create_an_event(kube: kc.KubeClient, namespace: str) -> None:
    await objects.create_pod(kube, namespace, "p")
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "no node fits"}
    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "p.evicted", "namespace": namespace},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "kai-scheduler",
        "reportingInstance": "kai-scheduler-test",
        "action": "Evict",
        "reason": "Evicted",
        "note": "evicted by kai",
        "type": "Normal",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": "p"},
    }
    writer = Writer(kube)
    patched = await writer.patch(
        resources.PODS, namespace, "p", {"status": {"conditions": [condition]}}, subresource="status"
    )
    missing = await writer.patch(resources.PODS, namespace, "absent", {"metadata": {"labels": {"a": "b"}}})
    created = await writer.create(resources.EVENTS, namespace, event)
    again = await writer.create(resources.EVENTS, namespace, event)
    assert patched.ok
    stored_pod = await get_pod(kube, namespace, "p")
    assert [c["reason"] for c in stored_pod["status"]["conditions"] if c["type"] == "PodScheduled"] == ["Unschedulable"]
    assert (missing.ok, missing.code) == (False, 404)
    assert (created.ok, created.already_done, again.ok, again.already_done) == (True, False, True, True)
    stored = await kube.request("GET", resources.EVENTS.path(namespace=namespace, name="p.evicted"))
    assert (stored["reason"], stored["regarding"]["name"]) == ("Evicted", "p")


async def test_writes_to_one_object_land_in_the_order_made_across_retries(
    kube: kc.KubeClient, proxied: kc.KubeClient, fault_proxy: FaultProxy, namespace: str
) -> None:
    await kube.request(
        "POST",
        CONFIG_MAPS.path(namespace=namespace),
        body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
    )
    fault_proxy.fail(500, method="PATCH", count=1)  # the first patch needs a retry, after a backoff
    writer = Writer(proxied, backoff=Backoff(initial=0.3, maximum=0.3))
    first = asyncio.create_task(writer.patch(CONFIG_MAPS, namespace, "c", {"data": {"v": "first"}}))
    second = asyncio.create_task(writer.patch(CONFIG_MAPS, namespace, "c", {"data": {"v": "second"}}))
    assert [outcome.ok for outcome in await asyncio.gather(first, second)] == [True, True]
    assert fault_proxy.count(method="PATCH") == 3
    stored = await kube.request("GET", CONFIG_MAPS.path(namespace=namespace, name="c"))
    assert stored["data"] == {"v": "second"}
