"""Leader election on a real Lease: one leader at a time, takeover when it stops renewing or dies,
and an immediate handover when it shuts down."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kai.kubernetes import client as kc
from kai.kubernetes import resources
from kai.kubernetes.leader import LeaderElector, LeaseConfig
from tests.kubernetes.faultproxy import FaultProxy
from tests.kubernetes.recorder import WAIT_SECONDS


class Timeline:
    """Who started and stopped leading, in the order it happened."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def elector(self, client: kc.KubeClient, config: LeaseConfig, name: str, **kwargs: Any) -> LeaderElector:
        return LeaderElector(
            client,
            config,
            on_started_leading=lambda: self.events.append((name, "started")),
            on_stopped_leading=lambda: self.events.append((name, "stopped")),
            **kwargs,
        )


def short_lease(namespace: str, identity: str, *, duration: float = 3.0) -> LeaseConfig:
    return LeaseConfig(
        namespace=namespace,
        name="kai-scheduler",
        identity=identity,
        lease_duration=duration,
        renew_deadline=min(2.0, duration - 1),
        retry_period=0.3,
    )


@contextlib.asynccontextmanager
async def campaigning(elector: LeaderElector) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(elector.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def until(condition: Callable[[], bool], what: str) -> None:
    try:
        async with asyncio.timeout(WAIT_SECONDS):
            while not condition():
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"never saw {what}") from None


async def lease_spec(kube: kc.KubeClient, namespace: str) -> dict[str, Any]:
    lease = await kube.request("GET", resources.LEASES.path(namespace=namespace, name="kai-scheduler"))
    return dict(lease["spec"])


def test_timing_must_leave_the_leader_time_to_step_down() -> None:
    with pytest.raises(ValueError, match="lease duration must be longer than the renew deadline"):
        LeaseConfig(lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError, match="renew deadline must be longer"):
        LeaseConfig(renew_deadline=2, retry_period=2)


async def test_racing_candidates_elect_one_and_a_dead_leader_is_replaced(kube: kc.KubeClient, namespace: str) -> None:
    timeline = Timeline()
    electors = {name: timeline.elector(kube, short_lease(namespace, name), name) for name in ("a", "b")}
    tasks = {name: asyncio.create_task(elector.run()) for name, elector in electors.items()}
    try:
        # both find no lease and create it; the API server lets one create win (the other gets 409)
        await until(
            lambda: bool(electors["a"].holder) and electors["a"].holder == electors["b"].holder,
            "both agreeing on a holder",
        )
        assert [elector.is_leader for elector in electors.values()].count(True) == 1
        leader = next(name for name, elector in electors.items() if elector.is_leader)
        follower = "b" if leader == "a" else "a"
        electors[leader].release_on_cancel = False  # it dies: no release, its lease has to expire
        tasks[leader].cancel()
        await until(lambda: electors[follower].is_leader, "the follower taking over")
        assert timeline.events == [(leader, "started"), (leader, "stopped"), (follower, "started")]
        assert (await lease_spec(kube, namespace))["holderIdentity"] == follower
    finally:
        for task in tasks.values():
            task.cancel()
        await asyncio.gather(*tasks.values(), return_exceptions=True)


async def test_a_leader_cut_off_from_the_api_steps_down_before_the_other_takes_over(
    kube: kc.KubeClient, namespace: str, fault_proxy: FaultProxy
) -> None:
    timeline = Timeline()
    async with kc.connect(kubeconfig_path=fault_proxy.kubeconfig) as behind_proxy:
        cut_off = timeline.elector(behind_proxy, short_lease(namespace, "cut-off"), "cut-off")
        other = timeline.elector(kube, short_lease(namespace, "other"), "other")
        async with campaigning(cut_off):
            await until(lambda: cut_off.is_leader, "the first replica leading")
            async with campaigning(other):
                await until(lambda: other.holder == "cut-off", "the second replica seeing the leader")
                assert not other.is_leader
                fault_proxy.freeze(60)  # the leader's renewals hang from now on
                await until(lambda: other.is_leader, "the second replica taking over")
                assert not cut_off.is_leader
                assert timeline.events == [("cut-off", "started"), ("cut-off", "stopped"), ("other", "started")]
                fault_proxy.thaw()


@pytest.mark.parametrize("how", ["cancel", "release"])
async def test_shutdown_releases_the_lease_so_the_other_takes_over_at_once(
    kube: kc.KubeClient, namespace: str, how: str
) -> None:
    # a 60 s lease: without the release the follower could not lead before WAIT_SECONDS (30 s)
    timeline = Timeline()
    leaving = timeline.elector(kube, short_lease(namespace, "leaving", duration=60), "leaving")
    staying = timeline.elector(kube, short_lease(namespace, "staying", duration=60), "staying")
    async with campaigning(leaving) as leaving_task:
        await until(lambda: leaving.is_leader, "the first replica leading")
        async with campaigning(staying):
            await until(lambda: staying.holder == "leaving", "the second replica seeing the leader")
            if how == "cancel":  # run() cancelled: it releases on its way out
                leaving_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await leaving_task
            else:  # release() while run() goes on, as kai run's shutdown does: the campaign ends
                assert await leaving.release()
                async with asyncio.timeout(WAIT_SECONDS):
                    await leaving_task
            await until(lambda: staying.is_leader, "the second replica taking over")
            spec = await lease_spec(kube, namespace)
            assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("staying", 1)
            assert not leaving.is_leader
            assert timeline.events == [("leaving", "started"), ("leaving", "stopped"), ("staying", "started")]
