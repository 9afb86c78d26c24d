"""kai's admission webhooks, called by a real API server over TLS on loopback (`kai run --webhook`).

The webhook configurations are the chart's (from deploy/kai.yaml), pointed at this test's `kai run`
by URL and scoped to this test's namespace and labelled queues. kai makes its own certificate and
writes its CA into them. Every refusal a webhook can give past the CRDs' own schema is checked word
for word, as `kubectl` would print it; a namespace the chart excludes is left alone; GPU-sharing pods
get their env references and the configured runtimeClassName.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest
import yaml

from kai.kubernetes import client as kc
from kai.kubernetes import resources
from kai.kubernetes.webhook_tls import MUTATING, VALIDATING
from tests.deploy.kube import REPO
from tests.kubernetes.objects import finish_deletion
from tests.kubernetes.run.conftest import NodeFactory, Objects, RunKai
from tests.kubernetes.run.gpu_sharing import UUID_ANNOTATION, device_plugin
from tests.kubernetes.run.support import KaiRun, eventually, free_port, get, unique
from tests.kubernetes.run.test_run_gpu_sharing import reservation_pods, sharing_flags
from tests.kubernetes.run.test_run_scheduling import node_of
from tests.kubernetes.run.test_run_workloads import SEED_MANIFEST, create_operator_pods, install_ray_crd

TEST_LABEL = "kai-webhook-test"
SHARING_MANIFEST = SEED_MANIFEST.parent / "ray-cluster.kai-gpu-sharing.yaml"
RUNTIME_CLASSES = "/apis/node.k8s.io/v1/runtimeclasses"
EXCLUDED = "kube-public"  # one of the namespaces the chart's webhook.excludedNamespaces leaves alone


def chart_configurations(name: str, port: int, namespace: str) -> list[dict[str, Any]]:
    """The chart's webhook configurations, calling https://127.0.0.1:<port> and only for this test."""
    rendered = yaml.safe_load_all((REPO / "deploy" / "kai.yaml").read_text())
    found = [
        copy.deepcopy(o)
        for o in rendered
        if o and o["kind"] in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
    ]
    assert len(found) == 2
    for configuration in found:
        configuration["metadata"] = {"name": name}
        for webhook in configuration["webhooks"]:
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}"}
            webhook["failurePolicy"] = "Fail"
            if webhook["rules"][0]["resources"] == ["queues"]:
                webhook["objectSelector"] = {"matchLabels": {TEST_LABEL: namespace}}
            else:  # the chart's exclusions, and only this test's namespace and an excluded one
                expressions = webhook["namespaceSelector"]["matchExpressions"]
                [excluded] = [e for e in expressions if e["operator"] == "NotIn"]
                assert EXCLUDED in excluded["values"]
                expressions.append({"key": excluded["key"], "operator": "In", "values": [namespace, EXCLUDED]})
    return found


WebhookKai = Callable[..., AbstractAsyncContextManager[KaiRun]]


@pytest.fixture
def webhook_kai(kube: kc.KubeClient, namespace: str, run_kai: RunKai) -> WebhookKai:
    @asynccontextmanager
    async def start(*extra: str) -> AsyncIterator[KaiRun]:
        name, port = unique("kai-webhooks"), free_port()
        configurations = chart_configurations(name, port, namespace)
        for configuration in configurations:
            resource = VALIDATING if configuration["kind"] == VALIDATING.kind else MUTATING
            await kube.request("POST", resource.path(), body=configuration)
        flags: tuple[str, ...] = ("--webhook", "--webhook-bind-address", f"127.0.0.1:{port}")
        flags += ("--webhook-host", "127.0.0.1", "--webhook-secret", f"{namespace}/webhook-tls")
        flags += ("--webhook-configuration", name)
        try:
            async with run_kai(*flags, *extra) as kai:

                async def ca_injected() -> bool:
                    for resource in (VALIDATING, MUTATING):
                        found = await kube.request("GET", resource.path(name=name))
                        if not all(w["clientConfig"].get("caBundle") for w in found["webhooks"]):
                            return False
                    return True

                await eventually(ca_injected)
                yield kai
        finally:
            for resource in (VALIDATING, MUTATING):
                await kube.request("DELETE", resource.path(name=name))

    return start


async def refusal(kube: kc.KubeClient, resource: Any, namespace: str | None, body: dict[str, Any]) -> str:
    """The message the API server answers a refused create with."""
    with pytest.raises(kc.ApiError) as caught:
        await kube.request("POST", resource.path(namespace=namespace), body=body)
    assert caught.value.code == 403, caught.value
    return caught.value.message


def queue(name: str, label: str, *, parent: str | None = None, resources_: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if resources_:
        spec["resources"] = {k: {"quota": -1, "limit": -1, "overQuotaWeight": 1} for k in ("gpu", "cpu", "memory")}
    if parent:
        spec["parentQueue"] = parent
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name, "labels": {TEST_LABEL: label}},
        "spec": spec,
    }


def podgroup(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": name}, "spec": spec}


def pod(name: str, annotations: dict[str, str], *, gpus: int = 0) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "example.invalid/idle"}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"schedulerName": "kai-scheduler", "containers": [container]},
    }


def webhook_says(name: str, message: str) -> str:
    """How the API server words a webhook's refusal."""
    return f'admission webhook "{name}" denied the request: {message}'


async def test_queues_podgroups_and_shared_pods_are_refused_with_the_rule_that_fails(
    kube: kc.KubeClient, namespace: str, objects: Objects, webhook_kai: WebhookKai
) -> None:
    async with webhook_kai("--no-gpu-sharing"):
        label = namespace  # the queues this test's webhook configuration selects
        parent, child = unique("parent"), unique("child")
        made: list[str] = []
        try:
            # Queues: resources present, parent exists, no loop of parents
            message = await refusal(kube, resources.QUEUES, None, queue(unique("bare"), label, resources_=False))
            assert message == webhook_says(
                "queues.kai.scheduler",
                "spec.resources: is missing; KAI's admission refuses a Queue without resources (give gpu, cpu and "
                "memory each a quota, limit and overQuotaWeight; -1 means unlimited)",
            )
            message = await refusal(kube, resources.QUEUES, None, queue(child, label, parent="no-such-queue"))
            assert message == webhook_says(
                "queues.kai.scheduler",
                'spec.parentQueue: queue "no-such-queue" does not exist; create the parent queue first, or name an '
                "existing queue",
            )
            message = await refusal(kube, resources.QUEUES, None, queue(child, label, parent=child))
            assert message == webhook_says("queues.kai.scheduler", "spec.parentQueue: a queue cannot be its own parent")
            for body in (queue(parent, label), queue(child, label, parent=parent)):
                await kube.request("POST", resources.QUEUES.path(), body=body)
                made.append(body["metadata"]["name"])
            looped = await kube.request("GET", resources.QUEUES.path(name=parent))
            looped["spec"]["parentQueue"] = child
            with pytest.raises(kc.ApiError) as caught:
                await kube.request("PUT", resources.QUEUES.path(name=parent), body=looped)
            a, b = sorted((parent, child))
            loop = f"{a} -> {b} -> {a}"
            assert caught.value.message == webhook_says(
                "queues.kai.scheduler",
                f"spec.parentQueue: the parent queues form a cycle: {loop} (queues {a}, {b}); no queue in a cycle "
                "can take jobs: give one of them no parentQueue or another parent",
            )
        finally:
            for name in reversed(made):
                await kube.request("DELETE", resources.QUEUES.path(name=name))

        # PodGroups: minMember, subgroup names unique, parents that exist
        cases: list[tuple[dict[str, Any], str]] = [
            (  # the CRD takes minMember >= 1; kai also needs it to make sense with the subgroups
                {"minMember": 2, "minSubGroup": 1, "queue": "q", "subGroups": [{"name": "a"}, {"name": "b"}]},
                "spec.minSubGroup: cannot be combined with minMember (they are mutually exclusive): set minMember for "
                "a fixed number of pods, or minSubGroup for a number of top-level subgroups",
            ),
            (
                {"minMember": 2, "queue": "q", "subGroups": [{"name": "w", "minMember": 1}, {"name": "w"}]},
                'spec.subGroups[1].name: duplicate subgroup name "w"',
            ),
            (
                {"minMember": 1, "queue": "q", "subGroups": [{"name": "w", "minMember": 1, "parent": "ghost"}]},
                'spec.subGroups[0].parent: names unknown subgroup "ghost"',
            ),
            (
                {"queue": "q", "subGroups": [{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}]},
                "spec.subGroups[0].parent: subgroup parents form a cycle",
            ),
            (
                {"minSubGroup": 1, "queue": "q"},
                "spec.minSubGroup: needs subGroups: it counts the PodGroup's top-level subgroups",
            ),
            (
                {"minSubGroup": 3, "queue": "q", "subGroups": [{"name": "a"}, {"name": "b"}]},
                "spec.minSubGroup: is 3 but the PodGroup has only 2 top-level subgroups",
            ),
            (
                {"queue": "q", "subGroups": [{"name": "a", "minMember": 1, "minSubGroup": 1}]},
                'spec.subGroups[0].minSubGroup: cannot be combined with minMember in subgroup "a" (they are mutually '
                "exclusive)",
            ),
            (
                {"queue": "q", "subGroups": [{"name": "a", "minSubGroup": 0}, {"name": "b", "parent": "a"}]},
                "spec.subGroups[0].minSubGroup: must be at least 1, got 0",
            ),
            (
                {"queue": "q", "subGroups": [{"name": "a", "minSubGroup": 1}]},
                'spec.subGroups[0].minSubGroup: subgroup "a" has no child subgroups; a leaf subgroup sets minMember '
                "instead",
            ),
            (
                {"queue": "q", "subGroups": [{"name": "a", "minSubGroup": 2}, {"name": "b", "parent": "a"}]},
                'spec.subGroups[0].minSubGroup: is 2 but subgroup "a" has only 1 child subgroups',
            ),
            ({"queue": "q", "preemptionDelay": "-5s"}, 'spec.preemptionDelay: must not be negative, got "-5s"'),
            (
                {"queue": "q", "stalenessGracePeriod": "soon"},
                'spec.stalenessGracePeriod: must be a duration such as 90s, 10m or 2h, got "soon"',
            ),
        ]
        for spec, expected in cases:
            message = await refusal(kube, resources.PODGROUPS, namespace, podgroup(unique("pg"), spec))
            assert message == webhook_says("podgroups.kai.scheduler", expected)
        fine = podgroup("fine", {"minMember": 1, "queue": "q"})
        await kube.request("POST", resources.PODGROUPS.path(namespace=namespace), body=fine)

        # GPU sharing off: a pod asking for part of a GPU is refused, saying how to turn sharing on
        for which, value in (("gpu-fraction", "0.5"), ("gpu-memory", "2000")):
            message = await refusal(kube, resources.PODS, namespace, pod(unique("share"), {which: value}))
            assert message == webhook_says(
                "pods.kai.scheduler",
                f"metadata.annotations.{which}: GPU sharing is off on this cluster, so a pod cannot ask for part of a "
                "GPU; turn it on with `helm upgrade kai deploy/helm/kai -n kai-scheduler --reuse-values --set "
                "global.gpuSharing=true` (kai run --gpu-sharing), or request whole GPUs with nvidia.com/gpu",
            )
        # a whole-GPU pod is admitted (dry run: nothing is left for later tests' kai to schedule)
        await kube.request(
            "POST", resources.PODS.path(namespace=namespace) + "?dryRun=All", body=pod("whole", {}, gpus=1)
        )
        # so is any pod in a namespace the chart excludes from the webhooks
        await kube.request(
            "POST", resources.PODS.path(namespace=EXCLUDED) + "?dryRun=All", body=pod("half", {"gpu-fraction": "2"})
        )


async def test_shared_pods_annotations_are_checked_and_kuberay_half_gpu_workers_get_one_device(
    kube: kc.KubeClient, namespace: str, objects: Objects, nodes: NodeFactory, webhook_kai: WebhookKai
) -> None:
    """KubeRay's ray-cluster.kai-gpu-sharing.yaml: two workers of 0.5 GPU share one device; both get
    its UUID from their ConfigMaps."""
    await install_ray_crd(kube)  # before kai starts, so its RayCluster informer finds the kind at once
    reservations = unique("reservations")
    await kube.request(
        "POST",
        resources.NAMESPACES.path(),
        body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": reservations}},
    )
    runtime_class = unique("nvidia")  # the runtimeClassName the chart's webhook.gpuPodRuntimeClassName gives
    body = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": runtime_class}}
    await kube.request("POST", RUNTIME_CLASSES, body={**body, "handler": "nvidia"})
    try:
        sharing = ("--gpu-sharing", "--gpu-pod-runtime-class", runtime_class, *sharing_flags(reservations))
        async with device_plugin(kube, reservations), webhook_kai(*sharing):
            bad = [
                (
                    {"gpu-fraction": "1.5"},
                    0,
                    'metadata.annotations.gpu-fraction: must be greater than 0 and less than 1, got "1.5"; '
                    "request whole GPUs with nvidia.com/gpu",
                ),
                (
                    {"gpu-fraction": "half"},
                    0,
                    'metadata.annotations.gpu-fraction: must be a number between 0 and 1, got "half"',
                ),
                (
                    {"gpu-fraction": "0.5", "gpu-memory": "2000"},
                    0,
                    "metadata.annotations.gpu-memory: cannot be combined with gpu-fraction",
                ),
                (
                    {"gpu-fraction": "0.5"},
                    1,
                    "metadata.annotations.gpu-fraction: cannot be combined with a nvidia.com/gpu request",
                ),
                ({"gpu-memory": "0"}, 0, 'metadata.annotations.gpu-memory: must be greater than 0, got "0"'),
                (
                    {"gpu-memory": "2Gi"},
                    0,
                    'metadata.annotations.gpu-memory: must be a whole number of MiB, got "2Gi"',
                ),
                (
                    {"gpu-memory": "2000"},
                    1,
                    "metadata.annotations.gpu-memory: cannot be combined with a nvidia.com/gpu request",
                ),
                (
                    {"gpu-fraction-num-devices": "2"},
                    0,
                    "metadata.annotations.gpu-fraction-num-devices: needs gpu-fraction or gpu-memory",
                ),
                (
                    {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "0"},
                    0,
                    'metadata.annotations.gpu-fraction-num-devices: must be a whole number >= 1, got "0"',
                ),
                (
                    {"gpu-memory": "2000", "gpu-fraction-num-devices": "two"},
                    0,
                    'metadata.annotations.gpu-fraction-num-devices: must be a whole number >= 1, got "two"',
                ),
                ({"mps": "true"}, 0, "metadata.annotations.mps: is only allowed with gpu-fraction or gpu-memory"),
                (
                    {"gpu-fraction": "0.5", "gpu-fraction-container-name": "sidecar"},
                    0,
                    'metadata.annotations.gpu-fraction-container-name: names no container of the pod: "sidecar" '
                    "(containers: main)",
                ),
            ]
            for annotations, gpus, expected in bad:
                message = await refusal(kube, resources.PODS, namespace, pod(unique("bad"), annotations, gpus=gpus))
                assert message == webhook_says("pods.kai.scheduler", expected), annotations

            node = await nodes(gpus=3, gpu_memory_mib=81920)
            cluster = next(o for o in await objects.create(SHARING_MANIFEST.read_text()) if o["kind"] == "RayCluster")
            made = await create_operator_pods(kube, cluster)
            workers = [p for p in made if (p["metadata"].get("annotations") or {}).get("gpu-fraction") == "0.5"]
            assert len(workers) == 2
            for worker in workers:  # mutated at admission: the ConfigMap's name, the env references, the runtime
                assert worker["spec"]["runtimeClassName"] == runtime_class
                base = worker["metadata"]["annotations"]["runai/shared-gpu-configmap"]
                env = {e["name"]: e["valueFrom"]["configMapKeyRef"] for e in worker["spec"]["containers"][0]["env"]}
                assert env == {
                    k: {"name": f"{base}-0", "key": k}
                    for k in ("NVIDIA_VISIBLE_DEVICES", "RUNAI_NUM_OF_GPUS", "GPU_PORTION")
                }

            async def bound() -> list[dict[str, Any]] | None:
                found = [await get(kube, resources.PODS, w["metadata"]["name"], namespace) for w in workers]
                return found if all(node_of(p) for p in found) and len(made) == 3 else None

            found = await eventually(bound, timeout=60)
            groups = {p["metadata"]["labels"]["runai-gpu-group"] for p in found}
            assert {node_of(p) for p in found} == {node} and len(groups) == 1, "same node, same GPU-GROUP"
            group = groups.pop()

            async def one_reservation() -> dict[str, Any] | None:
                # one live reservation pod for the device (a reservation abandoned on the way, say after a
                # timeout on a loaded machine, is deleted by the next cycle)
                found = await reservation_pods(kube, reservations, node)
                return (
                    found[0] if len(found) == 1 and found[0]["metadata"]["labels"]["runai-gpu-group"] == group else None
                )

            reservation = await eventually(one_reservation, timeout=60)
            uuid = reservation["metadata"]["annotations"][UUID_ANNOTATION]
            for worker in found:
                base = worker["metadata"]["annotations"]["runai/shared-gpu-configmap"]
                configmap = await get(kube, resources.CONFIG_MAPS, f"{base}-0", namespace)
                assert configmap["data"] == {
                    "NVIDIA_VISIBLE_DEVICES": uuid,
                    "GPU_PORTION": "0.50",
                    "RUNAI_NUM_OF_GPUS": "0.50",
                }
                assert configmap["metadata"]["ownerReferences"][0]["uid"] == worker["metadata"]["uid"]

            # a multi-device fraction: half of each of two devices, both in its NVIDIA_VISIBLE_DEVICES
            multi = pod("two-devices", {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"})
            multi["metadata"]["labels"] = {"kai.scheduler/queue": "team-a"}
            await kube.request("POST", resources.PODS.path(namespace=namespace), body=multi)

            async def multi_bound() -> dict[str, Any] | None:
                found = await get(kube, resources.PODS, "two-devices", namespace)
                return found if node_of(found) else None

            multi = await eventually(multi_bound, timeout=60)
            labels = multi["metadata"]["labels"]
            first = labels["runai-gpu-group"]
            [second] = [v for k, v in labels.items() if k.startswith("runai-gpu-group/")]

            async def three_reservations() -> dict[str, str] | None:
                found = await reservation_pods(kube, reservations, node)
                by_group = {
                    p["metadata"]["labels"]["runai-gpu-group"]: p["metadata"]["annotations"].get(UUID_ANNOTATION)
                    for p in found
                }
                # one reservation pod per device: the workers' and the two of two-devices
                return by_group if len(found) == 3 and set(by_group) == {group, first, second} else None

            by_group = await eventually(three_reservations, timeout=60)
            base = multi["metadata"]["annotations"]["runai/shared-gpu-configmap"]
            configmap = await get(kube, resources.CONFIG_MAPS, f"{base}-0", namespace)
            assert configmap["data"]["NVIDIA_VISIBLE_DEVICES"] == f"{by_group[first]},{by_group[second]}"
            assert configmap["data"]["GPU_PORTION"] == "0.50"

            # both workers gone (the kubelet stopped them): their device is freed, two-devices keeps its two
            for worker in found:
                await finish_deletion(kube, namespace, worker["metadata"]["name"])

            async def workers_device_freed() -> bool:
                left = {
                    p["metadata"]["labels"]["runai-gpu-group"] for p in await reservation_pods(kube, reservations, node)
                }
                return left == {first, second}

            await eventually(workers_device_freed, timeout=60)
    finally:
        await kube.request("DELETE", resources.NAMESPACES.path(name=reservations))
        await kube.request("DELETE", f"{RUNTIME_CLASSES}/{runtime_class}")
