"""The program of a GPU reservation pod: find the one GPU the device plugin gave this pod, report its
UUID in the pod's annotation `run.ai/reserve_for_gpu_index`, then hold the device until stopped.

kai creates a reservation pod per shared GPU (see `kai.cluster.gpu_sharing`); the kubelet's device
plugin allocates it one whole `nvidia.com/gpu`, so inside the container exactly one device is
visible. Its UUID comes from NVML (`libnvidia-ml.so.1`, which the NVIDIA container runtime mounts),
else from `nvidia-smi --query-gpu=uuid --format=csv,noheader`. The pod patches its own annotation
through the API server with its service account (in-cluster defaults; each can be overridden by a
flag), retrying while the API server does not answer, and then sleeps until SIGTERM (exit 0).

Standard library only: the image is `python:3.11-slim` with this file (Dockerfile target
`resource-reservation`). Exit status 1, with the reason on standard error, when no single device is
visible or the pod cannot be annotated; the kubelet restarts it, and kai gives the bind up after its
`--resource-reservation-timeout`.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

UUID_ANNOTATION = "run.ai/reserve_for_gpu_index"
SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
NVML_SUCCESS = 0
ATTEMPTS = 8  # API calls are retried with backoff 0.5 s .. 30 s (about two minutes in all)


class AgentError(Exception):
    """Why the device could not be reported."""


def _nvml_uuids() -> list[str] | None:
    """The UUIDs of the visible devices through NVML, or None when NVML is not there."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    if nvml.nvmlInit_v2() != NVML_SUCCESS:
        raise AgentError("NVML did not initialise (nvmlInit_v2 failed)")
    try:
        count = ctypes.c_uint()
        if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != NVML_SUCCESS:
            raise AgentError("NVML could not count the devices")
        uuids = []
        for index in range(count.value):
            handle = ctypes.c_void_p()
            if nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) != NVML_SUCCESS:
                raise AgentError(f"NVML could not open device {index}")
            buffer = ctypes.create_string_buffer(96)
            if nvml.nvmlDeviceGetUUID(handle, buffer, ctypes.c_uint(96)) != NVML_SUCCESS:
                raise AgentError(f"NVML could not read the UUID of device {index}")
            uuids.append(buffer.value.decode())
        return uuids
    finally:
        nvml.nvmlShutdown()


def _nvidia_smi_uuids() -> list[str]:
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise AgentError(f"neither NVML nor nvidia-smi is available: {err}") from None
    if done.returncode != 0:
        raise AgentError(f"nvidia-smi failed ({done.returncode}): {done.stderr.strip()}")
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def device_uuid() -> str:
    """The UUID of the one device this container sees."""
    uuids = _nvml_uuids()
    if uuids is None:
        uuids = _nvidia_smi_uuids()
    if len(uuids) != 1:
        raise AgentError(f"found {len(uuids)} GPU devices, 1 was expected (the pod requests one nvidia.com/gpu)")
    return uuids[0]


class Api:
    """The few calls the agent makes to the API server, with its service account's token."""

    def __init__(self, server: str, token_file: str, ca_file: str) -> None:
        self.server = server.rstrip("/")
        self.token_file = token_file
        self.context = ssl.create_default_context(cafile=ca_file)

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        with open(self.token_file, encoding="utf-8") as handle:
            token = handle.read().strip()
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/merge-patch+json"
        request = urllib.request.Request(self.server + path, data=data, headers=headers, method=method)
        delay = 0.5
        for attempt in range(1, ATTEMPTS + 1):
            try:
                with urllib.request.urlopen(request, context=self.context, timeout=30) as reply:
                    return dict(json.loads(reply.read() or b"{}"))
            except urllib.error.HTTPError as err:
                if err.code < 500 and err.code != 429:
                    raise AgentError(f"{method} {path}: {err.code} {err.read().decode(errors='replace')}") from None
                why = f"{err.code}"
            except (urllib.error.URLError, OSError) as err:
                why = str(err)
            if attempt == ATTEMPTS:
                raise AgentError(f"{method} {path}: no answer after {ATTEMPTS} attempts ({why})")
            time.sleep(delay)
            delay = min(delay * 2, 30.0)
        raise AgentError("unreachable")


def report(api: Api, namespace: str, name: str, find_uuid: Any = device_uuid) -> str:
    """Annotate the pod with its device's UUID (once: a restarted container keeps the first report)."""
    path = f"/api/v1/namespaces/{urllib.parse.quote(namespace)}/pods/{urllib.parse.quote(name)}"
    pod = api.request("GET", path)
    known = ((pod.get("metadata") or {}).get("annotations") or {}).get(UUID_ANNOTATION)
    if known:
        return str(known)
    uuid = str(find_uuid())
    api.request("PATCH", path, {"metadata": {"annotations": {UUID_ANNOTATION: uuid}}})
    return uuid


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Report this pod's GPU UUID and hold the device.")
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST", ""), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    in_cluster = f"https://{host}:{port}" if host else ""
    parser.add_argument("--api-server", default=in_cluster, help="API server URL (default: in-cluster)")
    parser.add_argument("--token-file", default=f"{SERVICE_ACCOUNT}/token", help="bearer token file")
    parser.add_argument("--ca-file", default=f"{SERVICE_ACCOUNT}/ca.crt", help="CA bundle of the API server")
    parser.add_argument("--namespace", default=os.environ.get("POD_NAMESPACE", ""), help="this pod's namespace")
    parser.add_argument("--name", default=os.environ.get("POD_NAME", ""), help="this pod's name")
    args = parser.parse_args(argv)
    if not (args.api_server and args.namespace and args.name):
        print("reservation agent: needs the API server, POD_NAMESPACE and POD_NAME", file=sys.stderr)
        return 1
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        uuid = report(Api(args.api_server, args.token_file, args.ca_file), args.namespace, args.name)
    except AgentError as err:
        print(f"reservation agent: {err}", file=sys.stderr)
        return 1
    print(f"reservation agent: {args.namespace}/{args.name} holds GPU {uuid}", flush=True)
    stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
