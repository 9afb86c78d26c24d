"""A real Kubernetes API server for the deploy tests, and a small client that applies manifests to it.

One control plane per test module (``../shared/k8s/cluster up``, about 5 s); tests talk to it over
HTTPS with the admin token, or as another user through impersonation (the admin is in
``system:masters``). Manifests go in by server-side apply, the way ``kubectl apply --server-side``
sends them, so the API server's own validation, pruning and defaulting apply.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO.parent / "shared" / "k8s" / "cluster"
FIELD_MANAGER = "kai-deploy-tests"


def cluster_available() -> str | None:
    """None when a control plane can be started here, else why not (one line, for the skip)."""
    if not CLUSTER.exists() or not (CLUSTER.parent / "bin" / "kube-apiserver.xz").exists():
        return f"no Kubernetes binaries at {CLUSTER.parent / 'bin'}: e2e tests need ../shared/k8s"
    return None


class Kube:
    """HTTP access to one API server: raw requests, server-side apply, discovery of resource paths."""

    def __init__(self, *, url: str, token: str, headers: Mapping[str, str] | None = None) -> None:
        self.url = url
        self.token = token
        self.http = httpx.Client(
            base_url=url,
            verify=False,
            headers={"Authorization": f"Bearer {token}", **(headers or {})},
            timeout=30,
        )
        self._resources: dict[str, list[dict[str, Any]]] = {}

    def as_user(self, user: str) -> Kube:
        """A client that acts as ``user`` (e.g. ``system:serviceaccount:NS:NAME``) by impersonation."""
        return Kube(url=self.url, token=self.token, headers={"Impersonate-User": user})

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return self.http.request(method, path, **kwargs)

    def get(self, path: str, **kwargs: Any) -> dict[str, Any]:
        response = self.http.get(path, **kwargs)
        assert response.status_code == 200, f"GET {path}: {response.status_code} {response.text}"
        body: dict[str, Any] = response.json()
        return body

    def _api_resources(self, api_version: str, *, fresh: bool = False) -> list[dict[str, Any]]:
        if fresh or api_version not in self._resources:
            prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            response = self.http.get(prefix)
            self._resources[api_version] = response.json()["resources"] if response.status_code == 200 else []
        return self._resources[api_version]

    def path(self, api_version: str, kind: str, *, namespace: str | None = None, name: str | None = None) -> str:
        """The REST path of a kind (and of one object), found through discovery like kubectl does."""
        for fresh in (False, True):
            for res in self._api_resources(api_version, fresh=fresh):
                if res["kind"] == kind and "/" not in res["name"]:
                    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
                    if res["namespaced"]:
                        prefix += f"/namespaces/{namespace or 'default'}"
                    return f"{prefix}/{res['name']}" + (f"/{name}" if name else "")
        raise AssertionError(f"the API server does not serve {kind} in {api_version}")

    def object_path(self, obj: Mapping[str, Any]) -> str:
        meta = obj["metadata"]
        return self.path(obj["apiVersion"], obj["kind"], namespace=meta.get("namespace"), name=meta["name"])

    def apply(self, obj: Mapping[str, Any], *, subresource: str = "") -> httpx.Response:
        """Server-side apply of one object (or of its status with ``subresource="status"``)."""
        path = self.object_path(obj) + (f"/{subresource}" if subresource else "")
        return self.http.patch(
            path,
            params={"fieldManager": FIELD_MANAGER, "force": "true"},
            content=yaml.safe_dump(dict(obj)),
            headers={"Content-Type": "application/apply-patch+yaml"},
        )

    def apply_all(self, objects: Iterable[Mapping[str, Any]]) -> None:
        """Apply objects in order; CRDs are waited for until they are established."""
        for obj in objects:
            response = self.apply(obj)
            assert response.status_code in (200, 201), (
                f"apply {obj['kind']} {obj['metadata']['name']}: {response.status_code} {response.text}"
            )
            if obj["kind"] == "CustomResourceDefinition":
                self.wait_established(obj["metadata"]["name"])

    def wait_established(self, crd_name: str) -> None:
        """Wait (at most 30 s) until the CRD is established and its kinds are in discovery."""
        deadline = time.monotonic() + 30
        path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd_name}"
        while time.monotonic() < deadline:
            crd = self.get(path)
            conditions = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or []}
            if conditions.get("Established") == "True":
                group = crd["spec"]["group"]
                served = [v["name"] for v in crd["spec"]["versions"] if v["served"]]
                kind = crd["spec"]["names"]["kind"]
                if all(any(r["kind"] == kind for r in self._api_resources(f"{group}/{v}", fresh=True)) for v in served):
                    return
            time.sleep(0.2)
        raise AssertionError(f"CRD {crd_name} not established within 30 s")


def load_documents(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def start_cluster(run_dir: Path) -> Iterator[Kube]:
    """Start a control plane in ``run_dir``, yield an admin client, stop it afterwards."""
    reason = cluster_available()
    if reason:
        pytest.skip(reason)
    subprocess.run([sys.executable, str(CLUSTER), "up", str(run_dir)], check=True, capture_output=True)
    try:
        env = dict(line.split("=", 1) for line in (run_dir / "env").read_text().split())
        kube = Kube(url=env["KUBE_API_URL"], token=env["KUBE_TOKEN"])
        try:
            yield kube
        finally:
            kube.close()
    finally:
        subprocess.run([sys.executable, str(CLUSTER), "down", str(run_dir)], check=False, capture_output=True)
