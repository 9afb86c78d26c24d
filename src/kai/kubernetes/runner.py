"""`kai run`'s scheduling loop: caches from watches, one cycle every `schedulePeriod`, writes out.

Each cycle, while this replica leads and every cache has synced:
1. the pod grouper gives every new pod of ours its PodGroup (`kai.kubernetes.grouper`);
2. a snapshot is taken from the cache (`kai.cluster.state.cycle_snapshot`), with the planner's
   view of the same moment;
3. the cycle runs, off the event loop so watches keep flowing (`kai.scheduler.cycle.run_cycle`);
   what its allocate action commits is bound while it runs (`kai.kubernetes.early_binds`);
4. the waiting jobs are explained (`kai.explain`, the engine `kai explain` and `kai sim` use), so
   their PodGroup conditions, pod messages and events say the same words;
5. the effects are planned (`kai.cluster.effects.plan`) and handed to the applier, which records
   them in the cache at once and sends them through the writer's workers;
6. the reservation pods of shared GPUs are brought in step with the devices in use
   (`kai.kubernetes.reservations`); a fractional pod's bind waits for its device's UUID
   (`kai.kubernetes.shared_binds`).
The decisions are the ones `kai sim` makes for the same objects: same snapshot builder, same
cycle, same planner.

Cycles follow the schedule period, and one more starts early when a pod of ours starts waiting
for a node while nothing else waits (the last cycle placed everything it saw): `PROMPT_WINDOW`
after the arrival, so that a burst shares the cycle, instead of at the next period, as
kube-scheduler schedules a new pod at once. An early cycle starts only while the cycles of the
last schedule period took at most half of it (`kai.kubernetes.pacing`: a lone arrival is scheduled
at once, a stream of arrivals keeps the loop at most half busy), and one cycle runs at a time.
While pods wait that could not be placed, arrivals wait for the period, as KAI's cycles do.

A cycle whose outcome cannot depend on the clock (`kai.scheduler.cycle.settled`: nothing waits for
a node, no gang is stale) is remembered with the cache's version; until the cache changes, the
next cycles would decide exactly what it decided (nothing), and are skipped. A steady cluster
costs a version comparison per period, not a snapshot of every pod.

The victim searches that failed in a cycle are kept with the cache's version too: while it is
unchanged, the next cycle replays this one and skips them (`kai.actions.common.searches`), so a
cluster where reclaim cannot help (every job waiting for a queue that deserves nothing more) does
not search again every period.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import msgspec

from kai.cluster import effects as fx
from kai.cluster import explaining, gpu_sharing
from kai.cluster.state import cycle_snapshot
from kai.core.decisions import CycleResult, HopelessSearches, Kind
from kai.core.model import Job, Snapshot
from kai.core.session import SchedulerConfig, Session
from kai.explain import engine, model
from kai.kubernetes.apply import EffectApplier
from kai.kubernetes.cache import ClusterCache
from kai.kubernetes.client import KubeClient
from kai.kubernetes.early_binds import EarlyBinds
from kai.kubernetes.grouper import PodGrouper
from kai.kubernetes.informer import HeldEvents, Informer, held_informers
from kai.kubernetes.options import ReservationSettings
from kai.kubernetes.pacing import BusyWindow
from kai.kubernetes.reservations import DeviceReservations
from kai.kubernetes.resources import OWNER_RESOURCES, REQUIRED_RESOURCES, ApiResource
from kai.kubernetes.shared_binds import SharedGpuBinds
from kai.kubernetes.writer import Writer
from kai.scheduler.cycle import close_session, run_actions, settled

log = logging.getLogger(__name__)

PROMPT_WINDOW = 0.02  # seconds an early cycle waits after an arrival for the rest of its burst
EARLY_BIND_POLL = 0.02  # seconds between two looks at what a running cycle's allocate has committed


class _CacheHandler:
    """Feeds one informer's events into the cache."""

    def __init__(self, cache: ClusterCache, resource: ApiResource, on_change: Callable[[], None]) -> None:
        self.cache = cache
        self.resource = resource
        self.on_change = on_change

    def on_add(self, obj: dict[str, object]) -> None:
        self.cache.apply(obj)
        self.on_change()

    def on_update(self, old: dict[str, object], new: dict[str, object]) -> None:
        self.cache.apply(new)
        self.on_change()

    def on_delete(self, obj: dict[str, object]) -> None:
        self.cache.remove(obj)
        self.on_change()


class CycleReport(msgspec.Struct):
    """What one cycle did (for logs, metrics and tests)."""

    started: float
    duration: float
    action_seconds: dict[str, float]
    result: CycleResult
    effects: tuple[fx.Effect, ...]
    skipped: bool = False  # nothing changed since a settled cycle: its result stands
    # every PodGroup waiting after the cycle: (queue, the reason its condition gives), by namespace/name
    pending: Mapping[str, tuple[str, str]] = msgspec.field(default_factory=dict)


@dataclass
class Scheduler:
    client: KubeClient
    writer: Writer
    config: SchedulerConfig
    scheduler_name: str = "kai-scheduler"
    identity: str = "kai-scheduler"
    clock: Callable[[], float] = time.time
    reservation_settings: ReservationSettings = field(default_factory=ReservationSettings)
    cache: ClusterCache = field(init=False)
    applier: EffectApplier = field(init=False)
    grouper: PodGrouper = field(init=False)
    reservations: DeviceReservations = field(init=False)
    informers: list[Informer] = field(default_factory=list, init=False)
    cycles: int = field(default=0, init=False)
    last_report: CycleReport | None = field(default=None, init=False)
    on_cycle: list[Callable[[CycleReport], None]] = field(default_factory=list, init=False)
    on_synced: list[Callable[[], None]] = field(default_factory=list, init=False)  # once, before the first cycle
    _arrived: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _arrivals_seen: int = field(default=0, init=False)  # the cache's arrivals the last cycle saw
    _idle: bool = field(default=False, init=False)  # the last cycle left nothing waiting
    _pacing: BusyWindow = field(init=False)  # the recent cycles: when an early one may start
    # a settled cycle: the cache version it saw, its result, the shared devices in use then
    _settled: tuple[int, CycleResult, gpu_sharing.DeviceUse] | None = field(default=None, init=False)
    # what the last cycles said of the waiting jobs, and the fixes found on the cache's version
    explainer: explaining.CycleExplainer = field(default_factory=explaining.CycleExplainer, init=False)
    # the cache version the last cycle saw and its failed victim searches (skipped while nothing changed)
    _hopeless: tuple[int, HopelessSearches] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._pacing = BusyWindow(window=self.config.schedule_period)
        self.cache = ClusterCache(scheduler_name=self.scheduler_name)
        self.applier = EffectApplier(
            cache=self.cache, writer=self.writer, identity=self.identity, eviction_mode=self.config.eviction_mode
        )
        self.grouper = PodGrouper(
            cache=self.cache, writer=self.writer, applier=self.applier, queue_label_key=self.config.queue_label_key
        )
        # GPU sharing: a reservation pod per shared device, awaited before a fractional pod's bind
        self.reservations = DeviceReservations(
            writer=self.writer, settings=self.reservation_settings, clock=self.clock, spawn=self.applier._spawn
        )
        self.cache.listeners.append(self.reservations.on_object)
        self.applier.prebind = SharedGpuBinds(
            cache=self.cache,
            writer=self.writer,
            reservations=self.reservations,
            record=lambda events: self.applier.apply(events, now=self.clock()),
        ).prepare

    # ----------------------------------------------------------------- caches
    def make_informers(self, on_restart: Callable[..., None] | None = None) -> list[Informer]:
        return self.attach_informers(
            held_informers(self.client, REQUIRED_RESOURCES, OWNER_RESOURCES, on_restart=on_restart)
        )

    def attach_informers(self, informers: list[Informer]) -> list[Informer]:
        """Feed the cache from `informers` (made by `held_informers`, maybe already listing): what
        they delivered so far is applied now, in order, and every later event as it comes."""
        for informer in informers:
            assert isinstance(informer.handler, HeldEvents)
            informer.handler.attach(_CacheHandler(self.cache, informer.resource, self._on_change))
        self.informers = informers
        return informers

    def _on_change(self) -> None:
        if self.cache.arrivals != self._arrivals_seen:
            self._arrived.set()

    @property
    def synced(self) -> bool:
        return bool(self.informers) and all(i.synced.is_set() for i in self.informers)

    async def wait_synced(self) -> None:
        await asyncio.gather(*(i.wait_synced() for i in self.informers))

    # ----------------------------------------------------------------- the loop
    async def run(self, *, is_leader: Callable[[], bool], stop: asyncio.Event) -> None:
        """Cycle every schedule period while leading (and early for an arrival while nothing waits),
        until `stop` is set."""
        await self.wait_synced()
        for callback in self.on_synced:
            callback()

        period = self.config.schedule_period
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            started = loop.time()
            if is_leader():
                await self.cycle_once()
            else:
                self._settled = None  # a new leader starts from a full cycle
                self._idle = False
            await self._until_next_cycle(stop, due=started + period)

    async def _until_next_cycle(self, stop: asyncio.Event, *, due: float) -> None:
        """Wait for `due` (the event loop's time), for `stop`, or for an arrival that may start the
        next cycle early."""
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            remaining = due - loop.time()
            if remaining <= 0:
                return
            if self._idle and self.cache.arrivals != self._arrivals_seen:
                now = loop.time()
                delay = self._pacing.earliest(now + PROMPT_WINDOW) - now
                await _wait(stop, min(delay, remaining))
                return
            self._arrived.clear()
            await _wait(stop, remaining, also=self._arrived)

    async def cycle_once(self) -> CycleReport:
        """One scheduling cycle on a consistent snapshot; its writes are queued, not awaited."""
        now = self.clock()
        t0 = time.perf_counter()
        self._arrivals_seen = self.cache.arrivals
        self.grouper.run(now=now)
        if self._settled is not None and self._settled[0] == self.cache.version:
            # reservation pods are kept whether or not a cycle runs (their writes may have failed);
            # the devices in use are the settled cycle's, since no pod or node changed
            self.reservations.reconcile_use(self._settled[2])
            self.cycles += 1
            report = CycleReport(
                started=now,
                duration=time.perf_counter() - t0,
                action_seconds={},
                result=self._settled[1],
                effects=(),
                skipped=True,
            )
            return self._finish(report, idle=True)
        version = self.cache.version  # events that arrive while the cycle runs are for the next one
        built = cycle_snapshot(self.cache, now=now, config=self.config)
        ours, _ = self.cache.pod_states()
        view = self.cache.plan_snapshot(ours)
        for problem in built.queue_problems:
            log.warning("queue %s left out: %s", problem.queue, problem.message)
        action_seconds: dict[str, float] = {}

        def timed(name: str, run: Callable[[], None]) -> None:
            began = time.perf_counter()
            run()
            action_seconds[name] = action_seconds.get(name, 0.0) + time.perf_counter() - began

        last = self._hopeless
        hopeless = last[1] if last is not None and last[0] == version else None
        early = EarlyBinds(built.snapshot)

        def decide() -> tuple[Session, CycleResult, bool, list[Job]]:
            session = run_actions(built.snapshot, self.config, run_action=timed, hopeless=hopeless, opened=early.opened)
            return session, close_session(session), settled(session), engine.waiting_jobs(session)

        deciding = asyncio.ensure_future(asyncio.to_thread(decide))
        try:
            while not deciding.done():  # allocate's bindings leave as they are committed
                await asyncio.wait((deciding,), timeout=EARLY_BIND_POLL)
                self.applier.bind_early(early.take(), now=now)
        except asyncio.CancelledError:
            deciding.cancel()
            raise
        session, result, is_settled, waiting = deciding.result()
        # it bound or evicted pods (a pipelined pod nominated again each cycle is not a change)
        busy = bool(result.evictions) or any(p.kind is Kind.BIND for p in result.placements)
        explanations = await self._explain(version, built.snapshot, session, waiting, busy=busy)
        planned = fx.plan(result, view, now=now, explanations=explanations)
        self.applier.apply(planned, now=now, bound_early=early.bound)
        binding = [(e.node, e.gpu_groups) for e in planned if isinstance(e, fx.Bind) and e.gpu_groups]
        use = gpu_sharing.device_use(ours, binding, nodes=self.cache.nodes)
        self.reservations.reconcile_use(use)
        self._settled = (version, result, use) if is_settled else None
        self._hopeless = (version, result.hopeless)
        self.cycles += 1
        report = CycleReport(
            started=now,
            duration=time.perf_counter() - t0,
            action_seconds=action_seconds,
            result=result,
            effects=planned,
            pending=explaining.pending_reasons(waiting, result, explanations),
        )
        return self._finish(report, idle=is_settled or not waiting)  # nothing left waiting: arrivals cycle early

    def _finish(self, report: CycleReport, *, idle: bool) -> CycleReport:
        self._idle = idle
        ended = asyncio.get_running_loop().time()
        self._pacing.record(ended - report.duration, ended)
        self.last_report = report
        for callback in self.on_cycle:
            callback(report)
        return report

    async def _explain(
        self, version: int, snapshot: Snapshot, session: Session, waiting: Sequence[Job], *, busy: bool
    ) -> dict[str, model.Explanation]:
        """The explanations the cycle's conditions, pod messages and events give (`kai.explain`): every
        waiting job's reasons, and the fixes cycles at rest find and remember while the cache's version
        stays (`kai.cluster.explaining.CycleExplainer`). The facts are read here on the event loop (the
        cache does not change under it), the engine runs off it."""
        standing, chosen = self.explainer.plan(version, waiting, busy=busy)
        if standing is not None:
            return standing
        dry_runs = self.explainer.dry_runs(snapshot, busy=busy)
        # the top owner of a pod a fix would delete (a job that frees room) is looked up when the fix
        # is made, off the loop: a lookup is one dict read of an object the cache replaces whole
        ctx = explaining.cycle_context(
            self.cache, self.config, snapshot, session, chosen, owners=dry_runs > 0, lazy_owners=True
        )
        found = await asyncio.to_thread(
            engine.explain_cycle, ctx, chosen, dry_runs=dry_runs, known=self.explainer.fixes.known()
        )
        return self.explainer.record(version, waiting, chosen, found)


async def _wait(stop: asyncio.Event, seconds: float, *, also: asyncio.Event | None = None) -> None:
    """Sleep `seconds`, or less if `stop` (or `also`) is set first."""
    events = [stop] if also is None else [stop, also]
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
