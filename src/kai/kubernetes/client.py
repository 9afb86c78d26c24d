"""The one async connection `kai run` holds to the API server: credentials, rate limit, timeouts, errors.

lightkube resolves the credentials and TLS (`lightkube.config`: tokens, token files, client
certificates, exec plugins, CA bundles) and aiohttp carries the requests (its C HTTP parser costs a
fifth of the CPU per request of httpx's pure-Python stack, which matters when a scheduler binds
thousands of pods a minute: see docs/performance.md); this module adds what the scheduler needs on top:

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

import contextlib
import os
import ssl
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any

import aiohttp
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
AUTH_REFRESH = 60.0  # seconds the credentials' Authorization header is reused (a 401 refreshes it at once)

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
        self.timeout = isinstance(cause, (TimeoutError, httpx.TimeoutException))
        what = "timed out" if self.timeout else f"failed: {type(cause).__name__}: {cause}"
        super().__init__(f"{method} {path} {what}")


def is_transient(err: BaseException) -> bool:
    """True for failures a retry may cure: no answer, 429 Too Many Requests, or a 5xx."""
    if isinstance(err, ApiUnreachable):
        return True
    return isinstance(err, ApiError) and (err.code == 429 or err.code >= 500)


class ClientOptions(msgspec.Struct, frozen=True, kw_only=True):
    """Connection settings; `qps <= 0` disables the client-side rate limit."""

    qps: float = 50.0
    burst: int = 100
    timeout: float = 30.0
    connect_timeout: float = 5.0
    max_connections: int = 256


class KubeClient:
    """An async client for one API server. Use as `async with` or call `aclose()` when done.

    Every request takes a token from the client-side rate limit first (`requests_sent` counts them)."""

    def __init__(self, config: lk_kubeconfig.SingleConfig, options: ClientOptions | None = None) -> None:
        self.options = options or ClientOptions()
        self.config = config
        self.source = kubeconfig.describe(config)
        self.server = config.cluster.server.rstrip("/")
        self.namespace = config.namespace
        self.rate_limiter = TokenBucket(qps=self.options.qps, burst=self.options.burst)
        self.requests_sent = 0
        user = config.user or lk_models.User()
        try:
            self._ssl: ssl.SSLContext | None = (
                client_adapter.verify_cluster(config.cluster, user, config.abs_file, trust_env=False)
                if self.server.startswith("https:")
                else None
            )
            self._auth = client_adapter.user_auth(user)
        except (lk_exceptions.ConfigError, OSError, ssl.SSLError, ValueError) as err:
            raise kubeconfig.KubeConfigError(f"cannot use the credentials for {self.source}: {err}") from None
        self._authorization: tuple[float, str | None] | None = None  # (when obtained, header value)
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:  # made on first use, inside the event loop that uses it
            connector = aiohttp.TCPConnector(
                ssl=self._ssl if self._ssl is not None else False,
                limit=self.options.max_connections,
                enable_cleanup_closed=True,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                headers={"User-Agent": USER_AGENT, "Accept": JSON},
                trust_env=False,
                auto_decompress=True,
                skip_auto_headers=("Accept-Encoding",),
            )
        return self._session

    async def _authorization_header(self, *, refresh: bool = False) -> str | None:
        """The credentials' Authorization header, obtained through lightkube's auth flow (token, token
        file, exec plugin, basic) and reused for `AUTH_REFRESH` seconds."""
        if self._auth is None:
            return None
        now = time.monotonic()
        if not refresh and self._authorization is not None and now - self._authorization[0] < AUTH_REFRESH:
            return self._authorization[1]
        flow = self._auth.async_auth_flow(httpx.Request("GET", self.server + "/"))
        header: str | None = None
        try:
            request = await flow.__anext__()
            header = request.headers.get("Authorization")
            if refresh:
                # the credentials were refused: tell the flow, so that one that can (an exec plugin)
                # fetches new ones
                with contextlib.suppress(StopAsyncIteration):
                    retried = await flow.asend(httpx.Response(401, request=request))
                    header = retried.headers.get("Authorization") or header
        except StopAsyncIteration:
            pass
        finally:
            await flow.aclose()
        self._authorization = (now, header)
        return header

    def _timeout(self, read: float | None) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(total=None, connect=self.options.connect_timeout, sock_read=read)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None,
        content: bytes | None,
        content_type: str,
        read_timeout: float | None,
    ) -> aiohttp.ClientResponse:
        """Send one request (rate limit first, credentials refreshed once on a 401); the caller reads
        and releases the response. Raises `ApiUnreachable` when no answer came."""
        for attempt in (0, 1):
            await self.rate_limiter.acquire()
            self.requests_sent += 1
            headers = {"Content-Type": content_type} if content is not None else {}
            authorization = await self._authorization_header(refresh=attempt > 0)
            if authorization:
                headers["Authorization"] = authorization
            try:
                response = await self._http().request(
                    method,
                    self.server + path,
                    params=params,
                    data=content,
                    headers=headers,
                    timeout=self._timeout(read_timeout),
                )
            except (aiohttp.ClientError, TimeoutError, OSError) as err:
                raise ApiUnreachable(method=method, path=path, cause=err) from err
            if response.status == 401 and attempt == 0 and self._auth is not None:
                response.release()
                continue
            return response
        raise AssertionError("unreachable")  # pragma: no cover

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
        limit = timeout if timeout is not None else self.options.timeout
        response = await self._send(
            method, path, params=params, content=content, content_type=content_type, read_timeout=limit
        )
        try:
            data = await response.read()
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            raise ApiUnreachable(method=method, path=path, cause=err) from err
        finally:
            response.release()
        if response.status >= 400:
            raise _api_error(method, path, response.status, data)
        if not data:
            return {}
        try:
            decoded = _decode(data)
        except msgspec.DecodeError as err:
            raise ApiError(
                method=method, path=path, code=response.status, status={"message": f"reply is not JSON: {err}"}
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
        response = await self._send(
            method, path, params=params, content=None, content_type=JSON, read_timeout=read_timeout
        )
        try:
            if response.status >= 400:
                try:
                    content = await response.read()
                except (aiohttp.ClientError, TimeoutError, OSError) as err:
                    raise ApiUnreachable(method=method, path=path, cause=err) from err
                raise _api_error(method, path, response.status, content)
            yield _lines(response, method, path)
        finally:
            response.close()

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


async def _lines(response: aiohttp.ClientResponse, method: str, path: str) -> AsyncIterator[bytes]:
    pending: list[bytes] = []
    try:
        async for chunk in response.content.iter_any():
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
    except (aiohttp.ClientError, TimeoutError, OSError) as err:
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
