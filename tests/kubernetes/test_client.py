"""Finding credentials like kubectl, the client-side rate limit, and the two error kinds."""

from __future__ import annotations

import asyncio
import random
import socket
from pathlib import Path

import pytest

from kai.kubernetes import client as kc
from kai.kubernetes import kubeconfig, resources
from kai.kubernetes.backoff import Backoff
from kai.kubernetes.ratelimit import TokenBucket
from tests.kubernetes.faultproxy import FaultProxy


def write_kubeconfig(
    path: Path,
    *,
    server: str = "https://127.0.0.1:6443",
    context: str = "local",
    cluster: str = "local",
    current: str | None = "local",
    extra: str = "",
) -> Path:
    current_line = f"current-context: {current}\n" if current else ""
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: {cluster}\n  cluster:\n    server: {server}\n    insecure-skip-tls-verify: true\n"
        "users:\n- name: admin\n  user:\n    token: t0ken\n"
        f"contexts:\n- name: {context}\n  context:\n    cluster: {cluster}\n    user: admin\n"
        f"{current_line}{extra}"
    )
    return path


@pytest.fixture
def no_ambient_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No KUBECONFIG, no in-cluster account, and an empty home (so no ~/.kube/config)."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


# -- where credentials come from ------------------------------------------------------------


def test_explicit_kubeconfig_and_context(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "config", context="other", current=None)
    config = kubeconfig.load(kubeconfig=path, context="other")
    assert (config.context_name, config.cluster.server, config.user and config.user.token) == (
        "other",
        "https://127.0.0.1:6443",
        "t0ken",
    )


@pytest.mark.parametrize(
    ("content", "context", "message"),
    [
        (None, None, r"kubeconfig .*/config: no such file"),
        ("clusters: [unclosed", None, r"kubeconfig .*/config: not valid YAML"),
        ("- just\n- a list\n", None, r"expected a mapping at the top"),
        ("clusters: {}\n", None, r"clusters: expected a list"),
        (
            "contexts:\n- name: x\n  context:\n    cluster: nowhere\ncurrent-context: x\n",
            None,
            r"context 'x': cluster 'nowhere' is not defined",
        ),
        ("contexts: []\n", None, r"no current-context set. To fix: pass --context NAME"),
        ("VALID", "staging", r"context 'staging' not found \(contexts: local\)"),
    ],
    ids=[
        "missing-file",
        "bad-yaml",
        "not-a-mapping",
        "clusters-not-a-list",
        "unknown-cluster",
        "no-current-context",
        "unknown-context",
    ],
)
def test_unusable_kubeconfig_is_a_clear_error(
    tmp_path: Path, content: str | None, context: str | None, message: str
) -> None:
    path = tmp_path / "config"
    if content == "VALID":
        write_kubeconfig(path)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(kubeconfig.KubeConfigError, match=message):
        kubeconfig.load(kubeconfig=path, context=context)


def test_kubeconfig_env_list_merges_first_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_ambient_credentials: None
) -> None:
    first = write_kubeconfig(tmp_path / "a", server="https://first:1", current="local")
    second = write_kubeconfig(
        tmp_path / "b", server="https://second:2", context="extra", cluster="other", current="extra"
    )
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{first}:{second}")
    assert kubeconfig.load().cluster.server == "https://first:1"  # first file's current-context and cluster
    assert kubeconfig.load(context="extra").cluster.server == "https://second:2"


def test_in_cluster_service_account(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_ambient_credentials: None
) -> None:
    account = tmp_path / "sa"
    account.mkdir()
    (account / "token").write_text("sa-token")
    (account / "namespace").write_text("kai-scheduler")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    config = kubeconfig.load(service_account_dir=account)
    assert (config.cluster.server, config.namespace) == ("https://10.96.0.1:443", "kai-scheduler")
    assert config.user is not None and config.user.token_file == str(account / "token")


def test_no_credentials_anywhere(no_ambient_credentials: None, tmp_path: Path) -> None:
    with pytest.raises(kubeconfig.KubeConfigError, match="no Kubernetes credentials found"):
        kubeconfig.load(service_account_dir=tmp_path / "no-account")


def test_unreadable_certificate_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(
        "clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n    certificate-authority: ca.pem\n"
        "contexts:\n- name: c\n  context:\n    cluster: c\ncurrent-context: c\n"
    )
    with pytest.raises(kubeconfig.KubeConfigError, match=r"cannot use the credentials for https://127\.0\.0\.1:1"):
        kc.connect(kubeconfig_path=path)


# -- rate limit and backoff (no server needed) ------------------------------------------------


def test_token_bucket_spends_the_burst_then_paces_at_qps() -> None:
    now = [0.0]
    bucket = TokenBucket(qps=2.0, burst=2, clock=lambda: now[0])
    assert [bucket.reserve() for _ in range(4)] == [0.0, 0.0, 0.5, 1.0]
    now[0] = 1.0  # two tokens refilled, both already promised to the waiters
    assert bucket.reserve() == 0.5
    assert TokenBucket(qps=0, burst=0).reserve() == 0.0  # unlimited


def test_backoff_doubles_up_to_the_cap_with_bounded_jitter() -> None:
    backoff = Backoff(initial=1.0, maximum=8.0, factor=2.0, jitter=0.5)
    rng = random.Random(7)
    for attempt, base in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (9, 8.0)]:
        assert base <= backoff.delay(attempt, rng) <= base * 1.5


# -- against the API server -----------------------------------------------------------------


async def test_api_error_carries_the_status(kube: kc.KubeClient, namespace: str) -> None:
    with pytest.raises(kc.ApiError) as caught:
        await kube.request("GET", resources.PODS.path(namespace=namespace, name="absent"))
    assert (caught.value.code, caught.value.reason, kc.is_transient(caught.value)) == (404, "NotFound", False)
    assert 'pods "absent" not found' in caught.value.message


async def test_no_server_is_unreachable_and_transient(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    path = write_kubeconfig(tmp_path / "config", server=f"https://127.0.0.1:{port}")
    async with kc.connect(kubeconfig_path=path) as client:
        with pytest.raises(kc.ApiUnreachable) as caught:
            await client.request("GET", resources.NODES.path())
    assert kc.is_transient(caught.value)


async def test_every_request_respects_qps_and_burst(fault_proxy: FaultProxy) -> None:
    qps, burst, count = 10.0, 3, 12
    options = kc.ClientOptions(qps=qps, burst=burst)
    async with kc.connect(kubeconfig_path=fault_proxy.kubeconfig, options=options) as client:
        await asyncio.gather(*(client.request("GET", resources.NAMESPACES.path()) for _ in range(count)))
        assert client.requests_sent == count
    arrivals = sorted(seen.at for seen in fault_proxy.requests)
    assert len(arrivals) == count
    # by the time request i arrives, at most burst + qps * elapsed tokens can have been spent
    # (one spare for the timer's resolution): a lower bound on time, so a slow machine only helps
    for index, at in enumerate(arrivals):
        assert index + 1 <= burst + qps * (at - arrivals[0]) + 1, (index, at - arrivals[0])
