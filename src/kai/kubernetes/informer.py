"""List-then-watch caches of API objects, one `Informer` per kind, as client-go's reflector keeps them.

An informer lists the kind (in pages of `page_size`), delivers every object to its handler as an
add, signals `synced`, then watches from the list's resourceVersion with bookmarks and delivers each
change as it happens. It holds the last state of every object (`store`), so:

* a dropped connection, a 5xx or a read timeout reconnects the watch from the last resourceVersion
  seen (events or bookmarks), after a capped exponential backoff with jitter; nothing is relisted;
* a `410 Gone` (as the reply to the watch request or as an ERROR event with code 410: the version
  was compacted away) relists and diffs the fresh list against the store, delivering objects that
  vanished while the informer was away as deletes, changed ones as updates and new ones as adds;
  this is the only time a full list is taken after the first;
* a kind whose CRD is not installed (404 on the list) is not an error when the informer is
  `optional`: it reports `NOT_INSTALLED`, counts as synced with nothing in it, and looks again every
  `not_installed_retry` seconds. A required kind raises `ResourceNotInstalled` from `run()`.

Objects are delivered as plain dicts decoded by msgspec, with `apiVersion` and `kind` filled in
(list replies leave them out) and `metadata.managedFields` dropped (server-side apply's bookkeeping,
often the largest part of an object, which nothing here reads; client-go's informers in
kube-scheduler drop it too). Handlers run on the event loop and must not block; they see events
in the server's order. `on_restart(resource, reason)` counts watch restarts and relists for metrics.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Protocol

import msgspec

from kai.kubernetes.backoff import Backoff
from kai.kubernetes.client import ApiError, ApiUnreachable, KubeClient
from kai.kubernetes.resources import ApiResource

log = logging.getLogger(__name__)

ObjectKey = tuple[str, str]
"""(namespace, name) of an object; the namespace is "" for cluster-scoped kinds."""


class InformerHandler(Protocol):
    """Receives the changes an informer sees. Called on the event loop; must not block."""

    def on_add(self, obj: dict[str, Any]) -> None: ...

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None: ...

    def on_delete(self, obj: dict[str, Any]) -> None: ...


class HeldEvents:
    """An informer's handler until the real one exists: the events are kept in the order they came
    and handed over by `attach`, after which they pass straight through.

    `kai run` starts its informers' first lists before it has imported the scheduling core that
    holds the cache (`kai.kubernetes.serve`); the lists' objects wait here meanwhile."""

    def __init__(self) -> None:
        self._held: list[tuple[str, tuple[dict[str, Any], ...]]] = []
        self._target: InformerHandler | None = None

    def attach(self, handler: InformerHandler) -> None:
        """Deliver the held events to `handler`, in order, and every later event at once."""
        held, self._held = self._held, []
        for kind, args in held:
            getattr(handler, kind)(*args)
        self._target = handler

    def on_add(self, obj: dict[str, Any]) -> None:
        if self._target is not None:
            self._target.on_add(obj)
        else:
            self._held.append(("on_add", (obj,)))

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if self._target is not None:
            self._target.on_update(old, new)
        else:
            self._held.append(("on_update", (old, new)))

    def on_delete(self, obj: dict[str, Any]) -> None:
        if self._target is not None:
            self._target.on_delete(obj)
        else:
            self._held.append(("on_delete", (obj,)))


class InformerState(enum.StrEnum):
    STARTING = "starting"  # the first list has not completed
    SYNCED = "synced"  # the store holds a complete list and watching keeps it current
    NOT_INSTALLED = "not-installed"  # optional kind whose CRD is absent (404); counts as synced, empty


class RestartReason(enum.StrEnum):
    CLOSED = "closed"  # the server ended the watch (its timeoutSeconds ran out)
    DROPPED = "dropped"  # the connection broke or went silent past the read timeout
    ERROR = "error"  # the server refused the watch (5xx, 429, 403, ...)
    GONE = "gone"  # 410 Gone: the informer relists and diffs


class ResourceNotInstalled(Exception):
    """A required kind is not served by the API server (its CRD is missing)."""

    def __init__(self, resource: ApiResource) -> None:
        self.resource = resource
        super().__init__(f"the API server does not serve {resource.label} ({resource.api_version} {resource.kind})")


class _Gone(Exception):
    """The resourceVersion being watched is too old: relist."""


class _WatchEvent(msgspec.Struct):
    type: str
    object: dict[str, Any]


_decode_event = msgspec.json.Decoder(_WatchEvent).decode


def object_key(obj: Mapping[str, Any]) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


def _strip(obj: dict[str, Any]) -> None:
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)


def _resource_version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class Informer:
    """Keeps `store` equal to the API server's objects of one kind and tells `handler` every change."""

    def __init__(
        self,
        client: KubeClient,
        resource: ApiResource,
        handler: InformerHandler,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        optional: bool = False,
        page_size: int = 500,
        backoff: Backoff | None = None,
        not_installed_retry: float = 60.0,
        watch_timeout: tuple[float, float] = (300.0, 600.0),
        list_timeout: float = 60.0,
        on_restart: Callable[[ApiResource, RestartReason], None] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.client = client
        self.resource = resource
        self.handler = handler
        self.namespace = namespace
        self.optional = optional
        self.page_size = page_size
        self.backoff = backoff or Backoff()
        self.not_installed_retry = not_installed_retry
        self.watch_timeout = watch_timeout
        self.list_timeout = list_timeout
        self.on_restart = on_restart
        self._rng = rng or random.Random()
        self._selectors = {
            key: value for key, value in (("labelSelector", label_selector), ("fieldSelector", field_selector)) if value
        }
        self._store: dict[ObjectKey, dict[str, Any]] = {}
        self.store: Mapping[ObjectKey, dict[str, Any]] = MappingProxyType(self._store)
        self.state = InformerState.STARTING
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.relists = 0
        self.watch_restarts = 0
        self._failures = 0

    async def wait_synced(self) -> None:
        """Return once the first list has been delivered (or the optional kind is known absent)."""
        await self.synced.wait()

    async def run(self) -> None:
        """List, then watch forever; returns only by cancellation (or raises ResourceNotInstalled)."""
        need_list = True
        while True:
            if need_list:
                if not await self._list_and_sync():
                    continue
                need_list = False
            try:
                delivered = await self._watch()
            except _Gone:
                self._restarted(RestartReason.GONE)
                self.relists += 1
                need_list = True
                continue
            except ApiError as err:
                self._restarted(RestartReason.ERROR)
                if err.code == 404:  # the kind went away (CRD deleted): the list will tell
                    need_list = True
                await self._pause(f"watch refused: {err}")
                continue
            except ApiUnreachable as err:
                self._restarted(RestartReason.DROPPED)
                await self._pause(f"watch dropped: {err}")
                continue
            self._restarted(RestartReason.CLOSED)
            if delivered:
                self._failures = 0
            else:  # closed at once with nothing said: do not spin
                await self._pause("watch closed without events")

    def _restarted(self, reason: RestartReason) -> None:
        self.watch_restarts += 1
        if self.on_restart is not None:
            self.on_restart(self.resource, reason)

    async def _pause(self, why: str) -> None:
        self._failures += 1
        delay = self.backoff.delay(self._failures, self._rng)
        log.warning("%s: %s; retrying in %.1fs", self.resource.label, why, delay)
        await asyncio.sleep(delay)

    # -- list -------------------------------------------------------------------------------

    async def _list_and_sync(self) -> bool:
        """Take a full list and reconcile the store with it; False if the caller should loop again."""
        try:
            items, version = await self._list()
        except ApiError as err:
            if err.code == 404:
                if not self.optional:
                    raise ResourceNotInstalled(self.resource) from None
                self._not_installed()
                log.info("%s is not installed; looking again in %.0fs", self.resource.label, self.not_installed_retry)
                await asyncio.sleep(self.not_installed_retry)
                return False
            await self._pause(f"list failed: {err}")
            return False
        except ApiUnreachable as err:
            await self._pause(f"list failed: {err}")
            return False
        self._failures = 0
        self._reconcile(items)

        self.resource_version = version
        self.state = InformerState.SYNCED
        self.synced.set()
        return True

    def _not_installed(self) -> None:
        for key in sorted(self._store):
            self.handler.on_delete(self._store.pop(key))
        self.resource_version = ""
        self.state = InformerState.NOT_INSTALLED
        self.synced.set()

    async def _list(self) -> tuple[list[dict[str, Any]], str]:
        path = self.resource.path(namespace=self.namespace)
        limit: int | None = self.page_size if self.page_size > 0 else None
        while True:
            items: list[dict[str, Any]] = []
            params = dict(self._selectors)
            if limit is not None:
                params["limit"] = str(limit)
            try:
                while True:
                    page = await self.client.request("GET", path, params=params, timeout=self.list_timeout)
                    items.extend(page.get("items") or [])
                    meta = page.get("metadata") or {}
                    token = meta.get("continue")
                    if not token:
                        return self._complete(items), str(meta.get("resourceVersion") or "")
                    params["continue"] = token
            except ApiError as err:
                if err.code != 410 or limit is None:
                    raise
                # the continue token expired mid-way: take the whole list in one go, as client-go does
                log.info("%s: paged list expired; listing without pages", self.resource.label)
                limit = None

    def _complete(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for item in items:
            item.setdefault("apiVersion", self.resource.api_version)
            item.setdefault("kind", self.resource.kind)
            _strip(item)
        return items

    def _reconcile(self, items: list[dict[str, Any]]) -> None:
        """Deliver the difference between the store and a fresh list: deletes, then adds/updates."""
        fresh = {object_key(item): item for item in items}
        for key in sorted(self._store.keys() - fresh.keys()):
            self.handler.on_delete(self._store.pop(key))
        for key, item in fresh.items():
            old = self._store.get(key)
            self._store[key] = item
            if old is None:
                self.handler.on_add(item)
            elif _resource_version(old) != _resource_version(item):
                self.handler.on_update(old, item)

    # -- watch ------------------------------------------------------------------------------

    async def _watch(self) -> bool:
        """Watch from `resource_version` until the stream ends; True if anything arrived."""
        low, high = self.watch_timeout
        seconds = int(self._rng.uniform(low, high))
        params = {
            **self._selectors,
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": self.resource_version,
            "timeoutSeconds": str(seconds),
        }
        delivered = False
        path = self.resource.path(namespace=self.namespace)
        try:
            async with self.client.stream(path, params=params, read_timeout=seconds + 30.0) as lines:
                async for line in lines:
                    self.deliver(line)
                    delivered = True
                    self._failures = 0
        except ApiError as err:
            if err.code == 410:
                raise _Gone() from None
            raise
        return delivered

    def deliver(self, line: bytes) -> None:
        """Decode one line of a watch stream and apply it: the store changes and the handler is told."""
        try:
            event = _decode_event(line)
        except msgspec.DecodeError as err:
            raise ApiUnreachable(method="GET", path=self.resource.path(namespace=self.namespace), cause=err) from None
        self._apply(event)

    def _apply(self, event: _WatchEvent) -> None:
        obj = event.object
        _strip(obj)
        if event.type == "ERROR":
            code = int(obj.get("code") or 0)
            if code == 410:
                raise _Gone()
            raise ApiError(method="WATCH", path=self.resource.label, code=code or 500, status=obj)
        version = _resource_version(obj)
        if event.type == "BOOKMARK":
            if version:
                self.resource_version = version
            return
        key = object_key(obj)
        if event.type == "DELETED":
            self._store.pop(key, None)
            self.handler.on_delete(obj)
        elif event.type in ("ADDED", "MODIFIED"):
            old = self._store.get(key)
            self._store[key] = obj
            if old is None:
                self.handler.on_add(obj)
            else:
                self.handler.on_update(old, obj)
        else:
            log.warning("%s: ignoring watch event of type %r", self.resource.label, event.type)
            return
        if version:
            self.resource_version = version


def held_informers(
    client: KubeClient,
    required: tuple[ApiResource, ...],
    optional: tuple[ApiResource, ...],
    *,
    on_restart: Callable[[ApiResource, RestartReason], None] | None = None,
) -> list[Informer]:
    """One informer per kind (those of `optional` may be absent), each holding its events
    (`HeldEvents`) until its handler is attached."""
    return [
        Informer(client, resource, HeldEvents(), optional=resource in optional, on_restart=on_restart)
        for resource in (*required, *optional)
    ]
