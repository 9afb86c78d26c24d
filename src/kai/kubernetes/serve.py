"""`kai run` as a process: connect, check the CRDs, sync the caches, elect a leader, schedule, serve
health and metrics, and stop cleanly on SIGTERM.

Only the replica holding the Lease writes anything; the others keep their caches warm and are
ready (their `/readyz?verbose` says they wait for the lease), so a takeover starts scheduling at
once. On SIGTERM the current cycle finishes or is abandoned, queued writes get a short grace to
drain, the Lease is released and the process exits 0 within 10 s.

The start is arranged for the time to the first binding: the informers' first lists are requested
as soon as the client exists, and the scheduling core, the metrics server (and the webhooks, when
enabled) are imported in a thread while the replies arrive (importing them takes longer than the
lists on a busy machine); what the lists deliver meanwhile is held (`HeldEvents`) and handed to
the cache once the scheduler is made. `kai run` reads its flags with only `kai.kubernetes.options`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import signal
import ssl
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kai.deploy.crds import INSTALL_HINT, REQUIRED_CRDS
from kai.kubernetes import client as kc
from kai.kubernetes import collector, leader
from kai.kubernetes.informer import RestartReason, held_informers
from kai.kubernetes.options import RunOptions
from kai.kubernetes.resources import OWNER_RESOURCES, REQUIRED_RESOURCES, ApiResource
from kai.kubernetes.writer import Writer

if TYPE_CHECKING:
    from kai.kubernetes.observability import Metrics
    from kai.kubernetes.webhook import WebhookServer

log = logging.getLogger(__name__)

SHUTDOWN_GRACE = 8.0  # seconds for queued writes after SIGTERM (the contract allows 10 in all)


# imported off the event loop while the first lists arrive (see the module's docstring)
CORE_MODULES = ("kai.kubernetes.runner", "kai.kubernetes.observability")
WEBHOOK_MODULES = ("kai.kubernetes.webhook",)


def _import(modules: Sequence[str]) -> None:
    for module in modules:
        importlib.import_module(module)


class StartupError(Exception):
    """The cluster cannot be scheduled as configured (exit 2), e.g. the KAI CRDs are missing."""


async def missing_crds(client: kc.KubeClient) -> list[str]:
    """The required CRDs the API server does not serve (read from API discovery)."""
    missing: list[str] = []
    for crd in REQUIRED_CRDS:
        try:
            found = await client.request("GET", f"/apis/{crd.group}/{crd.version}")
        except kc.ApiError as err:
            if err.code != 404:
                raise
            found = {}
        if not any(r.get("name") == crd.plural for r in found.get("resources") or ()):
            missing.append(crd.name)
    return missing


async def serve(options: RunOptions, *, stop: asyncio.Event | None = None) -> int:
    """Run until SIGTERM/SIGINT (or `stop`); returns the exit status."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    collector.starting()  # the first list fills the caches: see kai.kubernetes.collector
    client = kc.connect(
        kubeconfig_path=options.kubeconfig,
        context=options.context,
        options=kc.ClientOptions(qps=options.qps, burst=options.burst),
    )
    async with client:
        modules = (*CORE_MODULES, *(WEBHOOK_MODULES if options.webhook is not None else ()))
        importing = asyncio.ensure_future(asyncio.to_thread(_import, modules))
        metrics: Metrics | None = None
        early_restarts: list[tuple[ApiResource, RestartReason]] = []

        def on_restart(resource: ApiResource, reason: RestartReason) -> None:
            if metrics is None:
                early_restarts.append((resource, reason))
            else:
                metrics.watch_restarted(resource, reason)

        informers = held_informers(client, REQUIRED_RESOURCES, OWNER_RESOURCES, on_restart=on_restart)
        tasks: list[asyncio.Task[None]] = [
            asyncio.create_task(i.run(), name=f"informer {i.resource.label}") for i in informers
        ]
        try:
            missing = await missing_crds(client)
            if missing:
                raise StartupError(
                    f"the cluster at {client.server} lacks the CRDs kai needs: {', '.join(missing)}; {INSTALL_HINT}"
                )
            await importing

        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        from kai.core.session import SchedulerConfig
        from kai.kubernetes import observability
        from kai.kubernetes.runner import Scheduler

        identity = leader.default_identity()
        metrics = observability.Metrics()
        for resource, reason in early_restarts:
            metrics.watch_restarted(resource, reason)
        writer = Writer(client, observe=metrics.write_done)
        scheduler = Scheduler(
            client=client,
            writer=writer,
            config=options.config or SchedulerConfig(),
            scheduler_name=options.scheduler_name,
            identity=identity,
            reservation_settings=options.reservations,
        )
        scheduler.on_cycle.append(lambda report: metrics.cycle_done(scheduler, report))
        scheduler.on_synced.append(collector.synced)
        scheduler.attach_informers(informers)
        elector = (
            leader.LeaderElector(
                client,
                leader.LeaseConfig(
                    namespace=options.leader_election_namespace,
                    name=options.leader_election_id,
                    identity=identity,
                    lease_duration=options.lease_duration,
                    renew_deadline=options.renew_deadline,
                    retry_period=options.retry_period,
                ),
            )
            if options.leader_elect
            else None
        )

        def is_leader() -> bool:
            return elector.is_leader if elector is not None else True

        health = observability.HealthServer(
            metrics=metrics,
            health_address=options.health_address,
            metrics_address=options.metrics_address,
            synced=lambda: scheduler.synced,
            leading=is_leader,
            leader_elect=elector is not None,
        )
        await health.start()
        webhooks: WebhookServer | None = None
        if options.webhook is not None:
            from kai.kubernetes.webhook import start_webhooks

            try:
                webhooks, webhook_tasks = await start_webhooks(
                    options.webhook, client=client, queues=lambda: scheduler.cache.queues, stop=stop
                )
            except (kc.ApiError, kc.ApiUnreachable, OSError, ssl.SSLError) as err:
                await health.stop()
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise StartupError(f"cannot serve the admission webhooks: {err}") from None
            tasks += webhook_tasks
        if elector is not None:
            tasks.append(asyncio.create_task(elector.run(), name="leader election"))
        loop_task = asyncio.create_task(scheduler.run(is_leader=is_leader, stop=stop), name="scheduling loop")
        try:
            await stop.wait()
        finally:
            loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(loop_task, timeout=2.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(scheduler.applier.drain(), timeout=SHUTDOWN_GRACE - 4.0)
            if elector is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(elector.release(), timeout=2.0)  # the other replica takes over at once
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if webhooks is not None:
                await webhooks.stop()
            await health.stop()
    return 0
