"""Targets 3, 4 and 5: `kai run`'s steady cycle, its peak memory, and how fast its cache takes watch events.

* Steady cycle and peak memory (targets 3 and 4) are measured on `kai run` itself, started as a user
  starts it against a real API server holding the cluster (`kube_objects.running_cluster`: every pod
  bound, nothing pending). Once the first cycles have written what they had to write, cycles are
  read from `kai run`'s own metrics over a window: the mean duration of a cycle
  (`kai_cycle_duration_seconds`) and how many were skipped (`kai_cycles_skipped_total`); the first,
  full cycle is read the same way. Peak memory is the process's VmHWM after all that.
* Watch events (target 5) are measured in this process on the path `kai run` gives them: the pod
  informer's `deliver` (msgspec decoding of the API server's JSON line, the informer's store) and
  the cache's handler, for a churning stream in which every pod is created, bound, reported Running
  by its kubelet and deleted; CPU seconds, since an API server on the same two cores cannot send
  20,000 events a second.
"""

from __future__ import annotations

import asyncio
import copy
import pathlib
import time
from dataclasses import dataclass

import msgspec

from benchmarks import apiserver
from benchmarks import kube_objects as ko
from kai.core.session import SchedulerConfig
from kai.kubernetes import client as kc
from kai.kubernetes import resources
from kai.kubernetes.runner import Scheduler
from kai.kubernetes.writer import Writer

CYCLE_COUNT = apiserver.CYCLES
CYCLE_SUM = apiserver.CYCLE_SECONDS
SKIPPED = apiserver.SKIPPED


@dataclass(frozen=True, kw_only=True, slots=True)
class Steady:
    nodes: int
    pods: int
    create_seconds: float  # building the cluster through the API server (not the scheduler's time)
    first_cycle: float  # the first (full) cycle, seconds
    steady_cycle: float  # mean cycle over the window, seconds
    cycles: int  # cycles in the window
    skipped: int  # of which skipped
    peak_rss: int  # bytes
    cpu: float  # kai run's CPU seconds, start to end


async def steady(workdir: pathlib.Path, *, nodes: int, pods: int, window: float, seed: int = 0) -> Steady:
    """Targets 3 and 4 on one cluster of `nodes` nodes and `pods` running pods."""
    plane = apiserver.ControlPlane.up(workdir / f"steady-{nodes}-{pods}")
    try:
        cluster = ko.running_cluster(nodes=nodes, pods=pods, seed=seed)
        async with apiserver.admin_client(plane.kubeconfig) as client:
            began = time.monotonic()
            await apiserver.install_kai_crds(client)
            await apiserver.ensure_namespace(client, ko.NAMESPACE)
            await apiserver.create_all(client, [*cluster.priority_classes, *cluster.queues, *cluster.nodes])
            await apiserver.create_all(client, [*cluster.podgroups, *cluster.pods])
            created = time.monotonic() - began
        kai = apiserver.KaiProcess(kubeconfig=plane.kubeconfig, log=workdir / f"kai-run-steady-{nodes}.log")
        proc = kai.start()
        try:
            await kai.wait_ready(timeout=600)
            first: dict[str, float] = {}
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:
                first = await kai.metrics()
                if first.get(CYCLE_COUNT, 0) >= 1:
                    break
                await asyncio.sleep(0.2)
            first_cycle = first.get(CYCLE_SUM, 0.0) / max(first.get(CYCLE_COUNT, 1.0), 1.0)
            start = await kai.settle(timeout=600)
            await asyncio.sleep(window)
            end = await kai.metrics()
            cycles = int(end.get(CYCLE_COUNT, 0) - start.get(CYCLE_COUNT, 0))
            spent = end.get(CYCLE_SUM, 0.0) - start.get(CYCLE_SUM, 0.0)
            return Steady(
                nodes=nodes,
                pods=pods,
                create_seconds=created,
                first_cycle=first_cycle,
                steady_cycle=spent / max(cycles, 1),
                cycles=cycles,
                skipped=int(end.get(SKIPPED, 0) - start.get(SKIPPED, 0)),
                peak_rss=proc.peak_rss(),
                cpu=proc.cpu(),
            )
        finally:
            kai.stop()
    finally:
        plane.down()


# ----------------------------------------------------------------------------------- target 5


def churn_lines(*, nodes: int, pods: int, seed: int = 0) -> tuple[list[bytes], list[bytes]]:
    """The cluster's other objects as ADDED lines, and a pod event stream: each pod ADDED pending, bound
    (`spec.nodeName`), reported Running by its kubelet, DELETED. Four events per pod."""
    cluster = ko.backlog_cluster(nodes=nodes, pods=pods, seed=seed)
    setup = [
        msgspec.json.encode({"type": "ADDED", "object": ko.as_served(o, serial=i)})
        for i, o in enumerate([*cluster.priority_classes, *cluster.queues, *cluster.nodes, *cluster.podgroups])
    ]
    events: list[bytes] = []
    serial = len(setup)
    for i, manifest in enumerate(cluster.pods):
        pod = ko.as_served(manifest, serial=serial + i)
        version = int(pod["metadata"]["resourceVersion"]) * 4
        stages = []
        bound = copy.deepcopy(pod)
        bound["spec"]["nodeName"] = f"node-{i % nodes:05d}"
        bound["metadata"]["annotations"]["received-resource-type"] = "Regular"  # as kai run binds
        bound["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
        running = copy.deepcopy(bound)
        running["status"] = {
            "phase": "Running",
            "qosClass": "Burstable",
            "podIP": "10.0.0.1",
            "startTime": ko.CREATED,
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": ko.CREATED}
                for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
            ],
            "containerStatuses": [
                {
                    "name": "main",
                    "ready": True,
                    "restartCount": 0,
                    "image": "registry.example/trainer:1.0",
                    "imageID": "registry.example/trainer@sha256:" + "0" * 64,
                    "containerID": "containerd://" + "1" * 64,
                    "started": True,
                    "state": {"running": {"startedAt": ko.CREATED}},
                }
            ],
        }
        for kind, obj in (("ADDED", pod), ("MODIFIED", bound), ("MODIFIED", running), ("DELETED", running)):
            obj = copy.deepcopy(obj)
            version += 1
            obj["metadata"]["resourceVersion"] = str(version)
            stages.append(msgspec.json.encode({"type": kind, "object": obj}))
        events += stages
    return setup, events


def _offline_client() -> kc.KubeClient:
    """A client that is never used to send anything: the informers below are fed by hand."""
    from lightkube.config import kubeconfig as lk_kubeconfig

    config = lk_kubeconfig.KubeConfig.from_dict(
        {
            "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
            "users": [{"name": "u", "user": {"token": "unused"}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "c",
        }
    ).get()
    assert config is not None
    return kc.KubeClient(config)


def events_per_second(*, nodes: int, pods: int, seed: int = 0) -> tuple[int, float]:
    """(pod events, CPU seconds) to apply the churn stream to `kai run`'s cache through its informers."""
    setup, events = churn_lines(nodes=nodes, pods=pods, seed=seed)
    client = _offline_client()
    scheduler = Scheduler(client=client, writer=Writer(client), config=SchedulerConfig())
    informers = {i.resource.kind: i for i in scheduler.make_informers()}
    for line in setup:
        kind = msgspec.json.decode(line)["object"]["kind"]
        informers[kind].deliver(line)
    pods_informer = informers[resources.PODS.kind]
    began = time.process_time()
    for line in events:
        pods_informer.deliver(line)
    return len(events), time.process_time() - began
