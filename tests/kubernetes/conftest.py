"""Fixtures for every test that talks to a real Kubernetes API server (the team's end-to-end suite).

Put such tests under `tests/kubernetes/` (subdirectories inherit these fixtures). A test that uses
`control_plane` (directly or through `kube`, `namespace`, `fault_proxy`) is marked `e2e`
automatically, so `pytest -m "not e2e"` leaves them all out.

* `control_plane` (session): ONE API server for the whole run. By default
  `../shared/k8s/cluster up DIR --controllers` (etcd, kube-apiserver, kube-controller-manager on
  loopback, stopped at the end of the session). With `KAI_E2E_KUBECONFIG=PATH` the suite runs
  against that cluster instead, and tests that restart or freeze the API server skip. Where the
  binaries are absent every e2e test skips, and one line at the end of the run says why; with
  `KAI_E2E_REQUIRED=1` (set by `.ci/run` when `../shared/k8s/bin` exists) they fail instead.
* `kube`: an admin `KubeClient` straight to the API server (no rate limit).
* `namespace`: a fresh namespace for the test, deleted afterwards; create the test's objects in it
  (cluster-scoped objects such as Nodes and Leases need names unique to the test).
* `fault_proxy`: a `FaultProxy` in front of the API server (see `faultproxy.py`); point the code
  under test at `fault_proxy.kubeconfig`.

`objects.py` creates Ready GPU nodes and plays the kubelet; `ControlPlane.restart_apiserver()` and
`ControlPlane.frozen()` restart or SIGSTOP the API server.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from kai.kubernetes import client as kc
from kai.kubernetes import resources
from tests.kubernetes.controlplane import ControlPlane, missing_binaries
from tests.kubernetes.faultproxy import FaultProxy

_skipped_because: list[str] = []


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that need the API server `e2e` and run them last, so that the control plane
    (started by the first of them) does not compete for the CPU with the rest of the suite."""
    needs_server = [item for item in items if "control_plane" in getattr(item, "fixturenames", ())]
    for item in needs_server:
        item.add_marker(pytest.mark.e2e)
    chosen = set(needs_server)
    items[:] = [item for item in items if item not in chosen] + needs_server


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _skipped_because:
        terminalreporter.write_line(f"e2e tests skipped: {_skipped_because[0]}", yellow=True)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    external = os.environ.get("KAI_E2E_KUBECONFIG")
    if external:
        yield ControlPlane.external(Path(external))
        return
    why = missing_binaries()
    if why is not None:
        if os.environ.get("KAI_E2E_REQUIRED") == "1":
            pytest.fail(f"KAI_E2E_REQUIRED=1 but the e2e suite cannot run: {why}")
        _skipped_because.append(f"{why} (set KAI_E2E_KUBECONFIG to use another cluster)")
        pytest.skip(_skipped_because[0])
    plane = ControlPlane.start(tmp_path_factory.mktemp("k8s"))
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture
async def kube(control_plane: ControlPlane) -> AsyncIterator[kc.KubeClient]:
    async with kc.connect(kubeconfig_path=control_plane.kubeconfig, options=kc.ClientOptions(qps=0)) as client:
        yield client


@pytest.fixture
async def namespace(kube: kc.KubeClient, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    stem = "".join(ch if ch.isalnum() else "-" for ch in request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{stem}-{uuid.uuid4().hex[:6]}"
    await kube.request(
        "POST", resources.NAMESPACES.path(), body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    yield name
    try:
        await kube.request("DELETE", resources.NAMESPACES.path(name=name))
    except kc.ApiError as err:
        if err.code != 404:
            raise


@pytest.fixture
async def fault_proxy(control_plane: ControlPlane, tmp_path: Path) -> AsyncIterator[FaultProxy]:
    async with FaultProxy(control_plane.kubeconfig, tmp_path) as proxy:
        yield proxy
