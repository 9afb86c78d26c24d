"""What the `kai run` end-to-end tests share: applying manifests as kubectl would, running `kai run`
as a user runs it (a separate process), and waiting for the cluster to show an outcome.

Every test creates its own Nodes (unique names, deleted afterwards) and queues, in its own
namespace, so tests sharing one API server never see each other's capacity.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any, TypeVar

import httpx2 as httpx
import yaml

from kai.kubernetes import client as kc
from kai.kubernetes import resources
from kai.kubernetes.resources import ApiResource

T = TypeVar("T")

# Queues as the seeds write them: a department (no limits) and leaf queues with a GPU quota and limit.
QUEUE = Template("""
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: $name}
spec:
  parentQueue: $parent
  resources:
    gpu: {quota: $gpu_quota, limit: $gpu_limit, overQuotaWeight: 1}
    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    memory: {quota: -1, limit: -1, overQuotaWeight: 1}
""")

DEPARTMENT = Template("""
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: $name}
spec:
  resources:
    gpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    memory: {quota: -1, limit: -1, overQuotaWeight: 1}
""")

KINDS: dict[tuple[str, str], ApiResource] = {
    (r.api_version, r.kind): r
    for r in (
        resources.PODS,
        resources.NODES,
        resources.NAMESPACES,
        resources.PRIORITY_CLASSES,
        resources.QUEUES,
        resources.PODGROUPS,
        resources.DEPLOYMENTS,
        resources.REPLICA_SETS,
        resources.STATEFUL_SETS,
        resources.JOBS,
        resources.CRON_JOBS,
        *resources.WORKLOAD_RESOURCES,
    )
}


def resource_for(obj: dict[str, Any]) -> ApiResource:
    key = (str(obj.get("apiVersion")), str(obj.get("kind")))
    if key not in KINDS:
        raise KeyError(f"no REST path known for {key}")
    return KINDS[key]


async def apply(kube: kc.KubeClient, text: str, *, namespace: str) -> list[dict[str, Any]]:
    """Create every object of a multi-document YAML text, as `kubectl create -f` would."""
    created = []
    for obj in yaml.safe_load_all(text):
        if not obj:
            continue
        res = resource_for(obj)
        ns = (obj.get("metadata") or {}).get("namespace") or namespace if res.namespaced else None
        if res.namespaced:
            obj.setdefault("metadata", {})["namespace"] = ns
        created.append(await kube.request("POST", res.path(namespace=ns), body=obj))
    return created


async def get(kube: kc.KubeClient, res: ApiResource, name: str, namespace: str | None = None) -> dict[str, Any]:
    return await kube.request("GET", res.path(namespace=namespace, name=name))


async def items(kube: kc.KubeClient, res: ApiResource, namespace: str | None = None) -> list[dict[str, Any]]:
    listed = await kube.request("GET", res.path(namespace=namespace))
    return list(listed.get("items") or [])


async def events_matching(
    kube: kc.KubeClient,
    namespace: str,
    match: Callable[[dict[str, Any]], bool],
    *,
    at_least: int = 1,
    timeout: float = 30.0,
) -> list[dict[str, Any]]:
    """The namespace's Events that `match`, once there are `at_least` of them.

    kai run writes Events as reports, after the decisions they describe (bindings and evictions go
    first), so a test waits for them as it waits for any other effect.
    """

    async def found() -> list[dict[str, Any]] | None:
        matching = [e for e in await items(kube, resources.EVENTS, namespace) if match(e)]
        return matching if len(matching) >= at_least else None

    return await eventually(found, timeout=timeout)


async def eventually(check: Callable[[], Awaitable[T | None]], *, timeout: float = 30.0, every: float = 0.25) -> T:
    """Poll `check` until it returns something truthy; fail with its last answer after `timeout`."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = await check()
        except AssertionError as err:
            last = err
        else:
            if last:
                found: T = last
                return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout}s; last seen: {last!r}")
        await asyncio.sleep(every)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class KaiRun:
    """One `kai run` process, started the way a user starts it."""

    kubeconfig: Path
    log: Path
    extra: tuple[str, ...] = ()
    leader_elect: bool = False
    metrics_port: int = field(default_factory=free_port)
    health_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def args(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "kai.cli.main",
            "run",
            "--kubeconfig",
            str(self.kubeconfig),
            "--leader-elect" if self.leader_elect else "--no-leader-elect",
            "--metrics-bind-address",
            f"127.0.0.1:{self.metrics_port}",
            "--health-probe-bind-address",
            f"127.0.0.1:{self.health_port}",
            "-v",
            "2",
            *self.extra,
        ]

    async def start(self, *, wait_ready: bool = True) -> None:
        out = self.log.open("ab")
        self.process = subprocess.Popen(self.args, stdout=out, stderr=out, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        if wait_ready:
            await eventually(self.ready, timeout=30)

    async def ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"kai run exited with {self.process.returncode}:\n{self.log.read_text()[-3000:]}")
        try:
            async with httpx.AsyncClient() as http:
                reply = await http.get(f"http://127.0.0.1:{self.health_port}/readyz", timeout=1.0)
        except httpx.HTTPError:
            return False
        return reply.status_code == 200

    async def metrics(self) -> str:
        async with httpx.AsyncClient() as http:
            reply = await http.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2.0)
        reply.raise_for_status()
        return reply.text

    def kill(self) -> None:
        """SIGKILL: the process dies mid-whatever (fault tests)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self, *, timeout: float = 10.0) -> int:
        """SIGTERM, as Kubernetes stops a pod; returns the exit status."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise AssertionError(f"kai run did not stop within {timeout}s of SIGTERM") from None
        return int(self.process.returncode)


@contextlib.asynccontextmanager
async def kai_run(kubeconfig: Path, log_dir: Path, *extra: str, leader_elect: bool = False) -> AsyncIterator[KaiRun]:
    run = KaiRun(
        kubeconfig=kubeconfig,
        log=log_dir / f"kai-run-{uuid.uuid4().hex[:6]}.log",
        extra=extra,
        leader_elect=leader_elect,
    )
    await run.start()
    try:
        yield run
    finally:
        if run.process is not None and run.process.poll() is None:
            status = run.stop()
            assert status == 0, f"kai run exited {status} after SIGTERM:\n{run.log.read_text()[-3000:]}"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def pods_by_name(found: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in found}
