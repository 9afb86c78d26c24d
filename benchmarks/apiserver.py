"""A real API server for the `kai run` targets, and what the benchmarks do to it and read from it.

* `ControlPlane`: `../shared/k8s/cluster up DIR [--scheduler]` (etcd and kube-apiserver on loopback,
  optionally the stock kube-scheduler with client qps/burst 5000), torn down at the end.
* `create_all`: creates thousands of objects concurrently (an admin client without a rate limit), so
  that building a 5,000-node cluster takes seconds, not hours; only the scheduler is timed.
* `BindWatch`: watches the benchmark's pods and records when each one is first seen bound.
* `KaiProcess` / `Proc`: `kai run` started as a user starts it, and the CPU seconds and peak memory of
  any process read from `/proc` (the schedulers' own figures, not this process's).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any

from kai.deploy.crds import crd_manifests
from kai.kubernetes import client as kc
from kai.kubernetes import resources
from kai.kubernetes.resources import ApiResource

REPO = pathlib.Path(__file__).resolve().parent.parent
CLUSTER_SCRIPT = REPO.parent / "shared" / "k8s" / "cluster"
TICKS = os.sysconf("SC_CLK_TCK")
CYCLES = "kai_cycle_duration_seconds_count"  # kai run's metrics the benchmarks read
CYCLE_SECONDS = "kai_cycle_duration_seconds_sum"
SKIPPED = "kai_cycles_skipped_total"

_KINDS: dict[str, ApiResource] = {
    r.kind: r
    for r in (resources.NODES, resources.PODS, resources.PRIORITY_CLASSES, resources.QUEUES, resources.PODGROUPS)
}


def available() -> str | None:
    """Why no API server can be started here, or None if one can."""
    if not CLUSTER_SCRIPT.is_file():
        return f"no cluster script at {CLUSTER_SCRIPT}"
    if not any((CLUSTER_SCRIPT.parent / "bin").glob("kube-apiserver*")):
        return f"no Kubernetes binaries in {CLUSTER_SCRIPT.parent / 'bin'}"
    return None


@dataclass(frozen=True, slots=True)
class Proc:
    """CPU seconds and peak resident memory of a running process, read from /proc."""

    pid: int

    def cpu(self) -> float:
        fields = pathlib.Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime

    def peak_rss(self) -> int:
        """VmHWM: the most resident memory the process ever had, in bytes."""
        for line in pathlib.Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        return 0


@dataclass(slots=True)
class ControlPlane:
    dir: pathlib.Path
    kubeconfig: pathlib.Path = field(init=False)

    @classmethod
    def up(cls, dir: pathlib.Path, *, scheduler: bool = False) -> ControlPlane:
        args = [str(CLUSTER_SCRIPT), "up", str(dir), *(["--scheduler"] if scheduler else [])]
        done = subprocess.run(args, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"cluster up {dir} failed:\n{done.stdout}{done.stderr}")
        plane = cls(dir)
        plane.kubeconfig = dir / "kubeconfig"
        return plane

    def down(self) -> None:
        subprocess.run([str(CLUSTER_SCRIPT), "down", str(self.dir)], capture_output=True, timeout=120)

    def pid(self, component: str) -> int:
        return int((self.dir / f"{component}.pid").read_text())

    def stop_scheduler(self) -> None:
        """Stop the stock kube-scheduler the cluster script started (so a backlog can build up)."""
        pid = self.pid("kube-scheduler")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            if not pathlib.Path(f"/proc/{pid}").exists() or "(zombie)" in _state(pid):
                return
            time.sleep(0.1)

    def start_scheduler(self) -> Proc:
        """Start kube-scheduler again exactly as the cluster script runs it (same arguments, same config)."""
        args = (self.dir / "kube-scheduler.args").read_text().split("\n")
        log = (self.dir / "kube-scheduler.log").open("ab")
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        (self.dir / "kube-scheduler.pid").write_text(str(proc.pid))
        return Proc(proc.pid)


def _state(pid: int) -> str:
    try:
        return pathlib.Path(f"/proc/{pid}/status").read_text().split("\n", 2)[1]
    except OSError:
        return "(zombie)"


def admin_client(kubeconfig: pathlib.Path) -> kc.KubeClient:
    return kc.connect(kubeconfig_path=kubeconfig, options=kc.ClientOptions(qps=0, timeout=120.0))


async def install_kai_crds(client: kc.KubeClient) -> None:
    for crd in crd_manifests():
        with contextlib.suppress(kc.ApiError):
            await client.request("POST", resources.CUSTOM_RESOURCE_DEFINITIONS.path(), body=crd)
    for crd in crd_manifests():
        name = crd["metadata"]["name"]
        for _ in range(200):
            got = await client.request("GET", resources.CUSTOM_RESOURCE_DEFINITIONS.path(name=name))
            conditions = (got.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
                break
            await asyncio.sleep(0.1)


async def ensure_namespace(client: kc.KubeClient, name: str) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    try:
        await client.request("POST", resources.NAMESPACES.path(), body=body)
    except kc.ApiError as err:
        if err.code != 409:
            raise


async def create_all(client: kc.KubeClient, objects: Iterable[dict[str, Any]], *, concurrency: int = 48) -> int:
    """Create every object (namespaced ones in their own namespace), `concurrency` at a time; Nodes
    lose the `not-ready` taint the admission plugin adds. Returns how many were created."""
    slots = asyncio.Semaphore(concurrency)
    made = 0

    async def one(obj: dict[str, Any]) -> None:
        nonlocal made
        res = _KINDS[obj["kind"]]
        namespace = obj["metadata"].get("namespace") if res.namespaced else None
        async with slots:
            for attempt in range(5):
                try:
                    await client.request("POST", res.path(namespace=namespace), body=obj)
                    break
                except kc.ApiError as err:
                    if err.code == 409:
                        break
                    if not kc.is_transient(err) or attempt == 4:
                        raise
                except kc.ApiUnreachable:
                    if attempt == 4:
                        raise
                await asyncio.sleep(0.5 * (attempt + 1))
            if res is resources.NODES:
                await client.request(
                    "PATCH",
                    res.path(name=obj["metadata"]["name"]),
                    body={"spec": {"taints": None}},
                    content_type=kc.MERGE_PATCH,
                )
            made += 1

    await asyncio.gather(*(one(obj) for obj in objects))
    return made


class BindWatch:
    """Records when each pod of a namespace is first seen bound (`spec.nodeName`), from a watch."""

    def __init__(self, client: kc.KubeClient, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self.bound: dict[str, float] = {}  # pod name -> monotonic time first seen bound
        self.nodes: dict[str, str] = {}
        self._task: asyncio.Task[None] | None = None
        self._version = ""
        self.changed = asyncio.Event()

    async def start(self) -> None:
        listed = await self.client.request("GET", resources.PODS.path(namespace=self.namespace))
        now = time.monotonic()
        for pod in listed.get("items") or ():
            self._see(pod, now)
        self._version = str((listed.get("metadata") or {}).get("resourceVersion", ""))
        self._task = asyncio.create_task(self._watch())

    def _see(self, pod: dict[str, Any], now: float) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        name = pod["metadata"]["name"]
        if node and name not in self.bound:
            self.bound[name] = now
            self.nodes[name] = node
            self.changed.set()

    async def _watch(self) -> None:
        import msgspec

        params = {"watch": "true", "resourceVersion": self._version, "allowWatchBookmarks": "true"}
        while True:
            with contextlib.suppress(kc.ApiUnreachable):
                async with self.client.stream(
                    resources.PODS.path(namespace=self.namespace), params=params, read_timeout=None
                ) as lines:
                    async for line in lines:
                        event = msgspec.json.decode(line)
                        obj = event.get("object") or {}
                        version = (obj.get("metadata") or {}).get("resourceVersion")
                        if version:
                            params["resourceVersion"] = version
                        if event.get("type") in ("ADDED", "MODIFIED"):
                            self._see(obj, time.monotonic())

    async def wait_for(self, count: int, *, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while len(self.bound) < count:
            self.changed.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), timeout=min(remaining, 1.0))
        return True

    async def wait_for_pod(self, name: str, *, timeout: float) -> float | None:
        """When the pod was first seen bound (monotonic), waiting up to `timeout` seconds; None if not."""
        deadline = time.monotonic() + timeout
        while name not in self.bound:
            self.changed.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), timeout=min(remaining, 1.0))
        return self.bound[name]

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(slots=True)
class KaiProcess:
    """`kai run` against the benchmark's API server, started as a user starts it."""

    kubeconfig: pathlib.Path
    log: pathlib.Path
    qps: int = 5000
    burst: int = 5000
    metrics_port: int = field(default_factory=free_port)
    health_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> Proc:
        args = [
            sys.executable,
            "-m",
            "kai.cli.main",
            "run",
            "--kubeconfig",
            str(self.kubeconfig),
            "--no-leader-elect",
            "--kube-api-qps",
            str(self.qps),
            "--kube-api-burst",
            str(self.burst),
            "--metrics-bind-address",
            f"127.0.0.1:{self.metrics_port}",
            "--health-probe-bind-address",
            f"127.0.0.1:{self.health_port}",
        ]
        out = self.log.open("ab")
        self.process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
        return Proc(self.process.pid)

    async def _get(self, port: int, path: str) -> tuple[int, str]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(f"GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n".encode())
            await writer.drain()
            data = await reader.read()
        finally:
            writer.close()
        head, _, body = data.decode("utf-8", "replace").partition("\r\n\r\n")
        return int(head.split()[1]), body

    def check(self) -> None:
        """Raise if `kai run` has exited."""
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"kai run exited with {self.process.returncode}; see {self.log}")

    async def wait_ready(self, *, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"kai run exited with {self.process.returncode}; see {self.log}")
            with contextlib.suppress(OSError, IndexError, ValueError):
                code, _ = await self._get(self.health_port, "/readyz")
                if code == 200:
                    return
            await asyncio.sleep(0.1)
        raise RuntimeError(f"kai run not ready within {timeout:.0f}s; see {self.log}")

    async def settle(self, *, timeout: float) -> dict[str, float]:
        """Wait until every cycle for two seconds was skipped (nothing left to write or decide);
        the metrics then."""
        deadline = time.monotonic() + timeout
        before = await self.metrics()
        while time.monotonic() < deadline:
            await asyncio.sleep(2.0)
            after = await self.metrics()
            cycles = after.get(CYCLES, 0) - before.get(CYCLES, 0)
            if cycles >= 1 and after.get(SKIPPED, 0) - before.get(SKIPPED, 0) == cycles:
                return after
            before = after
        return before

    async def metrics(self) -> dict[str, float]:
        """The unlabelled samples of `/metrics` (name -> value)."""
        _, text = await self._get(self.metrics_port, "/metrics")
        samples: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#") and "{" not in line:
                name, _, value = line.partition(" ")
                with contextlib.suppress(ValueError):
                    samples[name] = float(value)
        return samples

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextlib.asynccontextmanager
async def kai_process(kubeconfig: pathlib.Path, log: pathlib.Path) -> AsyncIterator[tuple[KaiProcess, Proc]]:
    kai = KaiProcess(kubeconfig=kubeconfig, log=log)
    proc = kai.start()
    try:
        yield kai, proc
    finally:
        kai.stop()
