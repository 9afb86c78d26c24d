"""`kai run`'s metrics and probes: what a platform team scrapes and what the kubelet asks.

Metrics (Prometheus, on a per-process registry so several schedulers can live in one process):

| metric | type | labels | what |
|---|---|---|---|
| `kai_queue_fair_share` | gauge | queue, resource | the queue's fair share (gpu devices, cpu millicores, memory MB) |
| `kai_queue_allocated` | gauge | queue, resource | allocated to the queue, same units |
| `kai_queue_requested` | gauge | queue, resource | requested by the queue's pods, same units |
| `kai_queue_quota` | gauge | queue, resource | the queue's quota (-1: unlimited) |
| `kai_queue_limit` | gauge | queue, resource | the queue's limit (-1: none) |
| `kai_cycle_duration_seconds` | histogram | | one scheduling cycle (grouping, snapshot, decisions, planning) |
| `kai_cycles_skipped_total` | counter | | cycles skipped: nothing changed since a settled cycle |
| `kai_action_duration_seconds` | histogram | action | one action within a cycle |
| `kai_pods_bound_total` | counter | | pods bound |
| `kai_pods_evicted_total` | counter | action | pods evicted, by the action that chose them |
| `kai_scenario_search_jobs_total` | counter | action, result | job attempts by how the victim search ended (below) |
| `kai_scenario_search_scenarios_total` | counter | action | scenarios the victim searches simulated |
| `kai_scenario_search_budget_exhausted_total` | counter | action | cycles an action stopped at its scenario budget |
| `kai_pods_pending` | gauge | | pods of ours waiting for a node |
| `kai_podgroups_pending` | gauge | queue, reason | PodGroups waiting after the last cycle, by reason (below) |
| `kai_bind_failures_total` | counter | | bindings that failed for good |
| `kai_watch_restarts_total` | counter | resource, reason | watches restarted (dropped, closed, 410 relist, ...) |
| `kai_write_duration_seconds` | histogram | operation | API writes, retries included |
| `kai_is_leader` | gauge | | 1 while this replica holds the Lease |

`kai_scenario_search_jobs_total` counts the job attempts of reclaim, preempt and consolidation:
`solved`, `failed` (no valid scenario), `remembered` (not searched: the same search failed in the last
cycle and nothing has changed since), `not_attempted` (left when the action's scenario budget,
`maxActionScenarios`, ran out; the action stops there, as KAI's action search budget stops it).

`kai_podgroups_pending`'s reason is the one the group's condition gives: `kai explain`'s dominant
reason (`QueueLabelMissing`, `GangDoesNotFit`, ...), for every waiting group
(`kai.cluster.explaining.pending_reasons`).

Probes: `/healthz` answers 200 while the process works; `/readyz` 200 once every cache has synced
(`/readyz?verbose` lists the checks, including whether this replica leads or waits for the lease).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from kai.api.queue import QUEUE_RESOURCE_KEYS
from kai.core.model import TaskStatus
from kai.core.resources import MB
from kai.kubernetes.informer import RestartReason
from kai.kubernetes.resources import ApiResource
from kai.kubernetes.runner import CycleReport, Scheduler
from kai.kubernetes.writer import Outcome

log = logging.getLogger(__name__)

RESOURCES = QUEUE_RESOURCE_KEYS  # gpu, cpu, memory


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.fair_share = Gauge("kai_queue_fair_share", "Fair share of the queue", ["queue", "resource"], registry=r)
        self.allocated = Gauge(
            "kai_queue_allocated", "Resources allocated to the queue", ["queue", "resource"], registry=r
        )
        self.requested = Gauge(
            "kai_queue_requested", "Resources requested in the queue", ["queue", "resource"], registry=r
        )
        self.quota = Gauge("kai_queue_quota", "Quota of the queue (-1: unlimited)", ["queue", "resource"], registry=r)
        self.limit = Gauge("kai_queue_limit", "Limit of the queue (-1: none)", ["queue", "resource"], registry=r)
        self.cycle = Histogram(
            "kai_cycle_duration_seconds",
            "Duration of one scheduling cycle",
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.action = Histogram(
            "kai_action_duration_seconds",
            "Duration of one action in a cycle",
            ["action"],
            registry=r,
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.skipped = Counter(
            "kai_cycles_skipped", "Cycles skipped: nothing changed since a settled cycle", registry=r
        )
        self.bound = Counter("kai_pods_bound", "Pods bound", registry=r)
        self.evicted = Counter("kai_pods_evicted", "Pods evicted", ["action"], registry=r)
        self.search_jobs = Counter(
            "kai_scenario_search_jobs",
            "Job attempts by how their victim search ended",
            ["action", "result"],
            registry=r,
        )
        self.search_scenarios = Counter(
            "kai_scenario_search_scenarios", "Scenarios simulated by victim searches", ["action"], registry=r
        )
        self.search_exhausted = Counter(
            "kai_scenario_search_budget_exhausted",
            "Cycles in which an action's scenario budget ran out",
            ["action"],
            registry=r,
        )
        self.pending = Gauge("kai_pods_pending", "Pods of this scheduler waiting for a node", registry=r)
        self.pending_groups = Gauge(
            "kai_podgroups_pending", "PodGroups waiting, by queue and reason", ["queue", "reason"], registry=r
        )
        self.bind_failures = Counter("kai_bind_failures", "Bindings that failed for good", registry=r)
        self.watch_restarts = Counter("kai_watch_restarts", "Watches restarted", ["resource", "reason"], registry=r)
        self.writes = Histogram("kai_write_duration_seconds", "API writes, retries included", ["operation"], registry=r)
        self.leader = Gauge("kai_is_leader", "1 while this replica holds the leader Lease", registry=r)
        self._queues: set[str] = set()
        self._pending_labels: set[tuple[str, str]] = set()

    # ----------------------------------------------------------------- hooks
    def watch_restarted(self, resource: ApiResource, reason: RestartReason) -> None:
        self.watch_restarts.labels(resource=resource.label, reason=str(reason)).inc()

    def write_done(self, operation: str, outcome: Outcome, seconds: float) -> None:
        self.writes.labels(operation=operation.split(" ", 1)[0]).observe(seconds)
        if operation == "bind":
            if outcome.ok:
                self.bound.inc()
            else:
                self.bind_failures.inc()

    def cycle_done(self, scheduler: Scheduler, report: CycleReport) -> None:
        self.cycle.observe(report.duration)
        if report.skipped:
            self.skipped.inc()
            return  # the settled cycle's figures stand
        for action, seconds in report.action_seconds.items():
            self.action.labels(action=action).observe(seconds)
        for eviction in report.result.evictions:
            self.evicted.labels(action=eviction.action).inc()
        for search in report.result.searches:
            for result, count in (
                ("solved", search.solved),
                ("failed", search.failed - search.remembered),
                ("remembered", search.remembered),
                ("not_attempted", search.not_attempted),
            ):
                if count:
                    self.search_jobs.labels(action=search.action, result=result).inc(count)
            if search.scenarios:
                self.search_scenarios.labels(action=search.action).inc(search.scenarios)
            if search.budget_exhausted:
                self.search_exhausted.labels(action=search.action).inc()
        ours, _ = scheduler.cache.pod_states()
        self.pending.set(sum(1 for s in ours if s.status == TaskStatus.PENDING))
        self._pending_groups(report.pending.values())
        seen: set[str] = set()
        for name, figures in report.result.queues.items():
            seen.add(name)
            for i, resource in enumerate(RESOURCES):
                scale = 1.0 / MB if resource == "memory" else 1.0
                for gauge, value in (
                    (self.fair_share, figures.fair_share[i]),
                    (self.allocated, figures.allocated[i]),
                    (self.requested, figures.requested[i]),
                    (self.quota, figures.quota[i]),
                    (self.limit, figures.limit[i]),
                ):
                    gauge.labels(queue=name, resource=resource).set(value * scale if value != -1 else -1.0)
        for gone in self._queues - seen:
            for resource in RESOURCES:
                for gauge in (self.fair_share, self.allocated, self.requested, self.quota, self.limit):
                    with contextlib.suppress(KeyError):
                        gauge.remove(gone, resource)
        self._queues = seen

    def _pending_groups(self, pending: Iterable[tuple[str, str]]) -> None:
        counts: dict[tuple[str, str], int] = {}
        for queue_reason in pending:
            counts[queue_reason] = counts.get(queue_reason, 0) + 1
        for (queue, reason), count in counts.items():
            self.pending_groups.labels(queue=queue, reason=reason).set(count)
        for queue, reason in self._pending_labels - counts.keys():
            with contextlib.suppress(KeyError):
                self.pending_groups.remove(queue, reason)
        self._pending_labels = set(counts)

    def render(self) -> bytes:
        return generate_latest(self.registry)


@dataclass
class HealthServer:
    """`/healthz`, `/readyz` and `/metrics` (the metrics on their own address, as the contract has it)."""

    metrics: Metrics
    health_address: str
    metrics_address: str
    synced: Callable[[], bool]
    leading: Callable[[], bool]
    leader_elect: bool
    _runners: list[web.AppRunner] = field(default_factory=list)

    async def start(self) -> None:
        probes = web.Application()
        probes.router.add_get("/healthz", self._healthz)
        probes.router.add_get("/readyz", self._readyz)
        scrape = web.Application()
        scrape.router.add_get("/metrics", self._metrics)
        if self.health_address == self.metrics_address:
            probes.router.add_get("/metrics", self._metrics)
            apps = [(probes, self.health_address)]
        else:
            apps = [(probes, self.health_address), (scrape, self.metrics_address)]
        for app, address in apps:
            host, _, port = address.rpartition(":")
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, host or "0.0.0.0", int(port)).start()
            self._runners.append(runner)

    async def stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        synced = self.synced()
        lines = [f"[{'+' if synced else '-'}]caches {'synced' if synced else 'syncing'}"]
        if self.leader_elect:
            lines.append("[+]leader election: " + ("leading" if self.leading() else "waiting for the lease"))
        status = 200 if synced else 503
        if "verbose" in request.query:
            text = "\n".join(lines) + f"\nreadyz check {'passed' if synced else 'failed'}\n"
        else:
            text = "ok\n" if synced else "caches are syncing\n"
        return web.Response(text=text, status=status)

    async def _metrics(self, request: web.Request) -> web.Response:
        self.metrics.leader.set(1.0 if self.leading() else 0.0)
        return web.Response(body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})
