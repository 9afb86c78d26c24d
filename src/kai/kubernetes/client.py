"""The one async connection `kai run` holds to the API server: credentials, rate limit, timeouts, errors.

lightkube resolves the credentials and TLS (`lightkube.config`: tokens, token files, client
certificates, exec plugins, CA bundles) and httpx carries the requests; this module adds what the
scheduler needs on top:

* the client-side rate limit (`--kube-api-qps`/`--kube-api-burst`), applied in the transport so that
  every request takes a token: reads, writes, list pages, watch starts and retries alike;
* timeouts: `timeout` for ordinary calls, `connect_timeout` to open a connection, and per-stream
  read timeouts for watches (see `KubeClient.stream`);
* objects as plain decoded JSON (msgspec), the form `kai.api` parses;
* two exceptions for everything that can go wrong on the wire: `ApiError` (the server answered with
  an error status, carrying its `Status` object) and `ApiUnreachable` (no answer: refused, reset,
  timed out). `is_transient` says which of them deserve a retry.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx2 as httpx
import msgspec
from lightkube.config import client_adapter
from lightkube.config import kubeconfig as lk_kubeconfig
from lightkube.config import models as lk_models
from lightkube.core import exceptions as lk_exceptions

import kai
from kai.kubernetes import kubeconfig
from kai.kubernetes.ratelimit import TokenBucket

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
USER_AGENT = f"kai-scheduler/{kai.__version__}"

_decode = msgspec.json.decode
_encode = msgspec.json.encode


class ApiError(Exception):
    """The API server answered with an error status; `status` is its `Status` object (or a stand-in)."""

    def __init__(self, *, method: str, path: str, code: int, status: Mapping[str, Any]) -> None:
        self.method = method
        self.path = path
        self.code = code
        self.status = status
        self.reason = str(status.get("reason") or "")
        self.message = str(status.get("message") or "")
        super().__init__(f"{method} {path}: {code} {self.reason or 'error'}: {self.message}".rstrip(": "))


class ApiUnreachable(Exception):
    """No answer from the API server: connection refused or reset, or a timeout (`timeout` is True)."""

    def __init__(self, *, method: str, path: str, cause: BaseException) -> None:
        self.method = method
        self.path = path
        self.timeout = isinstance(cause, httpx.TimeoutException)
        what = "timed out" if self.timeout else f"failed: {type(cause).__name__}: {cause}"
        super().__init__(f"{method} {path} {what}")


def is_transient(err: BaseException) -> bool:
    """True for failures a retry may cure: no answer, 429 Too Many Requests, or a 5xx."""
    if isinstance(err, ApiUnreachable):
        return True
    return isinstance(err, ApiError) and (err.code == 429 or err.code >= 500)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientOptions:
    """Connection settings; `qps <= 0` disables the client-side rate limit."""

    qps: float = 50.0
    burst: int = 100
    timeout: float = 30.0
    connect_timeout: float = 5.0
    max_connections: int = 256
    http2: bool = False


class _RateLimitedTransport(httpx.AsyncBaseTransport):
    """Takes a token from the bucket before every request it sends."""

    def __init__(self, inner: httpx.AsyncBaseTransport, bucket: TokenBucket) -> None:
        self._inner = inner
        self._bucket = bucket
        self.sent = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await self._bucket.acquire()
        self.sent += 1
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


class KubeClient:
    """An async client for one API server. Use as `async with` or call `aclose()` when done."""

    def __init__(self, config: lk_kubeconfig.SingleConfig, options: ClientOptions | None = None) -> None:
        self.options = options or ClientOptions()
        self.config = config
        self.source = kubeconfig.describe(config)
        self.server = config.cluster.server.rstrip("/")
        self.namespace = config.namespace
        self.rate_limiter = TokenBucket(qps=self.options.qps, burst=self.options.burst)
        user = config.user or lk_models.User()
        try:
            verify = client_adapter.verify_cluster(config.cluster, user, config.abs_file, trust_env=False)
            auth = client_adapter.user_auth(user)
        except (lk_exceptions.ConfigError, OSError, ssl.SSLError, ValueError) as err:
            raise kubeconfig.KubeConfigError(f"cannot use the credentials for {self.source}: {err}") from None
        inner = httpx.AsyncHTTPTransport(
            verify=verify,
            http2=self.options.http2,
            trust_env=False,
            limits=httpx.Limits(max_connections=self.options.max_connections, max_keepalive_connections=64),
        )
        self._transport = _RateLimitedTransport(inner, self.rate_limiter)
        self._http = httpx.AsyncClient(
            base_url=self.server,
            auth=auth,
            transport=self._transport,
            trust_env=False,
            headers={"User-Agent": USER_AGENT, "Accept": JSON},
            timeout=self._timeout(self.options.timeout),
        )

    @property
    def requests_sent(self) -> int:
        """How many HTTP requests went out (each took a rate-limit token)."""
        return self._transport.sent

    def _timeout(self, read: float | None) -> httpx.Timeout:
        return httpx.Timeout(read, connect=self.options.connect_timeout)

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Send one request and return the decoded JSON reply ({} for an empty one).

        Raises `ApiError` for a status >= 400 and `ApiUnreachable` when no answer came in time
        (`timeout` seconds, default `ClientOptions.timeout`).
        """
        content = None if body is None else (body if isinstance(body, bytes) else _encode(body))
        headers = {"Content-Type": content_type} if content is not None else None
        try:
            response = await self._http.request(
                method,
                path,
                params=params,
                content=content,
                headers=headers,
                timeout=self._timeout(timeout if timeout is not None else self.options.timeout),
            )
        except httpx.HTTPError as err:
            raise ApiUnreachable(method=method, path=path, cause=err) from err
        if response.status_code >= 400:
            raise _api_error(method, path, response.status_code, response.content)
        if not response.content:
            return {}
        try:
            decoded = _decode(response.content)
        except msgspec.DecodeError as err:
            raise ApiError(
                method=method, path=path, code=response.status_code, status={"message": f"reply is not JSON: {err}"}
            ) from None
        return decoded if isinstance(decoded, dict) else {"value": decoded}

    @asynccontextmanager
    async def stream(
        self, path: str, *, params: Mapping[str, str] | None = None, read_timeout: float | None = None
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """Open a streaming GET (a watch) and yield an iterator over its non-empty lines.

        `read_timeout` bounds the silence between two chunks (None: wait forever). Raises
        `ApiError` if the server refuses the request, `ApiUnreachable` if the connection fails
        before or while streaming.
        """
        method = "GET"
        request = self._http.build_request(method, path, params=params, timeout=self._timeout(read_timeout))
        try:
            response = await self._http.send(request, stream=True)
        except httpx.HTTPError as err:
            raise ApiUnreachable(method=method, path=path, cause=err) from err
        try:
            if response.status_code >= 400:
                try:
                    content = await response.aread()
                except httpx.HTTPError as err:
                    raise ApiUnreachable(method=method, path=path, cause=err) from err
                raise _api_error(method, path, response.status_code, content)
            yield _lines(response, method, path)
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


async def _lines(response: httpx.Response, method: str, path: str) -> AsyncIterator[bytes]:
    pending: list[bytes] = []
    try:
        async for chunk in response.aiter_bytes():
            parts = chunk.split(b"\n")
            if len(parts) == 1:
                pending.append(chunk)
                continue
            pending.append(parts[0])
            lines = [b"".join(pending), *parts[1:-1]]
            pending = [parts[-1]]
            for line in lines:
                if line.strip():
                    yield line
    except httpx.HTTPError as err:
        raise ApiUnreachable(method=method, path=path, cause=err) from err
    rest = b"".join(pending)
    if rest.strip():
        yield rest


def _api_error(method: str, path: str, code: int, content: bytes) -> ApiError:
    status: Mapping[str, Any]
    try:
        decoded = _decode(content) if content else {}
    except msgspec.DecodeError:
        decoded = None
    if isinstance(decoded, dict) and decoded.get("kind") == "Status":
        status = decoded
    else:
        text = content.decode("utf-8", "replace").strip()[:300]
        status = {"kind": "Status", "code": code, "message": text}
    return ApiError(method=method, path=path, code=code, status=status)


def connect(
    *,
    kubeconfig_path: str | os.PathLike[str] | None = None,
    context: str | None = None,
    options: ClientOptions | None = None,
) -> KubeClient:
    """A client for the cluster named by the flags, else `$KUBECONFIG`, else in-cluster (kubectl's order).

    Raises `kubeconfig.KubeConfigError` (exit 2 in `kai run`) when the credentials are unusable.
    """
    return KubeClient(kubeconfig.load(kubeconfig=kubeconfig_path, context=context), options)
