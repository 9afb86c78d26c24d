"""Seeded generators of the API objects `kai run` is measured on (targets 3 to 6 and issue 9).

Two shapes of the same clusters:

* `manifests`: what a user (or an operator) sends to the API server: Nodes, PriorityClasses,
  Queues, PodGroups and Pods, ready to be created. Running pods are created already bound
  (`spec.nodeName`), as a kubelet-less cluster shows a pod that runs.
* `as_served`: the same objects as the API server returns them in lists and watch events
  (uid, resourceVersion, creationTimestamp, managedFields, the defaults admission adds), for
  measurements that feed `kai run`'s cache without an API server (targets 3 to 5 in-process).

Every generator takes its sizes and a seed (numpy's `default_rng`) and returns the same objects
for the same arguments.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

GPUS_PER_NODE = 8
NAMESPACE = "bench"
SCHEDULER = "kai-scheduler"
QUEUES = 20
CREATED = "2026-01-01T00:00:00Z"

Manifest = dict[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class ClusterManifests:
    """The objects of one cluster, in creation order: cluster-wide ones, then PodGroups, then pods."""

    nodes: list[Manifest]
    priority_classes: list[Manifest]
    queues: list[Manifest]
    podgroups: list[Manifest]
    pods: list[Manifest]
    gangs: dict[str, int] = field(default_factory=dict)  # PodGroup name -> minMember, for the pending ones

    def all(self) -> list[Manifest]:
        return [*self.priority_classes, *self.queues, *self.nodes, *self.podgroups, *self.pods]


def node(i: int) -> Manifest:
    name = f"node-{i:05d}"
    allocatable = {"cpu": "128", "memory": "1Ti", "nvidia.com/gpu": str(GPUS_PER_NODE), "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "nvidia.com/gpu.memory": "81920",
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
            },
        },
        "status": {
            "capacity": dict(allocatable),
            "allocatable": allocatable,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": CREATED,
                    "lastTransitionTime": CREATED,
                }
            ],
        },
    }


def priority_classes() -> list[Manifest]:
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
            "preemptionPolicy": "PreemptLowerPriority",
        }
        for name, value in (("train", 50), ("build", 100), ("inference", 125))
    ]


def queues(gpus: float, count: int = QUEUES) -> list[Manifest]:
    """A root queue and `count` leaves, each with an equal share of `gpus` as its GPU quota."""

    def queue(name: str, parent: str | None, gpu_quota: float) -> Manifest:
        spec: Manifest = {
            "resources": {
                "gpu": {"quota": gpu_quota, "limit": -1, "overQuotaWeight": 1},
                "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
            }
        }
        if parent is not None:
            spec["parentQueue"] = parent
        return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}

    share = float(int(gpus / count))
    return [queue("bench-root", None, -1), *(queue(f"bench-q{q:03d}", "bench-root", share) for q in range(count))]


def podgroup(name: str, *, queue: str, min_member: int, priority_class: str = "train") -> Manifest:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"kai.scheduler/queue": queue}},
        "spec": {"minMember": min_member, "queue": queue, "priorityClassName": priority_class},
    }


def pod(
    name: str, *, group: str, queue: str, gpus: int, cpu: str, node_name: str = "", scheduler: str = SCHEDULER
) -> Manifest:
    requests = {"cpu": cpu, "memory": "4Gi"}
    limits: dict[str, str] = {}
    if gpus:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(gpus)
    resources: Manifest = {"requests": requests}
    if limits:
        resources["limits"] = limits
    spec: Manifest = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "image": "registry.example/trainer:1.0", "resources": resources}],
        "terminationGracePeriodSeconds": 30,
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"kai.scheduler/queue": queue, "app": group},
            "annotations": {"pod-group-name": group},
        },
        "spec": spec,
    }


def running_cluster(*, nodes: int, pods: int, seed: int = 0) -> ClusterManifests:
    """Targets 3 and 4: `nodes` nodes x 8 GPUs with `pods` running pods spread evenly over them
    (8 one-GPU pods per node, the rest CPU-only), in jobs of 1..8 pods dealt round-robin over 20
    queues; nothing pending."""
    rng = np.random.default_rng(seed)
    per_node = max(1, -(-pods // max(nodes, 1)))
    slots: list[tuple[str, int, str]] = []
    for k in range(per_node):
        for i in range(nodes):
            if len(slots) == pods:
                break
            slots.append((f"node-{i:05d}", 1 if k < GPUS_PER_NODE else 0, "1" if k < GPUS_PER_NODE else "500m"))
    groups: list[Manifest] = []
    made: list[Manifest] = []
    g = 0
    while len(made) < len(slots):
        size = min(len(slots) - len(made), int(rng.integers(1, 9)))
        name, queue = f"run-{g:06d}", f"bench-q{g % QUEUES:03d}"
        groups.append(podgroup(name, queue=queue, min_member=size))
        for k in range(size):
            node_name, gpus, cpu = slots[len(made)]
            made.append(pod(f"{name}-{k}", group=name, queue=queue, gpus=gpus, cpu=cpu, node_name=node_name))
        g += 1
    return ClusterManifests(
        nodes=[node(i) for i in range(nodes)],
        priority_classes=priority_classes(),
        queues=queues(nodes * GPUS_PER_NODE),
        podgroups=groups,
        pods=made,
    )


def backlog_cluster(
    *, nodes: int, pods: int, seed: int = 0, scheduler: str = SCHEDULER, max_gang: int = 8
) -> ClusterManifests:
    """Target 6 and issue 9: `nodes` idle nodes x 8 GPUs and a backlog of `pods` pending one-GPU pods
    in gangs of 1..`max_gang` (minMember = size), dealt round-robin over 20 queues; every pod fits.
    With `scheduler="default-scheduler"` the same pods are for kube-scheduler (no PodGroups: it has no
    gangs, so it gets the same pods one by one)."""
    rng = np.random.default_rng(seed)
    groups: list[Manifest] = []
    made: list[Manifest] = []
    gangs: dict[str, int] = {}
    g = 0
    while len(made) < pods:
        size = min(pods - len(made), int(rng.integers(1, max_gang + 1)))
        name, queue = f"job-{g:06d}", f"bench-q{g % QUEUES:03d}"
        if scheduler == SCHEDULER:
            groups.append(podgroup(name, queue=queue, min_member=size))
            gangs[name] = size
        for k in range(size):
            made.append(pod(f"{name}-{k}", group=name, queue=queue, gpus=1, cpu="1", scheduler=scheduler))
        g += 1
    return ClusterManifests(
        nodes=[node(i) for i in range(nodes)],
        priority_classes=priority_classes(),
        queues=queues(nodes * GPUS_PER_NODE),
        podgroups=groups,
        pods=made,
        gangs=gangs,
    )


# ----------------------------------------------------------------------------------- as served


def _managed_fields(manager: str, spec_keys: list[str]) -> list[Manifest]:
    """A managedFields entry of the size the API server records for a create."""
    return [
        {
            "manager": manager,
            "operation": "Update",
            "apiVersion": "v1",
            "time": CREATED,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {".": {}}, "f:annotations": {".": {}}},
                "f:spec": {f"f:{k}": {} for k in spec_keys},
            },
        }
    ]


def as_served(obj: Manifest, *, serial: int) -> Manifest:
    """The object as the API server returns it after creating it (metadata and defaults filled in)."""
    out = copy.deepcopy(obj)
    meta = out["metadata"]
    meta["uid"] = f"00000000-0000-4000-8000-{serial:012d}"
    meta["resourceVersion"] = str(1000 + serial)
    meta["creationTimestamp"] = CREATED
    if out["kind"] == "Pod":
        meta["generation"] = 1
        spec = out["spec"]
        meta["managedFields"] = _managed_fields("kai-bench", sorted(spec))
        for container in spec["containers"]:
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            container.setdefault("terminationMessagePolicy", "File")
            container.setdefault("imagePullPolicy", "IfNotPresent")
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("securityContext", {})
        spec.setdefault("priority", 0)
        spec.setdefault("enableServiceLinks", True)
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        spec.setdefault(
            "tolerations",
            [
                {"key": k, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
                for k in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
            ],
        )
        out["status"] = {"phase": "Pending", "qosClass": "Burstable"}
    return out


def served(cluster: ClusterManifests) -> list[Manifest]:
    """Every object of the cluster as the API server returns it."""
    return [as_served(obj, serial=i) for i, obj in enumerate(cluster.all())]
