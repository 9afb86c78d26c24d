"""The registry, the name source, and the promise that no controller ever raises."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from kai.sim import controllers, output, reconcile
from kai.sim.controllers import model, names
from kai.sim.engine import Simulation

from .cluster import load, pod_names, pods, queue, remove, settle, simulate

EXPECTED_KEYS = {
    "apps/Deployment",
    "apps/ReplicaSet",
    "apps/StatefulSet",
    "batch/Job",
    "batch/CronJob",
    "ray.io/RayCluster",
    "ray.io/RayJob",
    "ray.io/RayService",
    "kubeflow.org/PyTorchJob",
    "kubeflow.org/TFJob",
    "kubeflow.org/XGBoostJob",
    "kubeflow.org/JAXJob",
    "kubeflow.org/MPIJob",
    "kubeflow.org/Notebook",
    "jobset.x-k8s.io/JobSet",
    "leaderworkerset.x-k8s.io/LeaderWorkerSet",
}


def test_registry_covers_the_contract_kinds() -> None:
    assert set(controllers.CONTROLLERS) == EXPECTED_KEYS
    for key, controller in controllers.CONTROLLERS.items():
        assert key.endswith("/" + controller.kind)


@pytest.mark.parametrize(
    ("api_version", "kind", "key", "restarts"),
    [
        ("v1", "Pod", "core/Pod", False),
        ("apps/v1", "ReplicaSet", "apps/ReplicaSet", True),
        ("apps/v1", "Deployment", "apps/Deployment", False),
        ("batch/v1", "Job", "batch/Job", True),
        ("ray.io/v1", "RayCluster", "ray.io/RayCluster", True),
        ("ray.io/v1", "RayJob", "ray.io/RayJob", False),
        ("kubeflow.org/v2beta1", "MPIJob", "kubeflow.org/MPIJob", True),
        ("scheduling.run.ai/v2", "Queue", "scheduling.run.ai/Queue", False),
    ],
)
def test_registry_key_and_restarting_owners(api_version: str, kind: str, key: str, restarts: bool) -> None:
    assert controllers.registry_key(api_version=api_version, kind=kind) == key
    assert controllers.is_restarting_owner(api_version=api_version, kind=kind) is restarts
    obj = {"apiVersion": api_version, "kind": kind}
    assert (controllers.controller_for(obj) is not None) is (key in EXPECTED_KEYS)


def test_name_source_is_deterministic_per_scope_and_realistic() -> None:
    first, second = controllers.SeededNameSource(seed="s"), controllers.SeededNameSource(seed="s")
    a = [first.suffix(scope="x") for _ in range(5)]
    first.suffix(scope="other")  # another scope does not disturb x's sequence
    a.append(first.suffix(scope="x"))
    b = [second.suffix(scope="x") for _ in range(6)]
    assert a == b and len(set(a)) == 6
    assert all(re.fullmatch(f"[{names.ALPHABET}]{{5}}", s) for s in a)
    uid = first.uid(scope="x")
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", uid)
    assert uid == second.uid(scope="x")


def test_template_hash_has_the_pod_template_hash_shape() -> None:
    value = names.template_hash({"spec": {"containers": [{"name": "a"}]}})
    assert re.fullmatch("[4-9bcdf]{1,10}", value)
    assert value != names.template_hash({"spec": {"containers": [{"name": "a"}]}}, collision_count=1)
    assert names.safe_encode("0123456789") == "456789bcdf"


def every_example() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for file in (
        "ray-cluster.kai-scheduler.yaml",
        "pytorch-job.yaml",
        "batch-job.yaml",
        "vllm-deployments.yaml",
        "kai-batch-examples.yaml",
        "leaderworkerset.yaml",
    ):
        docs.extend(d for d in load(file) if d["kind"] != "Queue")
    return docs


def mutations(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    """Every (path, replacement) that swaps one node of the spec for a value of the wrong type."""
    result: list[tuple[tuple[Any, ...], Any]] = []
    wrong: list[Any] = [None, "x", -3, [], {"unexpected": True}]
    if isinstance(value, dict):
        for key, item in value.items():
            result.extend(((*path, key), w) for w in wrong)
            result.extend(mutations(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            result.extend(((*path, index), w) for w in wrong)
            result.extend(mutations(item, (*path, index)))
    return result


def test_no_controller_raises_on_malformed_specs() -> None:
    checked = 0
    for doc in every_example():
        for path, replacement in mutations(doc["spec"]):
            broken = copy.deepcopy(doc)
            broken["metadata"]["uid"] = "uid-broken"
            target: Any = broken["spec"]
            for step in path[:-1]:
                target = target[step]
            target[path[-1]] = replacement
            controller = controllers.controller_for(broken)
            assert controller is not None
            result = controller.reconcile(owner=broken, children=(), names=controllers.SeededNameSource())
            assert isinstance(result, model.Reconciliation)
            for error in result.errors:
                namespace = doc["metadata"].get("namespace", "default")
                prefix = f"{doc['kind']} {namespace}/{doc['metadata']['name']}: {error.field}: "
                assert error.field and error.hint and str(error).startswith(prefix)
                assert not result.changed
            checked += 1
    assert checked > 1000


def test_owner_without_uid_or_spec_is_an_error_value() -> None:
    doc = load("batch-job.yaml")[0]
    controller = controllers.controller_for(doc)
    assert controller is not None
    result = controller.reconcile(owner=doc, children=(), names=controllers.SeededNameSource())
    assert [e.field for e in result.errors] == ["metadata.uid"]

    doc["metadata"]["uid"] = "u"
    doc["spec"] = ["not", "a", "mapping"]
    result = controller.reconcile(owner=doc, children=(), names=controllers.SeededNameSource())
    (error,) = result.errors
    assert (error.kind, error.name, error.field) == ("Job", "batch-job", "spec")
    assert "must be a mapping" in error.message


def every_example_cluster() -> Simulation:
    """Every example at once, with the queues they name, run until nothing changes."""
    sim = simulate([queue("test"), queue("team-a"), *every_example()])
    settle(sim)
    return sim


def test_reconcile_does_not_mutate_its_inputs() -> None:
    sim = every_example_cluster()
    assert len(pods(sim)) > 20 and {p["status"]["phase"] for p in pods(sim)} == {"Running"}
    index = reconcile.children_index(sim)
    checked = 0
    for workload in list(sim.workloads.values()):
        owner = workload.raw
        controller = controllers.controller_for(owner)
        assert controller is not None
        children = index.get(workload.meta.uid, [])
        owner_before, children_before = copy.deepcopy(owner), copy.deepcopy(children)
        result = controller.reconcile(owner=owner, children=children, names=controllers.SeededNameSource(), now=sim.now)
        assert owner == owner_before and children == children_before
        assert not result.changed, workload.name  # settled: nothing left to do
        checked += 1
    assert checked == len(sim.workloads) > 10


def test_large_replicaset_is_fast_enough() -> None:
    doc = copy.deepcopy(load("vllm-deployments.yaml")[0])
    doc.update(kind="ReplicaSet", metadata={"name": "big", "uid": "uid-big"})
    doc["spec"]["replicas"] = 5000
    controller = controllers.controller_for(doc)
    assert controller is not None
    result = controller.reconcile(owner=doc, children=(), names=controllers.SeededNameSource())
    assert len(result.create) == 5000
    assert len({pod["metadata"]["name"] for pod in result.create}) == 5000


def test_whole_simulation_is_byte_identical_across_runs() -> None:
    dumps = []
    for _ in range(2):
        sim = every_example_cluster()
        remove(sim, pod_names(sim)[0])
        settle(sim)
        state = {
            "sim": output.build(sim),
            "pods": pods(sim),
            "workloads": sorted((list(k), w.raw) for k, w in sim.workloads.items()),
        }
        dumps.append(json.dumps(state, sort_keys=True))
    assert dumps[0] == dumps[1]
