"""kai's admission webhooks over HTTPS: the API server sends an `AdmissionReview`, kai answers it.

Paths (registered by the chart's Validating- and MutatingWebhookConfiguration `kai-scheduler`):

| path | object | what |
|---|---|---|
| `/validate-queue` | Queue (CREATE, UPDATE) | resources present, parent exists, no loop of parents |
| `/validate-podgroup` | PodGroup (CREATE, UPDATE) | minMember, subgroups (names, parents, loops, minSubGroup) |
| `/validate-pod` | Pod (CREATE) | GPU-sharing annotations valid and combined as allowed; sharing on |
| `/mutate-pod` | Pod (CREATE) | a GPU-sharing pod's ConfigMap annotation and env references |

The rules are `kai.cluster.admission`'s. Every replica serves them (leader or not): they read only
the cache of queues, and a parent not in it yet is looked up once more on the API server before a
Queue is refused. A refusal carries the rule's message, which names the field or annotation.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import secrets
import ssl
import string
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from aiohttp import web

from kai.api import queue as api_queue
from kai.api.errors import InputError
from kai.cluster import admission
from kai.kubernetes import client as kc
from kai.kubernetes import resources, webhook_tls
from kai.kubernetes.options import WebhookOptions, WebhookSettings

log = logging.getLogger(__name__)

_SUFFIX_ALPHABET = string.ascii_lowercase + string.digits


class WebhookServer:
    """Serves the four webhooks on `host:port` with the certificate in `cert_file`/`key_file`."""

    def __init__(
        self,
        *,
        settings: WebhookSettings,
        queues: Callable[[], Mapping[str, api_queue.Queue]],
        client: kc.KubeClient,
        address: str,
        cert_file: Path,
        key_file: Path,
    ) -> None:
        self.settings = settings
        self.queues = queues
        self.client = client
        self.host, _, port = address.rpartition(":")
        self.port = int(port)
        self.cert_file = cert_file
        self.key_file = key_file
        self.reviews = 0
        self.refusals = 0
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_post("/validate-queue", self._handler(self._queue))
        app.router.add_post("/validate-podgroup", self._handler(self._podgroup))
        app.router.add_post("/validate-pod", self._handler(self._pod))
        app.router.add_post("/mutate-pod", self._handler(self._mutate))
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(self.cert_file), str(self.key_file))
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host or "0.0.0.0", self.port, ssl_context=context).start()
        log.info("serving admission webhooks on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # ----------------------------------------------------------------- the reviews
    async def _queue(self, obj: Mapping[str, Any]) -> admission.Verdict:
        known = dict(self.queues())
        parent = str((obj.get("spec") or {}).get("parentQueue") or "")
        if parent and parent not in known:
            found = await self._live_queue(parent)  # created a moment ago, not in the cache yet
            if found is not None:
                known[parent] = found
        return admission.review_queue(obj, queues=known)

    async def _live_queue(self, name: str) -> api_queue.Queue | None:
        try:
            raw = await self.client.request("GET", resources.QUEUES.path(name=name))
        except (kc.ApiError, kc.ApiUnreachable):
            return None
        try:
            return api_queue.parse_queue(raw, source=None)
        except InputError:
            return None

    async def _podgroup(self, obj: Mapping[str, Any]) -> admission.Verdict:
        return admission.review_podgroup(obj)

    async def _pod(self, obj: Mapping[str, Any]) -> admission.Verdict:
        return admission.review_pod(
            obj, scheduler_name=self.settings.scheduler_name, gpu_sharing=self.settings.gpu_sharing
        )

    async def _mutate(self, obj: Mapping[str, Any]) -> admission.Verdict:
        suffix = "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(7))
        return admission.mutate_pod(
            obj,
            scheduler_name=self.settings.scheduler_name,
            suffix=suffix,
            runtime_class=self.settings.runtime_class,
        )

    def _handler(self, review: Callable[[Mapping[str, Any]], Any]) -> Callable[[web.Request], Any]:
        async def handle(request: web.Request) -> web.Response:
            try:
                body = await request.json()
                req = body["request"]
                uid = str(req["uid"])
            except (ValueError, KeyError, TypeError):
                return web.Response(status=400, text="expected an admission.k8s.io/v1 AdmissionReview")
            obj = req.get("object") or {}
            verdict: admission.Verdict = await review(obj)
            self.reviews += 1
            response: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed}
            if not verdict.allowed:
                self.refusals += 1
                response["status"] = {"code": 403, "reason": "Forbidden", "message": verdict.message}
                kind = (req.get("kind") or {}).get("kind", "")
                name = (obj.get("metadata") or {}).get("name") or (obj.get("metadata") or {}).get("generateName")
                log.info("refused %s %s: %s", kind, name, verdict.message)
            if verdict.patch:
                response["patchType"] = "JSONPatch"
                response["patch"] = base64.b64encode(json.dumps(list(verdict.patch)).encode()).decode()
            return web.json_response(
                {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
            )

        return handle


async def start_webhooks(
    options: WebhookOptions,
    *,
    client: kc.KubeClient,
    queues: Callable[[], Mapping[str, api_queue.Queue]],
    stop: asyncio.Event,
) -> tuple[WebhookServer, list[asyncio.Task[None]]]:
    """Serve the webhooks; with a certificate of kai's own, keep its CA in the webhook configurations
    (the returned tasks end when `stop` is set)."""
    tasks: list[asyncio.Task[None]] = []
    ca: bytes | None = None  # the CA of kai's own certificate, kept in the configurations
    if options.cert_dir is not None:
        cert_file, key_file = options.cert_dir / "tls.crt", options.cert_dir / "tls.key"
    else:
        found = await webhook_tls.ensure_certificate(
            client, options.secret_namespace, options.secret_name, options.hosts
        )
        folder = Path(tempfile.mkdtemp(prefix="kai-webhook-"))
        cert_file, key_file = folder / "tls.crt", folder / "tls.key"
        cert_file.write_bytes(found.cert)
        key_file.touch(mode=0o600)
        key_file.write_bytes(found.key)
        ca = found.ca
    server = WebhookServer(
        settings=options.settings,
        queues=queues,
        client=client,
        address=options.address,
        cert_file=cert_file,
        key_file=key_file,
    )
    await server.start()
    if ca is not None:
        # the CA goes into the configurations once the server listens: from then on the API server calls
        # it, and a call before it listened would be refused (failurePolicy Fail refuses the object)
        await webhook_tls.inject_ca(client, options.configuration, ca)
        tasks.append(
            asyncio.create_task(webhook_tls.keep_ca(client, options.configuration, ca, stop), name="webhook CA")
        )
    return server, tasks
