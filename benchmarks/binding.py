"""Target 6 and issue 9: pods bound through a real API server by `kai run`, beside the stock kube-scheduler.

Each scheduler gets a fresh control plane (`cluster up DIR --scheduler`, kube-scheduler with client
qps/burst 5000; `kai run` gets the same with `--kube-api-qps 5000 --kube-api-burst 5000`). The
cluster and its backlog of pending pods are created first, with the scheduler stopped; then the
scheduler is started and a watch records when each pod is first seen bound. Measured:

* pods/s: backlog / seconds from the scheduler's start to the last pod bound (start-up included),
  and between the first and the last bind;
* CPU per bound pod: the scheduler process's CPU seconds (from /proc) at the last bind / pods;
* gangs bound whole: every pod of every gang bound at the end, none bound twice;
* where the time goes: seconds from the start to `kai run`'s caches synced (its `/readyz`) and to the
  first binding; the API server's and etcd's CPU seconds per bound pod over the same span, and the
  API server's own count of the write requests it served per bound pod (`apiserver_request_total`
  by resource and subresource, before and after: bindings, Events, PodGroup and Queue writes);
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
    synced: float | None = None  # kai run: seconds from its start to its caches synced (/readyz)
    first_bind: float = 0.0  # seconds from the scheduler's start to the first pod bound
    server_cpu: float = 0.0  # kube-apiserver and etcd CPU seconds from the start to the last bind
    writes: tuple[tuple[str, int], ...] = ()  # write requests the API server served meanwhile, by target

    @property
    def pods_per_second(self) -> float:
        return self.bound / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_per_pod_ms(self) -> float:
        return 1000.0 * self.cpu / max(self.bound, 1)

    @property
    def server_cpu_per_pod_ms(self) -> float:
        return 1000.0 * self.server_cpu / max(self.bound, 1)

    @property
    def writes_per_pod(self) -> float:
        return sum(n for _, n in self.writes) / max(self.bound, 1)

    def timeline(self) -> str:
        """Where the time went, in one line."""
        synced = f"synced {self.synced:.1f} s, " if self.synced is not None else ""
        writes = ", ".join(f"{what} {n / max(self.bound, 1):.2f}" for what, n in self.writes)
        return (
            f"{synced}first binding {self.first_bind:.1f} s, last {self.seconds:.1f} s "
            f"({self.bound / max(self.first_to_last, 1e-9):.0f} pods/s between); API server + etcd "
            f"{self.server_cpu_per_pod_ms:.2f} ms CPU/pod; writes/pod {self.writes_per_pod:.2f} ({writes})"
        )

    @property
    def latency_median(self) -> float:
        return statistics.median(self.latency) if self.latency else float("nan")


async def _prepare(client: kc.KubeClient, cluster: ko.ClusterManifests) -> None:
    await apiserver.install_kai_crds(client)
    await apiserver.ensure_namespace(client, ko.NAMESPACE)
    await apiserver.create_all(client, [*cluster.priority_classes, *cluster.queues, *cluster.nodes])
    await apiserver.create_all(client, cluster.podgroups)
    await apiserver.create_all(client, cluster.pods)


WRITE_VERBS = frozenset(("POST", "PUT", "PATCH", "DELETE"))


async def server_writes(client: kc.KubeClient) -> dict[str, int]:
    """The write requests the API server has served, by resource and subresource (from its own
    `apiserver_request_total`)."""
    counts: dict[str, int] = {}
    async with client.stream("/metrics", read_timeout=60.0) as lines:
        async for raw in lines:
            line = raw.decode()
            if not line.startswith("apiserver_request_total{"):
                continue
            labels_text, _, value = line[len("apiserver_request_total{") :].rpartition("} ")
            labels = dict(part.split("=", 1) for part in labels_text.split(","))
            labels = {k: v.strip('"') for k, v in labels.items()}
            if labels.get("verb") not in WRITE_VERBS:
                continue
            what = labels.get("resource", "") + ("/" + labels["subresource"] if labels.get("subresource") else "")
            counts[what] = counts.get(what, 0) + int(float(value))
    return counts


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
            server = [apiserver.Proc(plane.pid("kube-apiserver")), apiserver.Proc(plane.pid("etcd"))]
            writes_before = await server_writes(client)
            server_cpu = sum(p.cpu() for p in server)
            synced: float | None = None
            began = time.monotonic()
            if kai:
                kai_process = apiserver.KaiProcess(kubeconfig=plane.kubeconfig, log=workdir / "kai-run.log")
                proc = kai_process.start()
            else:
                proc = plane.start_scheduler()
            try:
                deadline = time.monotonic() + timeout
                if kai_process is not None:
                    await kai_process.wait_ready(timeout=timeout)
                    synced = time.monotonic() - began
                while not await watch.wait_for(total, timeout=5.0) and time.monotonic() < deadline:
                    if kai_process is not None:
                        kai_process.check()
                cpu, rss = proc.cpu(), proc.peak_rss()
                server_cpu = sum(p.cpu() for p in server) - server_cpu
                writes_after = await server_writes(client)
                served = {k: n - writes_before.get(k, 0) for k, n in writes_after.items()}
                writes = tuple(sorted(((k, n) for k, n in served.items() if n > 0), key=lambda kn: (-kn[1], kn[0])))
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
                synced=synced,
                first_bind=(times[0] - began) if times else float("inf"),
                server_cpu=server_cpu,
                writes=writes,
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
