"""Unit tests for the pod grouper's helpers: queue explanations, defaults ConfigMap, registry, owner walk."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from kai.podgrouper import base, config, grouping, model, queues, registry, top_owner

# The queues of the KubeRay KAI samples plus KAI's Helm default queues.
QUEUES = {"default-parent-queue": False, "default-queue": True, "department-1": False, "team-a": True}
PARENTS: Mapping[str, str | None] = {
    "default-parent-queue": None,
    "default-queue": "default-parent-queue",
    "department-1": None,
    "team-a": "department-1",
}


def test_missing_queue_lists_the_leaf_queues() -> None:
    assert queues.explain_missing_queue(queue="team-x", existing_queues=QUEUES, label_key="kai.scheduler/queue") == (
        'queue "team-x" does not exist; create it or set the kai.scheduler/queue label to one of: default-queue, team-a'
    )


def test_non_leaf_queue_names_its_children_and_leaves() -> None:
    message = queues.explain_missing_queue(
        queue="department-1", existing_queues=QUEUES, label_key="kai.scheduler/queue", parents=PARENTS
    )
    assert message == (
        'queue "department-1" is not a leaf queue (it has child queues team-a); set the kai.scheduler/queue '
        "label to one of its leaf queues: team-a"
    )


def test_non_leaf_queue_suggests_leaves_at_every_depth_sorted() -> None:
    existing = {"org": False, "dept-b": False, "dept-a": False, "z-team": True, "a-team": True, "solo": True}
    parents: Mapping[str, str | None] = {
        "org": None,
        "dept-b": "org",
        "dept-a": "org",
        "z-team": "dept-a",
        "a-team": "dept-b",
        "solo": "org",
    }
    message = queues.explain_missing_queue(queue="org", existing_queues=existing, label_key="q", parents=parents)
    assert message == (
        'queue "org" is not a leaf queue (it has child queues dept-a, dept-b, solo); set the q label to one '
        "of its leaf queues: a-team, solo, z-team"
    )


def test_non_leaf_queue_without_hierarchy_lists_all_leaves() -> None:
    message = queues.explain_missing_queue(queue="department-1", existing_queues=QUEUES)
    assert message == (
        'queue "department-1" is not a leaf queue; only leaf queues take jobs. Set the kai.scheduler/queue '
        "label to one of the leaf queues: default-queue, team-a"
    )


def test_leaf_queue_needs_no_explanation() -> None:
    assert queues.explain_missing_queue(queue="team-a", existing_queues=QUEUES) == ""


def test_missing_queue_when_no_leaf_queue_exists() -> None:
    assert queues.explain_missing_queue(queue="q", existing_queues={"root": False}) == (
        'queue "q" does not exist and there are no leaf queues; create a Queue and set the '
        "kai.scheduler/queue label to its name"
    )


def test_parse_kind_defaults_reads_kai_configmap_entries() -> None:
    text = (
        '[{"typeName": "Deployment", "group": "apps", "priorityName": "inference",'
        ' "preemptibility": "non-preemptible"}, {"typeName": "TrainJob", "priorityName": "train"}]'
    )
    assert config.parse_kind_defaults(text=text) == (
        config.KindDefault(
            type_name="Deployment", group="apps", priority_name="inference", preemptibility="non-preemptible"
        ),
        config.KindDefault(type_name="TrainJob", priority_name="train"),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "the defaults ConfigMap 'types' value is not valid JSON"),
        ('{"typeName": "Job"}', "must be a JSON list of objects"),
        ('[{"priorityName": "train"}]', "entry 0 needs a typeName"),
        ('[{"typeName": "Job", "preemptibility": "sometimes"}]', "has preemptibility 'sometimes'"),
    ],
)
def test_parse_kind_defaults_rejects_bad_input(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        config.parse_kind_defaults(text=text)


def test_kind_default_prefers_the_exact_group_and_last_duplicate() -> None:
    cfg = config.GrouperConfig(
        kind_defaults=(
            config.KindDefault(type_name="Service", priority_name="build"),
            config.KindDefault(type_name="Service", group="serving.knative.dev", priority_name="inference"),
            config.KindDefault(type_name="Service", group="serving.knative.dev", priority_name="train"),
        )
    )
    exact = cfg.kind_default(group="serving.knative.dev", kind="Service")
    assert exact is not None and exact.priority_name == "train"
    any_group = cfg.kind_default(group="example.com", kind="Service")
    assert any_group is not None and any_group.priority_name == "build"
    assert cfg.kind_default(group="apps", kind="Deployment") is None


def test_registry_keys_follow_the_group_slash_kind_convention() -> None:
    assert registry.registered_kinds() == (
        "/Pod",
        "apps/Deployment",
        "apps/ReplicaSet",
        "apps/StatefulSet",
        "batch/CronJob",
        "batch/Job",
        "jobset.x-k8s.io/JobSet",
        "kubeflow.org/JAXJob",
        "kubeflow.org/MPIJob",
        "kubeflow.org/Notebook",
        "kubeflow.org/PyTorchJob",
        "kubeflow.org/TFJob",
        "kubeflow.org/XGBoostJob",
        "leaderworkerset.x-k8s.io/LeaderWorkerSet",
        "ray.io/RayCluster",
        "ray.io/RayJob",
        "ray.io/RayService",
    )


def test_registry_ignores_the_version_and_falls_back_to_default() -> None:
    v1alpha1 = {"apiVersion": "ray.io/v1alpha1", "kind": "RayCluster"}
    assert registry.grouper_for(top_owner=v1alpha1).name == "raycluster"
    unknown = {"apiVersion": "example.com/v1", "kind": "RayCluster"}
    assert registry.grouper_for(top_owner=unknown) is registry.DEFAULT_GROUPER


def _pod(**metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", **metadata},
    }


def test_pod_without_owner_needs_no_lookup() -> None:
    calls: list[tuple[str, str, str, str]] = []

    def lookup(namespace: str, api_version: str, kind: str, name: str) -> Mapping[str, Any] | None:
        calls.append((namespace, api_version, kind, name))
        return None

    pod = _pod()
    chain = top_owner.owner_chain(pod=pod, lookup=lookup)
    assert chain == top_owner.OwnerChain(pod=pod)
    assert isinstance(chain, top_owner.OwnerChain) and chain.top_owner is pod
    assert calls == []


def test_owner_walk_looks_up_each_owner_in_the_pod_namespace() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ns", "uid": "d1"},
    }
    replica_set = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": "rs",
            "namespace": "ns",
            "uid": "rs1",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "d1"}],
        },
    }
    store = {("ReplicaSet", "rs"): replica_set, ("Deployment", "d"): deployment}
    calls: list[tuple[str, str, str, str]] = []

    def lookup(namespace: str, api_version: str, kind: str, name: str) -> Mapping[str, Any] | None:
        calls.append((namespace, api_version, kind, name))
        return store.get((kind, name))

    pod = _pod(ownerReferences=[{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs1"}])
    chain = top_owner.owner_chain(pod=pod, lookup=lookup)
    assert chain == top_owner.OwnerChain(pod=pod, owners=(replica_set, deployment))
    assert calls == [("ns", "apps/v1", "ReplicaSet", "rs"), ("ns", "apps/v1", "Deployment", "d")]


def test_group_pod_is_deterministic_and_leaves_inputs_alone() -> None:
    pod = _pod(labels={"kai.scheduler/queue": "team-a", "kai.scheduler/node-pool": "pool-1"})
    chain = top_owner.owner_chain(pod=pod, lookup=lambda *_: None)
    assert isinstance(chain, top_owner.OwnerChain)
    cfg = config.GrouperConfig()
    first = grouping.group_pod(pod=pod, chain=chain, config=cfg)
    second = grouping.group_pod(pod=pod, chain=chain, config=cfg, view=base.EMPTY_VIEW)
    assert first == second
    assert isinstance(first, model.PodGroupMetadata)
    assert first.labels == {"kai.scheduler/queue": "team-a", "kai.scheduler/node-pool": "pool-1"}
    assert pod["metadata"]["labels"] == {"kai.scheduler/queue": "team-a", "kai.scheduler/node-pool": "pool-1"}


def test_node_pool_label_already_on_the_owner_is_kept() -> None:
    owner = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": "s",
            "namespace": "ns",
            "uid": "s1",
            "labels": {"kai.scheduler/node-pool": "owner-pool"},
        },
    }
    pod = _pod(
        labels={"kai.scheduler/node-pool": "pod-pool"},
        ownerReferences=[{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "s", "uid": "s1"}],
    )
    chain = top_owner.owner_chain(pod=pod, lookup=lambda *_: owner)
    assert isinstance(chain, top_owner.OwnerChain)
    result = grouping.group_pod(pod=pod, chain=chain, config=config.GrouperConfig())
    assert isinstance(result, model.PodGroupMetadata)
    assert result.labels["kai.scheduler/node-pool"] == "owner-pool"


@pytest.mark.parametrize(
    ("uid", "rendered"),
    [("123", '"123"'), ("true", '"true"'), ("a1-b2", "a1-b2"), ("", '""'), ("has space", '"has space"')],
)
def test_top_owner_metadata_quotes_ambiguous_yaml_scalars(uid: str, rendered: str) -> None:
    owner = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "uid": uid}}
    assert base.top_owner_metadata(owner) == f'name: p\nuid: {rendered}\ngroup: ""\nversion: v1\nkind: Pod\n'
