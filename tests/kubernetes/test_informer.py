"""The informer against the real API server: it mirrors objects, and survives every way a watch breaks."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from lightkube.resources import core_v1

from kai.kubernetes import client as kc
from kai.kubernetes import resources
from kai.kubernetes.backoff import Backoff
from kai.kubernetes.informer import HeldEvents, Informer, InformerState, ResourceNotInstalled, RestartReason
from tests.kubernetes.controlplane import ControlPlane
from tests.kubernetes.faultproxy import FaultProxy
from tests.kubernetes.recorder import Recorder

CONFIG_MAPS = resources.ApiResource.of(core_v1.ConfigMap)
FAST = Backoff(initial=0.05, maximum=0.5)
LABELS = {"kai.test/informer": "yes"}
SELECTOR = "kai.test/informer=yes"  # namespaces get config maps of their own (kube-root-ca.crt): not ours


@contextlib.asynccontextmanager
async def running(informer: Informer) -> AsyncIterator[Informer]:
    task = asyncio.create_task(informer.run())
    try:
        async with asyncio.timeout(30):
            await asyncio.wait({task, asyncio.create_task(informer.wait_synced())}, return_when="FIRST_COMPLETED")
        if task.done():
            task.result()
        yield informer
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def put_config_map(kube: kc.KubeClient, namespace: str, name: str, value: str = "1") -> dict[str, Any]:
    return await kube.request(
        "POST",
        CONFIG_MAPS.path(namespace=namespace),
        body={
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "labels": LABELS},
            "data": {"v": value},
        },
    )


async def patch_config_map(kube: kc.KubeClient, namespace: str, name: str, value: str) -> None:
    await kube.request(
        "PATCH",
        CONFIG_MAPS.path(namespace=namespace, name=name),
        body={"data": {"v": value}},
        content_type=kc.MERGE_PATCH,
    )


async def delete_config_map(kube: kc.KubeClient, namespace: str, name: str) -> None:
    await kube.request("DELETE", CONFIG_MAPS.path(namespace=namespace, name=name))


class RestartLog:
    def __init__(self) -> None:
        self.reasons: list[RestartReason] = []

    def __call__(self, resource: resources.ApiResource, reason: RestartReason) -> None:
        self.reasons.append(reason)


async def test_lists_then_delivers_adds_updates_and_deletes(kube: kc.KubeClient, namespace: str) -> None:
    await put_config_map(kube, namespace, "before")
    recorder = Recorder()
    informer = Informer(kube, CONFIG_MAPS, recorder, namespace=namespace, label_selector=SELECTOR, backoff=FAST)
    async with running(informer):
        assert informer.state is InformerState.SYNCED
        assert recorder.events == [("add", "before")]
        assert recorder.objects["before"]["kind"] == "ConfigMap"  # filled in for list items
        await put_config_map(kube, namespace, "after")
        await patch_config_map(kube, namespace, "before", "2")
        await delete_config_map(kube, namespace, "after")
        await recorder.wait_for(lambda r: ("delete", "after") in r.events, "the delete of 'after'")
        assert recorder.events == [("add", "before"), ("add", "after"), ("update", "before"), ("delete", "after")]
        assert recorder.objects["before"]["data"] == {"v": "2"}
        assert set(informer.store) == {(namespace, "before")}
        assert informer.relists == 0


async def test_events_before_the_handler_is_attached_are_handed_over_in_order(
    kube: kc.KubeClient, namespace: str
) -> None:
    """`kai run` lists before its cache exists: what arrives meanwhile reaches the cache when it attaches."""
    await put_config_map(kube, namespace, "listed")
    held = HeldEvents()
    informer = Informer(kube, CONFIG_MAPS, held, namespace=namespace, label_selector=SELECTOR, backoff=FAST)
    async with running(informer):
        await put_config_map(kube, namespace, "watched")
        await patch_config_map(kube, namespace, "listed", "2")
        async with asyncio.timeout(30):
            while informer.store.get((namespace, "listed"), {}).get("data") != {"v": "2"}:
                await asyncio.sleep(0.05)
        recorder = Recorder()
        held.attach(recorder)
        assert recorder.events == [("add", "listed"), ("add", "watched"), ("update", "listed")]
        await delete_config_map(kube, namespace, "watched")
        await recorder.wait_for(lambda r: ("delete", "watched") in r.events, "the delete of 'watched'")
        assert recorder.objects == {"listed": informer.store[(namespace, "listed")]}


async def test_pages_a_large_list(kube: kc.KubeClient, namespace: str, fault_proxy: FaultProxy) -> None:
    for index in range(5):
        await put_config_map(kube, namespace, f"cm-{index}")
    recorder = Recorder()
    async with kc.connect(kubeconfig_path=fault_proxy.kubeconfig) as client:
        informer = Informer(
            client, CONFIG_MAPS, recorder, namespace=namespace, label_selector=SELECTOR, page_size=2, backoff=FAST
        )
        async with running(informer):
            assert sorted(name for _, name in recorder.events) == [f"cm-{index}" for index in range(5)]
            pages = [seen for seen in fault_proxy.requests if not seen.watch]
            assert [seen.query.get("continue") is not None for seen in pages] == [False, True, True]
            assert all(seen.query["limit"] == "2" for seen in pages)


async def test_survives_a_dropped_watch_without_relisting(
    kube: kc.KubeClient, namespace: str, fault_proxy: FaultProxy
) -> None:
    recorder = Recorder()
    log = RestartLog()
    async with kc.connect(kubeconfig_path=fault_proxy.kubeconfig) as client:
        informer = Informer(
            client, CONFIG_MAPS, recorder, namespace=namespace, label_selector=SELECTOR, backoff=FAST, on_restart=log
        )
        async with running(informer):
            await _wait_open_watch(fault_proxy)
            assert fault_proxy.drop_watches() == 1
            await put_config_map(kube, namespace, "while-reconnecting")
            await recorder.wait_for(lambda r: ("add", "while-reconnecting") in r.events, "the add after the drop")
            assert log.reasons == [RestartReason.DROPPED]
            assert informer.relists == 0
            assert fault_proxy.count(method="GET", watch=False) == 1  # the one initial list


@pytest.mark.parametrize("as_event", [True, False], ids=["error-event", "http-status"])
async def test_410_relists_and_delivers_what_was_missed(
    kube: kc.KubeClient, namespace: str, fault_proxy: FaultProxy, as_event: bool
) -> None:
    for name in ("kept", "changed", "deleted-1", "deleted-2"):
        await put_config_map(kube, namespace, name)
    recorder = Recorder()
    log = RestartLog()
    async with kc.connect(kubeconfig_path=fault_proxy.kubeconfig) as client:
        informer = Informer(
            client, CONFIG_MAPS, recorder, namespace=namespace, label_selector=SELECTOR, backoff=FAST, on_restart=log
        )
        async with running(informer):
            await _wait_open_watch(fault_proxy)
            mark = len(recorder.events)
            fault_proxy.hold_watches()
            fault_proxy.drop_watches()
            # while the informer is cut off: two deletes, a change and an add it must not miss
            await delete_config_map(kube, namespace, "deleted-1")
            await delete_config_map(kube, namespace, "deleted-2")
            await patch_config_map(kube, namespace, "changed", "2")
            await put_config_map(kube, namespace, "added")
            fault_proxy.gone_next_watches(1, as_event=as_event)
            fault_proxy.release_watches()
            await recorder.wait_for(lambda r: len(r.since(mark)) >= 4, "four changes after the 410")
            assert recorder.since(mark) == [
                ("delete", "deleted-1"),
                ("delete", "deleted-2"),
                ("add", "added"),  # then the fresh list in its order (by name)
                ("update", "changed"),
            ]
            assert recorder.objects["changed"]["data"] == {"v": "2"}
            assert informer.relists == 1
            assert log.reasons == [RestartReason.DROPPED, RestartReason.GONE]
            assert set(informer.store) == {(namespace, n) for n in ("kept", "changed", "added")}


async def test_survives_an_apiserver_restart(control_plane: ControlPlane, kube: kc.KubeClient, namespace: str) -> None:
    control_plane.require_managed()
    recorder = Recorder()
    async with kc.connect(kubeconfig_path=control_plane.kubeconfig) as client:
        informer = Informer(client, CONFIG_MAPS, recorder, namespace=namespace, label_selector=SELECTOR, backoff=FAST)
        async with running(informer):
            await asyncio.to_thread(control_plane.restart_apiserver)
            await put_config_map(kube, namespace, "after-restart")
            await recorder.wait_for(lambda r: ("add", "after-restart") in r.events, "the add after the restart")
            assert informer.watch_restarts >= 1


async def test_optional_kind_not_installed_then_installed(kube: kc.KubeClient, namespace: str) -> None:
    group = f"{namespace}.kai.test"
    widgets = resources.ApiResource(group=group, version="v1", plural="widgets", kind="Widget", namespaced=True)
    recorder = Recorder()
    informer = Informer(kube, widgets, recorder, optional=True, not_installed_retry=0.2, backoff=FAST)
    async with running(informer):
        assert informer.state is InformerState.NOT_INSTALLED
        assert informer.synced.is_set()
        await _install_widget_crd(kube, group)
        try:
            await _create_widget(kube, widgets, namespace, "w1")
            await recorder.wait_for(lambda r: ("add", "w1") in r.events, "the widget once the CRD exists")
            assert informer.state is InformerState.SYNCED  # type: ignore[comparison-overlap]  # changed by the watch
        finally:
            await kube.request("DELETE", resources.CUSTOM_RESOURCE_DEFINITIONS.path(name=f"widgets.{group}"))


async def test_required_kind_not_installed_is_an_error(kube: kc.KubeClient) -> None:
    missing = resources.ApiResource(
        group="absent.kai.test", version="v1", plural="things", kind="Thing", namespaced=False
    )
    informer = Informer(kube, missing, Recorder())
    with pytest.raises(ResourceNotInstalled, match=r"things\.absent\.kai\.test"):
        await informer.run()


async def _wait_open_watch(proxy: FaultProxy) -> None:
    async with asyncio.timeout(30):
        while proxy.open_watches == 0:
            await asyncio.sleep(0.02)


async def _install_widget_crd(kube: kc.KubeClient, group: str) -> None:
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    await kube.request(
        "POST",
        resources.CUSTOM_RESOURCE_DEFINITIONS.path(),
        body={
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"widgets.{group}"},
            "spec": {
                "group": group,
                "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}],
            },
        },
    )


async def _create_widget(kube: kc.KubeClient, widgets: resources.ApiResource, namespace: str, name: str) -> None:
    body = {"apiVersion": widgets.api_version, "kind": "Widget", "metadata": {"name": name}}
    async with asyncio.timeout(30):
        while True:  # the CRD takes a moment to be served
            try:
                await kube.request("POST", widgets.path(namespace=namespace), body=body)
                return
            except kc.ApiError as err:
                if err.code != 404:
                    raise
                await asyncio.sleep(0.1)
