"""Target 6 and issue 9: pods bound through a real API server by `kai run`, beside the stock kube-scheduler.

Each scheduler gets a fresh control plane (`cluster up DIR --scheduler`, kube-scheduler with client
qps/burst 5000; `kai run` gets the same with `--kube-api-qps 5000 --kube-api-burst 5000`). The
cluster and its backlog of pending pods are created first, with the scheduler stopped; then the
scheduler is started and a watch records when each pod is first seen bound. Measured:

* pods/s: backlog / seconds from the scheduler's start to the last pod bound (start-up included),
  and between the first and the last bind;
* CPU per bound pod: the scheduler process's CPU seconds (from /proc) at the last bind / pods;
* gangs bound whole: every pod of every gang bound at the end, none bound twice;
* latency on an idle cluster (issue 9): after the backlog, once the scheduler is idle (`kai run`: its
  cycles are skipped), one pod is created at a time and the time to its binding is taken, `samples` times.

kube-scheduler has no gangs: it gets the same pods (one GPU each, same counts) without PodGroups.
"""

from __future__ import annotations

import asyncio
import pathlib
import statistics
import time
from dataclasses import dataclass

from benchmarks import apiserver
from benchmarks import kube_objects as ko
from kai.kubernetes import client as kc


@dataclass(frozen=True, kw_only=True, slots=True)
class BindRun:
    scheduler: str
    pods: int
    bound: int
    seconds: float  # scheduler start to last bind
    first_to_last: float
    cpu: float  # the scheduler's CPU seconds at the last bind
    peak_rss: int
    gangs_whole: bool | None  # None: no gangs (kube-scheduler)
    latency: tuple[float, ...]  # idle-cluster creation-to-binding samples, seconds
    cycles: tuple[int, int] = (0, 0)  # kai run's cycles at the last bind: all, skipped

    @property
    def pods_per_second(self) -> float:
        return self.bound / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_per_pod_ms(self) -> float:
        return 1000.0 * self.cpu / max(self.bound, 1)

    @property
    def latency_median(self) -> float:
        return statistics.median(self.latency) if self.latency else float("nan")


async def _prepare(client: kc.KubeClient, cluster: ko.ClusterManifests) -> None:
    await apiserver.install_kai_crds(client)
    await apiserver.ensure_namespace(client, ko.NAMESPACE)
    await apiserver.create_all(client, [*cluster.priority_classes, *cluster.queues, *cluster.nodes])
    await apiserver.create_all(client, cluster.podgroups)
    await apiserver.create_all(client, cluster.pods)


async def _latency(client: kc.KubeClient, watch: apiserver.BindWatch, *, kai: bool, samples: int) -> list[float]:
    """Create one pod at a time on the idle cluster; seconds from its creation to its binding."""
    out: list[float] = []
    scheduler = ko.SCHEDULER if kai else "default-scheduler"
    for i in range(samples):
        name = f"idle-{i:03d}"
        objects = [ko.podgroup(name, queue="bench-q000", min_member=1)] if kai else []
        objects.append(ko.pod(f"{name}-0", group=name, queue="bench-q000", gpus=1, cpu="1", scheduler=scheduler))
        if kai:
            await apiserver.create_all(client, objects[:1])
        began = time.monotonic()
        await apiserver.create_all(client, objects[-1:])
        bound = await watch.wait_for_pod(f"{name}-0", timeout=30)
        if bound is None:
            break
        out.append(bound - began)
        await asyncio.sleep(0.3 + (i % 7) * 0.1)  # spread the creations over the cycle period
    return out


async def _run(
    workdir: pathlib.Path,
    cluster: ko.ClusterManifests,
    *,
    kai: bool,
    samples: int,
    timeout: float,
) -> BindRun:
    plane = apiserver.ControlPlane.up(workdir / ("kai" if kai else "kube-scheduler"), scheduler=True)
    try:
        plane.stop_scheduler()
        async with apiserver.admin_client(plane.kubeconfig) as client:
            await _prepare(client, cluster)
            watch = apiserver.BindWatch(client, ko.NAMESPACE)
            await watch.start()
            total = len(cluster.pods)
            kai_process: apiserver.KaiProcess | None = None
            began = time.monotonic()
            if kai:
                kai_process = apiserver.KaiProcess(kubeconfig=plane.kubeconfig, log=workdir / "kai-run.log")
                proc = kai_process.start()
            else:
                proc = plane.start_scheduler()
            try:
                deadline = time.monotonic() + timeout
                while not await watch.wait_for(total, timeout=5.0) and time.monotonic() < deadline:
                    if kai_process is not None:
                        kai_process.check()
                cpu, rss = proc.cpu(), proc.peak_rss()
                cycles = (0, 0)
                if kai_process is not None:
                    metrics = await kai_process.metrics()
                    cycles = (
                        int(metrics.get("kai_cycle_duration_seconds_count", 0)),
                        int(metrics.get("kai_cycles_skipped_total", 0)),
                    )
                times = sorted(watch.bound.values())
                bound = len(watch.bound)
                whole: bool | None = None
                if kai:
                    whole = all(
                        all(f"{g}-{k}" in watch.bound for k in range(size)) for g, size in cluster.gangs.items()
                    )
                latency: list[float] = []
                if samples:  # on an idle cluster: the backlog's statuses and events written first
                    if kai_process is not None:
                        await kai_process.settle(timeout=300)
                    else:
                        await asyncio.sleep(5.0)
                    latency = await _latency(client, watch, kai=kai, samples=samples)
            finally:
                if kai_process is not None:
                    kai_process.stop()
            await watch.stop()
            return BindRun(
                scheduler="kai run" if kai else "kube-scheduler",
                pods=total,
                bound=bound,
                seconds=(times[-1] - began) if times else float("inf"),
                first_to_last=(times[-1] - times[0]) if len(times) > 1 else 0.0,
                cpu=cpu,
                peak_rss=rss,
                gangs_whole=whole,
                latency=tuple(latency),
                cycles=cycles,
            )
    finally:
        plane.down()


async def race(
    workdir: pathlib.Path, *, nodes: int, pods: int, seed: int = 0, samples: int = 0, timeout: float = 600.0
) -> tuple[BindRun, BindRun]:
    """kube-scheduler, then `kai run`, each on its own fresh control plane with the same backlog."""
    stock = await _run(
        workdir,
        ko.backlog_cluster(nodes=nodes, pods=pods, seed=seed, scheduler="default-scheduler"),
        kai=False,
        samples=samples,
        timeout=timeout,
    )
    ours = await _run(
        workdir, ko.backlog_cluster(nodes=nodes, pods=pods, seed=seed), kai=True, samples=samples, timeout=timeout
    )
    return stock, ours
