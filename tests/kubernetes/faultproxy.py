"""A programmable fault-injecting HTTP proxy in front of the real API server, for fault tests.

The proxy listens on plain HTTP on loopback and forwards every request to the API server named by
a kubeconfig, authenticating upstream with that kubeconfig's credentials (so it works in front of
any cluster); `kubeconfig` is a kubeconfig for clients that points at the proxy. Responses are
streamed through unchanged, so watches work as they do directly.

A test programs faults; each applies to requests that arrive after it is set:

* `drop_watches()` breaks every open watch connection mid-stream;
* `hold_watches()` / `release_watches()` keeps new watch requests waiting (no answer) in between;
* `gone_next_watches(n, as_event=...)` answers the next n watches with 410 Gone, as an HTTP status
  or as a 200 reply carrying an ERROR event with code 410;
* `fail(status, method=..., path=..., count=n)` answers n matching requests with that status and a
  Status body, without forwarding them;
* `hang(method=..., path=..., count=n)` holds n matching requests unanswered (until the client
  gives up or `seconds` pass, then the connection is closed);
* `freeze(seconds)` holds every request that arrives in the next `seconds` until they are over
  (`thaw()` ends it early).

`requests` records what arrived (method, path, query, arrival time) for assertions such as "the
rate limit held" or "a 409 was not retried".
"""

from __future__ import annotations

import asyncio
import re
import socket
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from types import TracebackType

import httpx2 as httpx
import msgspec
from aiohttp import web
from lightkube.config import client_adapter

from kai.kubernetes import kubeconfig as kai_kubeconfig

_FORWARDED_HEADERS = ("Content-Type", "Accept", "Accept-Encoding", "User-Agent")
_RETURNED_HEADERS = ("Content-Type", "Content-Encoding", "Audit-Id", "Cache-Control")


@dataclass(frozen=True, slots=True)
class Seen:
    """One request as it arrived at the proxy (`at` is time.monotonic())."""

    method: str
    path: str
    query: dict[str, str]
    at: float

    @property
    def watch(self) -> bool:
        return self.query.get("watch") in ("true", "1")


@dataclass(slots=True)
class _Rule:
    method: str | None
    path: re.Pattern[str]
    remaining: int
    status: int | None = None
    hang_seconds: float = 0.0
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        return self.remaining > 0 and (self.method is None or self.method == method) and bool(self.path.search(path))


def _status_body(code: int, message: str) -> bytes:
    try:
        reason = HTTPStatus(code).phrase.replace(" ", "")
    except ValueError:
        reason = "Unknown"
    if code == 410:
        reason = "Expired"
    return msgspec.json.encode(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
    )


@dataclass
class FaultProxy:
    """Start with `async with FaultProxy(upstream_kubeconfig, workdir) as proxy:`."""

    upstream_kubeconfig: Path
    workdir: Path
    requests: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rules: list[_Rule] = []
        self._watches: dict[asyncio.Task[object], web.BaseRequest] = {}
        self._watch_gate = asyncio.Event()
        self._watch_gate.set()
        self._gone: list[bool] = []  # one entry per pending 410 answer: True = as an ERROR event
        self._thawed = asyncio.Event()
        self._thawed.set()
        self._thaw_timer: asyncio.TimerHandle | None = None
        self._runner: web.ServerRunner | None = None
        self._upstream: httpx.AsyncClient | None = None
        self.url = ""
        self.kubeconfig = self.workdir / "proxy.kubeconfig"

    # -- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> FaultProxy:
        config = kai_kubeconfig.load(kubeconfig=self.upstream_kubeconfig)
        self._upstream = client_adapter.AsyncClient(
            config, client_adapter.ConnectionParams(timeout=httpx.Timeout(None, connect=5.0), trust_env=False)
        )
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        self._runner = web.ServerRunner(web.Server(self._handle, handler_cancellation=True), shutdown_timeout=1.0)
        await self._runner.setup()
        await web.SockSite(self._runner, sock).start()
        self.url = f"http://127.0.0.1:{port}"
        self.kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: proxy\n  cluster:\n    server: {self.url}\n"
            "users:\n- name: proxy\n  user: {}\n"
            "contexts:\n- name: proxy\n  context:\n    cluster: proxy\n    user: proxy\n"
            "current-context: proxy\n"
        )
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._watch_gate.set()
        self.thaw()
        self.drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._upstream is not None:
            await self._upstream.aclose()

    # -- faults ---------------------------------------------------------------------------

    def drop_watches(self) -> int:
        """Break every open watch connection; return how many there were."""
        dropped = 0
        for task, request in list(self._watches.items()):
            if request.transport is not None:
                request.transport.abort()
            task.cancel()
            dropped += 1
        self._watches.clear()
        return dropped

    def hold_watches(self) -> None:
        self._watch_gate.clear()

    def release_watches(self) -> None:
        self._watch_gate.set()

    def gone_next_watches(self, count: int = 1, *, as_event: bool = False) -> None:
        self._gone.extend([as_event] * count)

    def fail(self, status: int, *, method: str | None = None, path: str = "", count: int = 1) -> None:
        self._rules.append(_Rule(method=method, path=re.compile(path), remaining=count, status=status))

    def hang(self, *, method: str | None = None, path: str = "", count: int = 1, seconds: float = 60.0) -> None:
        self._rules.append(_Rule(method=method, path=re.compile(path), remaining=count, hang_seconds=seconds))

    def freeze(self, seconds: float) -> None:
        """Hold every request that arrives from now on until `seconds` pass or `thaw()` is called."""
        self.thaw()
        self._thawed.clear()
        self._thaw_timer = asyncio.get_running_loop().call_later(seconds, self.thaw)

    def thaw(self) -> None:
        if self._thaw_timer is not None:
            self._thaw_timer.cancel()
            self._thaw_timer = None
        self._thawed.set()

    @property
    def open_watches(self) -> int:
        return len(self._watches)

    def count(self, *, method: str | None = None, path: str = "", watch: bool | None = None) -> int:
        """How many recorded requests match (method exactly, `path` as a regex search)."""
        pattern = re.compile(path)
        return sum(
            1
            for seen in self.requests
            if (method is None or seen.method == method)
            and pattern.search(seen.path)
            and (watch is None or seen.watch == watch)
        )

    # -- serving --------------------------------------------------------------------------

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        seen = Seen(request.method, request.path, dict(request.query), time.monotonic())
        self.requests.append(seen)
        await self._thawed.wait()
        if seen.watch:
            await self._watch_gate.wait()
            if self._gone:
                return await self._answer_gone(request, self._gone.pop(0))
        for rule in self._rules:
            if rule.matches(seen.method, seen.path):
                rule.remaining -= 1
                rule.hits += 1
                if rule.status is not None:
                    return web.Response(
                        status=rule.status,
                        body=_status_body(rule.status, "injected by the fault proxy"),
                        content_type="application/json",
                    )
                await asyncio.sleep(rule.hang_seconds)
                if request.transport is not None:
                    request.transport.abort()
                raise asyncio.CancelledError()
        return await self._forward(request, seen)

    async def _answer_gone(self, request: web.BaseRequest, as_event: bool) -> web.StreamResponse:
        body = _status_body(410, "too old resource version (injected by the fault proxy)")
        if not as_event:
            return web.Response(status=410, body=body, content_type="application/json")
        event = b'{"type":"ERROR","object":' + body + b"}\n"
        return web.Response(status=200, body=event, content_type="application/json")

    async def _forward(self, request: web.BaseRequest, seen: Seen) -> web.StreamResponse:
        assert self._upstream is not None
        body = await request.read()
        headers = {name: request.headers[name] for name in _FORWARDED_HEADERS if name in request.headers}
        upstream_request = self._upstream.build_request(
            request.method, request.path_qs, content=body or None, headers=headers
        )
        try:
            upstream = await self._upstream.send(upstream_request, stream=True)
        except httpx.HTTPError as err:
            return web.Response(
                status=503, body=_status_body(503, f"upstream unavailable: {err}"), content_type="application/json"
            )
        task = asyncio.current_task()
        try:
            response = web.StreamResponse(
                status=upstream.status_code,
                headers={name: upstream.headers[name] for name in _RETURNED_HEADERS if name in upstream.headers},
            )
            await response.prepare(request)
            if seen.watch and task is not None:
                self._watches[task] = request
            try:
                async for chunk in upstream.aiter_raw():
                    await response.write(chunk)
            except httpx.HTTPError:
                if request.transport is not None:
                    request.transport.abort()
                return response
            await response.write_eof()
            return response
        finally:
            if task is not None:
                self._watches.pop(task, None)
            await upstream.aclose()
