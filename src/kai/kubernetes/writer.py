"""Writes to the API server that never block the scheduling loop: bounded concurrency, retries with
backoff, and one outcome per write that says what happened.

Writes travel in two lanes, each with its own worker slots: decisions (bindings, evictions,
deletions, and the labels a binding needs) and reports (status patches, annotations, Events). A
cycle that binds thousands of pods also plans thousands of status writes and Events; in their own
lane they never hold a binding back, and a report waits (up to `REPORT_YIELD` seconds) while
decisions are queued or in flight, so the API server serves the bindings first. A report costs the
API server about what a binding does (an Event is a new object in etcd; a PodGroup patch comes back
through `kai run`'s own watch): with reports let through every 5 s, a backlog of 5,000 pods on
1,000 nodes was bound at half the speed, and the API server spent twice the CPU per bound pod
before the last binding (docs/performance.md). During such a backlog the Events and statuses come
after the bindings, at most `REPORT_YIELD` seconds late; on a cluster that is not binding a backlog
the decisions' lane empties between bindings and reports go at once.

Every operation waits for a free worker slot in its lane (at most `workers` requests in flight
each), goes through the client (which applies the QPS/burst rate limit), and retries what a retry
may cure (no answer within `timeout`, 429, 5xx) with capped exponential backoff up to `attempts`
tries; a write waiting out its backoff holds no slot. The outcome is data: `ok`, the final HTTP
`code`, a `message`, and `already_done` when the server says the work was done before (a pod
already bound, a pod already gone).

Within a lane, writes to one object (resource, namespace, name; subresources included) are sent one
at a time in the order they were made, retries included: an older status patch that needs a retry
never lands after a newer one, and the labels a binding needs land before the binding.

The binding call treats the server's `Status` reply as success, and a 409 saying the pod is
already assigned as done, never retried. An eviction refused by a PodDisruptionBudget (429 from the
Eviction API with the `DisruptionBudget` cause) is reported as `refused`, not retried; any other
429 (the server's own throttling) is retried like a 5xx.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import msgspec

from kai.kubernetes import client as kc
from kai.kubernetes import resources
from kai.kubernetes.backoff import Backoff
from kai.kubernetes.resources import ApiResource

STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
REPORT_YIELD = 30.0  # seconds a report waits at most for the decisions in flight to be sent


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    ok: bool
    code: int | None = None
    message: str = ""
    already_done: bool = False  # the server says it was done before (already bound, already gone)
    refused: bool = False  # an eviction a PodDisruptionBudget does not allow now


WriteObserver = Callable[[str, Outcome, float], None]  # (operation, outcome, seconds)
OrderKey = tuple[bool, str, str, str]  # (decision lane, resource label, namespace or "", name)


class Writer:
    """Sends writes with at most `workers` in flight, retrying transient failures."""

    def __init__(
        self,
        client: kc.KubeClient,
        *,
        workers: int = 32,
        attempts: int = 5,
        backoff: Backoff | None = None,
        timeout: float = 10.0,
        observe: WriteObserver | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.client = client
        self.attempts = attempts
        self.backoff = backoff or Backoff(initial=0.2, maximum=5.0)
        self.timeout = timeout
        self.observe = observe
        self._slots = asyncio.Semaphore(workers)  # decisions
        self._report_slots = asyncio.Semaphore(workers)  # status, annotations, events
        self._decisions = 0  # decisions queued or in flight
        self._no_decisions = asyncio.Event()
        self._no_decisions.set()
        self._rng = rng or random.Random()
        self._order: dict[OrderKey, asyncio.Lock] = {}
        self._queued: Counter[OrderKey] = Counter()

    @contextlib.asynccontextmanager
    async def _in_order(self, key: OrderKey | None) -> AsyncIterator[None]:
        """Hold the object's turn in its lane: one write at a time, first come first served."""
        if key is None:
            yield
            return
        lock = self._order.setdefault(key, asyncio.Lock())
        self._queued[key] += 1
        try:
            async with lock:
                yield
        finally:
            self._queued[key] -= 1
            if not self._queued[key]:
                del self._queued[key], self._order[key]

    def _request(
        self, method: str, path: str, body: Any, content_type: str = kc.JSON
    ) -> Callable[[], Awaitable[dict[str, Any]]]:
        return lambda: self.client.request(method, path, body=body, content_type=content_type, timeout=self.timeout)

    async def _send(
        self,
        operation: str,
        target: tuple[ApiResource, str | None, str | None],
        request: Callable[[], Awaitable[dict[str, Any]]],
        interpret: Callable[[kc.ApiError], Outcome | None] = lambda err: None,
        *,
        decision: bool = True,
    ) -> Outcome:
        """Run `request` with retries; `interpret` turns a final error into an outcome of its own.

        `target` is the (resource, namespace, name) written, for the order of writes to one object
        (an unnamed create is ordered with nothing)."""
        began = time.perf_counter()
        outcome: Outcome
        if decision:
            self._decisions += 1
            self._no_decisions.clear()
        elif not self._no_decisions.is_set():
            # reports yield to decisions in flight, for up to REPORT_YIELD seconds: the API server's
            # time goes to the bindings first
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._no_decisions.wait(), timeout=REPORT_YIELD)
        try:
            outcome = await self._attempt(target, request, interpret, decision=decision)
        finally:
            if decision:
                self._decisions -= 1
                if self._decisions == 0:
                    self._no_decisions.set()
        if self.observe is not None:
            self.observe(operation, outcome, time.perf_counter() - began)
        return outcome

    async def _attempt(
        self,
        target: tuple[ApiResource, str | None, str | None],
        request: Callable[[], Awaitable[dict[str, Any]]],
        interpret: Callable[[kc.ApiError], Outcome | None],
        *,
        decision: bool,
    ) -> Outcome:
        """Send in the object's turn, retrying what a retry may cure; a backoff holds no slot."""
        outcome: Outcome
        resource, namespace, name = target
        key = (decision, resource.label, namespace or "", name) if name else None
        async with self._in_order(key):
            attempt = 0
            while True:
                attempt += 1
                try:
                    async with self._slots if decision else self._report_slots:
                        await request()
                except (kc.ApiError, kc.ApiUnreachable) as err:
                    special = interpret(err) if isinstance(err, kc.ApiError) else None
                    if special is not None:
                        outcome = special
                        break
                    if kc.is_transient(err) and attempt < self.attempts:
                        await asyncio.sleep(self.backoff.delay(attempt, self._rng))
                        continue
                    code = err.code if isinstance(err, kc.ApiError) else None
                    outcome = Outcome(ok=False, code=code, message=str(err))
                    break
                else:
                    outcome = Outcome(ok=True, code=200)
                    break
        return outcome

    # ----------------------------------------------------------------- pods
    async def bind(
        self, namespace: str, name: str, *, uid: str | None, node: str, annotations: Mapping[str, str] | None = None
    ) -> Outcome:
        """POST pods/binding (v1 Binding); `annotations` land on the pod with the binding."""
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if uid:
            metadata["uid"] = uid
        if annotations:
            metadata["annotations"] = dict(annotations)
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": metadata, "target": {"kind": "Node", "name": node}}
        path = resources.PODS.path(namespace=namespace, name=name, subresource="binding")

        def interpret(err: kc.ApiError) -> Outcome | None:
            if err.code == 409 and "already assigned" in err.message:
                return Outcome(ok=True, code=409, message=err.message, already_done=True)
            return None

        return await self._send("bind", (resources.PODS, namespace, name), self._request("POST", path, body), interpret)

    async def delete_pod(
        self, namespace: str, name: str, *, uid: str | None = None, grace_seconds: float | None = None
    ) -> Outcome:
        """DELETE the pod (with its own grace period unless `grace_seconds` is given); gone is done."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if uid:
            body["preconditions"] = {"uid": uid}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = int(grace_seconds)
        path = resources.PODS.path(namespace=namespace, name=name)

        def interpret(err: kc.ApiError) -> Outcome | None:
            if err.code == 404:
                return Outcome(ok=True, code=404, message=err.message, already_done=True)
            return None

        target = (resources.PODS, namespace, name)
        return await self._send("delete", target, self._request("DELETE", path, body), interpret)

    async def evict(self, namespace: str, name: str, *, uid: str | None = None) -> Outcome:
        """POST pods/eviction (policy/v1 Eviction); a PodDisruptionBudget's refusal is `refused`."""
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": metadata}
        if uid:
            body["deleteOptions"] = {"preconditions": {"uid": uid}}
        path = resources.PODS.path(namespace=namespace, name=name, subresource="eviction")

        def interpret(err: kc.ApiError) -> Outcome | None:
            if err.code == 404:
                return Outcome(ok=True, code=404, message=err.message, already_done=True)
            if err.code == 429 and _disruption_budget(err):
                return Outcome(ok=False, code=429, message=err.message, refused=True)
            return None

        target = (resources.PODS, namespace, name)
        return await self._send("evict", target, self._request("POST", path, body), interpret)

    # ----------------------------------------------------------------- any object
    async def patch(
        self,
        resource: ApiResource,
        namespace: str | None,
        name: str,
        body: Mapping[str, Any],
        *,
        subresource: str | None = None,
        strategic: bool = False,
        decision: bool = False,
    ) -> Outcome:
        """A JSON merge patch (or a strategic merge patch, for built-in kinds) of an object or its
        subresource; in the decisions' lane when it is part of one (the labels of a binding)."""
        path = resource.path(namespace=namespace, name=name, subresource=subresource)
        content_type = STRATEGIC_MERGE_PATCH if strategic else kc.MERGE_PATCH
        return await self._send(
            f"patch {resource.label}{'/' + subresource if subresource else ''}",
            (resource, namespace, name),
            self._request("PATCH", path, dict(body), content_type),
            decision=decision,
        )

    async def create(self, resource: ApiResource, namespace: str | None, body: Mapping[str, Any]) -> Outcome:
        """POST a new object; an existing one (409) is reported as `already_done`."""
        path = resource.path(namespace=namespace)

        def interpret(err: kc.ApiError) -> Outcome | None:
            if err.code == 409:
                return Outcome(ok=True, code=409, message=err.message, already_done=True)
            return None

        return await self._send(
            f"create {resource.label}",
            (resource, namespace, (body.get("metadata") or {}).get("name")),
            self._request("POST", path, dict(body)),
            interpret,
            decision=False,
        )


def _disruption_budget(err: kc.ApiError) -> bool:
    """Whether a 429 from the Eviction API is a PodDisruptionBudget's refusal (not throttling)."""
    details = err.status.get("details")
    causes = details.get("causes") if isinstance(details, Mapping) else None
    return any(isinstance(c, Mapping) and c.get("reason") == "DisruptionBudget" for c in causes or ()) or (
        "disruption budget" in err.message
    )
