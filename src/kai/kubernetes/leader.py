"""Lease-based leader election (`coordination.k8s.io/v1`), with client-go's semantics, so that of two
`kai run` replicas exactly one writes.

The lease (default `kai-scheduler/kai-scheduler`) names its holder. A candidate:

* acquires it when it is absent (create; a 409 means another replica created it first), has no
  holder (released), or has not changed for `leaseDurationSeconds` of the candidate's own clock
  since it last saw it change (expired: the holder stopped renewing). Expiry is judged only from
  local observation, never by comparing another host's timestamps, as client-go does;
* writes with the resourceVersion it read, so of two candidates racing for an expired lease one
  gets 409 Conflict and stays a follower;
* tries every `retry_period` (jittered) until it leads.

The leader renews every `retry_period`. If no renewal succeeds for `renew_deadline` (each attempt
is cut off when the deadline passes, so a frozen API server cannot stall it), or a renewal finds
another holder, it stops leading at once (`on_stopped_leading`) and becomes a candidate again.
Because `renew_deadline` < `lease_duration`, it has stopped acting before any other replica can
consider the lease expired. On shutdown (`release()`, or cancelling `run()`) the leader clears
`holderIdentity`, so another replica takes over at its next try instead of waiting for expiry; a
released elector never campaigns again. Reads and writes of the lease are serialized, so a release
cannot race a renewal in flight.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgspec

from kai.kubernetes.client import ApiError, ApiUnreachable, KubeClient
from kai.kubernetes.resources import LEASES

log = logging.getLogger(__name__)

JITTER = 1.2  # client-go's JitterFactor for the acquire loop


def default_identity() -> str:
    """The host name plus a random suffix: unique per process even for two replicas on one host."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:12]}"


class LeaseConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Where the lease lives, who we are, and client-go's timing (seconds)."""

    namespace: str = "kai-scheduler"
    name: str = "kai-scheduler"
    identity: str = msgspec.field(default_factory=default_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline:
            raise ValueError("the lease duration must be longer than the renew deadline")
        if not self.renew_deadline > JITTER * self.retry_period:
            raise ValueError(f"the renew deadline must be longer than {JITTER} x the retry period")
        if not self.identity:
            raise ValueError("the identity must not be empty")


def _micro_time(at: datetime) -> str:
    """A metav1.MicroTime: RFC 3339 with microseconds, UTC."""
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Campaigns for the lease while `run()` runs; `is_leader` says whether this replica may write."""

    def __init__(
        self,
        client: KubeClient,
        config: LeaseConfig | None = None,
        *,
        on_started_leading: Callable[[], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        on_new_leader: Callable[[str], None] | None = None,
        release_on_cancel: bool = True,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        rng: random.Random | None = None,
    ) -> None:
        self.client = client
        self.config = config or LeaseConfig()
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self.release_on_cancel = release_on_cancel
        self._clock = clock
        self._wall_clock = wall_clock
        self._rng = rng or random.Random()
        self.leading = asyncio.Event()
        self.holder: str | None = None  # the holder last seen on the lease ("" when released)
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._lease: dict[str, Any] | None = None  # the lease as last read or written
        self._io = asyncio.Lock()  # one lease round trip at a time (a release waits for a renewal)
        self._released = False
        self._path = LEASES.path(namespace=self.config.namespace, name=self.config.name)

    @property
    def identity(self) -> str:
        return self.config.identity

    @property
    def is_leader(self) -> bool:
        return self.leading.is_set()

    async def wait_leading(self) -> None:
        await self.leading.wait()

    async def run(self) -> None:
        """Acquire, lead until renewal fails, and campaign again; until cancelled.

        On cancellation a leader releases the lease first (unless `release_on_cancel` is False,
        which tests use to play a replica that dies).
        """
        try:
            while not self._released:
                if not await self._acquire():
                    return
                await self._renew_until_lost()
        except asyncio.CancelledError:
            if self.release_on_cancel:
                await self.release()
            elif self.is_leader:
                self._stop_leading()
            raise

    async def release(self) -> bool:
        """End the campaign and give the lease up if this replica holds it (clears holderIdentity);
        True if a held lease was released.

        Stops leading first (`on_stopped_leading` runs before the write), waits for a renewal in
        flight, and makes `run()` return instead of campaigning again. Cancelling `run()` calls it.
        """
        self._released = True
        if not self.is_leader:
            return False
        self._stop_leading()
        async with self._io:
            if self._lease is None or (self._lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return False
            spec = dict(self._lease.get("spec") or {})
            now = _micro_time(self._wall_clock())
            spec.pop("holderIdentity", None)
            spec.update(leaseDurationSeconds=1, acquireTime=now, renewTime=now)
            try:
                await self._put(spec, timeout=self.config.renew_deadline)
            except (ApiError, ApiUnreachable) as err:
                log.warning("could not release lease %s: %s", self._path, err)
                return False
        return True

    # -- the two loops ----------------------------------------------------------------------

    async def _acquire(self) -> bool:
        """Campaign until this replica leads (True) or the elector is released (False)."""
        while not self._released:
            if await self._try(timeout=self.config.renew_deadline):
                self._start_leading()
                return True
            await asyncio.sleep(self.config.retry_period * (1.0 + JITTER * self._rng.random()))
        return False

    async def _renew_until_lost(self) -> None:
        last_renewal = self._clock()
        while True:
            await asyncio.sleep(self.config.retry_period)
            while True:
                if self._released:
                    return
                remaining = last_renewal + self.config.renew_deadline - self._clock()
                if remaining <= 0:
                    log.warning(
                        "lease %s not renewed within %.1fs: stepping down", self._path, self.config.renew_deadline
                    )
                    self._stop_leading()
                    return
                try:
                    async with asyncio.timeout(remaining):
                        renewed = await self._try(timeout=remaining)
                except TimeoutError:
                    continue
                if renewed:
                    last_renewal = self._clock()
                    break
                if self.holder != self.identity:
                    log.warning("lease %s is held by %s now: stepping down", self._path, self.holder)
                    self._stop_leading()
                    return
                await asyncio.sleep(min(self.config.retry_period, max(0.0, remaining)) / 2)

    # -- one attempt ------------------------------------------------------------------------

    async def _try(self, *, timeout: float) -> bool:
        """One acquire-or-renew round trip; False when the lease is someone else's or a write lost."""
        async with self._io:
            if self._released:
                return False
            return await self._try_locked(timeout=timeout)

    async def _try_locked(self, *, timeout: float) -> bool:
        now = self._clock()
        try:
            lease = await self.client.request("GET", self._path, timeout=timeout)
        except ApiError as err:
            if err.code == 404:
                return await self._create(timeout=timeout)
            log.warning("reading lease %s failed: %s", self._path, err)
            return False
        except ApiUnreachable as err:
            log.warning("reading lease %s failed: %s", self._path, err)
            return False
        self._lease = lease
        spec = lease.get("spec") or {}
        if spec != self._observed_spec:
            self._observed_spec = spec
            self._observed_at = now
        self._see_holder(str(spec.get("holderIdentity") or ""))
        duration = float(spec.get("leaseDurationSeconds") or self.config.lease_duration)
        held_by_other = bool(self.holder) and self.holder != self.identity
        if held_by_other and self._observed_at + duration > now:
            return False  # a live lease of another replica
        wall = _micro_time(self._wall_clock())
        transitions = int(spec.get("leaseTransitions") or 0)
        new_spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.config.lease_duration)),
            "renewTime": wall,
            "acquireTime": spec.get("acquireTime") if self.holder == self.identity else wall,
            "leaseTransitions": transitions if self.holder == self.identity else transitions + 1,
        }
        try:
            await self._put(new_spec, timeout=timeout)
        except ApiError as err:
            if err.code != 409:
                log.warning("writing lease %s failed: %s", self._path, err)
            return False  # 409: another replica wrote first
        except ApiUnreachable as err:
            log.warning("writing lease %s failed: %s", self._path, err)
            return False
        return True

    async def _create(self, *, timeout: float) -> bool:
        wall = _micro_time(self._wall_clock())
        body = {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": {"name": self.config.name, "namespace": self.config.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": max(1, round(self.config.lease_duration)),
                "acquireTime": wall,
                "renewTime": wall,
                "leaseTransitions": 0,
            },
        }
        try:
            created = await self.client.request(
                "POST", LEASES.path(namespace=self.config.namespace), body=body, timeout=timeout
            )
        except ApiError as err:
            if err.code != 409:  # 409: another replica created it first
                log.warning("creating lease %s failed: %s", self._path, err)
            return False
        except ApiUnreachable as err:
            log.warning("creating lease %s failed: %s", self._path, err)
            return False
        self._observe_written(created)
        return True

    async def _put(self, spec: dict[str, Any], *, timeout: float) -> None:
        assert self._lease is not None
        metadata = self._lease.get("metadata") or {}
        body = {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": {
                "name": self.config.name,
                "namespace": self.config.namespace,
                "resourceVersion": metadata.get("resourceVersion"),
            },
            "spec": {key: value for key, value in spec.items() if value is not None},
        }
        written = await self.client.request("PUT", self._path, body=body, timeout=timeout)
        self._observe_written(written)

    def _observe_written(self, lease: dict[str, Any]) -> None:
        self._lease = lease
        self._observed_spec = lease.get("spec") or {}
        self._observed_at = self._clock()
        self._see_holder(str(self._observed_spec.get("holderIdentity") or ""))

    def _see_holder(self, holder: str) -> None:
        if holder != self.holder:
            self.holder = holder
            if holder and self.on_new_leader is not None:
                self.on_new_leader(holder)

    def _start_leading(self) -> None:
        log.info("%s leads (lease %s)", self.identity, self._path)
        self.leading.set()
        if self.on_started_leading is not None:
            self.on_started_leading()

    def _stop_leading(self) -> None:
        if not self.is_leader:
            return
        log.info("%s stopped leading (lease %s)", self.identity, self._path)
        self.leading.clear()
        if self.on_stopped_leading is not None:
            self.on_stopped_leading()
