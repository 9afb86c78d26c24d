"""The CRDs `kai install crds` prints, on a real API server: installed as printed, shaped as KAI's,
accepting the manifests users apply for KAI, and with working status subresources."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.kube import REPO, Kube, load_documents

pytestmark = pytest.mark.e2e

MANIFESTS = Path(__file__).resolve().parent / "manifests"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
MERGE = {"Content-Type": "application/merge-patch+json"}


@pytest.fixture(scope="module")
def crds(kube: Kube) -> Kube:
    """The cluster after `kai install crds | kubectl apply -f -` (the printed YAML, applied as is)."""
    printed = subprocess.run(
        [sys.executable, "-m", "kai.cli.main", "install", "crds"], check=True, capture_output=True, text=True
    ).stdout
    kube.apply_all(load_documents(printed))
    return kube


def documents(name: str, kind: str | None = None) -> list[dict[str, Any]]:
    docs = load_documents((MANIFESTS / name).read_text())
    return [d for d in docs if kind is None or d["kind"] == kind]


def spec_of(kube: Kube, obj: dict[str, Any]) -> Any:
    return kube.get(kube.object_path(obj))["spec"]


def test_crds_have_kais_group_versions_scope_names_and_status_subresource(crds: Kube) -> None:
    queue = crds.get(f"{CRDS}/queues.scheduling.run.ai")["spec"]
    assert (queue["group"], queue["scope"]) == ("scheduling.run.ai", "Cluster")
    assert queue["names"] == {"kind": "Queue", "listKind": "QueueList", "plural": "queues", "singular": "queue"}
    [v2] = queue["versions"]
    assert (v2["name"], v2["served"], v2["storage"], v2["subresources"]) == ("v2", True, True, {"status": {}})
    columns = [(c["name"], c["jsonPath"]) for c in v2["additionalPrinterColumns"]]
    assert columns == [
        ("Priority", ".spec.priority"),
        ("Parent", ".spec.parentQueue"),
        ("Children", ".status.childQueues"),
        ("DisplayName", ".spec.displayName"),
    ]

    podgroup = crds.get(f"{CRDS}/podgroups.scheduling.run.ai")["spec"]
    assert (podgroup["group"], podgroup["scope"]) == ("scheduling.run.ai", "Namespaced")
    assert podgroup["names"]["shortNames"] == ["pg"]
    [v2alpha2] = podgroup["versions"]
    assert (v2alpha2["name"], v2alpha2["served"], v2alpha2["storage"]) == ("v2alpha2", True, True)
    assert v2alpha2["subresources"] == {"status": {}}
    assert "additionalPrinterColumns" not in v2alpha2


def test_discovery_offers_the_pg_short_name_for_kubectl(crds: Kube) -> None:
    resources = {r["name"]: r for r in crds.get("/apis/scheduling.run.ai/v2alpha2")["resources"]}
    assert resources["podgroups"]["shortNames"] == ["pg"]
    assert resources["podgroups"]["namespaced"] is True
    assert "podgroups/status" in resources
    queues = {r["name"]: r for r in crds.get("/apis/scheduling.run.ai/v2")["resources"]}
    assert queues["queues"]["namespaced"] is False
    assert "queues/status" in queues


def test_queues_from_the_install_guides_are_accepted_unchanged(crds: Kube) -> None:
    seeds = documents("seed-queues.yaml")
    ray_guide = REPO / "tests" / "sim_controllers" / "manifests" / "ray-cluster.kai-scheduler.yaml"
    seeds += [d for d in load_documents(ray_guide.read_text()) if d["kind"] == "Queue"]
    crds.apply_all(seeds)
    for queue in seeds:
        assert spec_of(crds, queue) == queue["spec"]


def test_every_kai_field_is_accepted_and_kept(crds: Kube) -> None:
    objects = documents("every-field.yaml")
    crds.apply_all(objects)
    for obj in objects:
        assert spec_of(crds, obj) == obj["spec"], f"{obj['kind']} {obj['metadata']['name']} was pruned or changed"


def test_kubectl_get_queues_shows_priority_parent_children_and_display_name(crds: Kube) -> None:
    crds.apply_all(documents("every-field.yaml", "Queue"))
    response = crds.request(
        "PATCH",
        "/apis/scheduling.run.ai/v2/queues/research/status",
        json={"status": {"childQueues": ["research-vision"]}},
        headers=MERGE,
    )
    assert response.status_code == 200, response.text
    table = crds.get("/apis/scheduling.run.ai/v2/queues", headers=TABLE)
    # `kubectl get queues` prints these columns: NAME PRIORITY PARENT CHILDREN DISPLAYNAME (as with KAI).
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Priority", "Parent", "Children", "DisplayName"]
    rows = {row["cells"][0]: row["cells"][1:5] for row in table["rows"]}
    assert rows["research"] == ["150", None, '["research-vision"]', "Research department"]
    assert rows["research-vision"] == [None, "research", None, None]


def test_queue_status_takes_kais_fields_and_fair_share_through_the_status_subresource(crds: Kube) -> None:
    crds.apply_all(documents("every-field.yaml", "Queue"))
    status = {
        "childQueues": ["research-vision"],
        "allocated": {"gpu": "2.5", "cpu": "16000", "memory": 64000},
        "allocatedNonPreemptible": {"gpu": "1", "cpu": "4000", "memory": "1Gi"},
        "requested": {"gpu": "6", "cpu": "1500m", "memory": "128000"},
        "fairShare": {"gpu": "3.25", "cpu": "32000", "memory": "256000"},
        "conditions": [{"type": "OverQuota", "status": "True", "lastTransitionTime": "2026-01-02T03:04:05Z"}],
    }
    path = "/apis/scheduling.run.ai/v2/queues/research/status"
    response = crds.request("PATCH", path, json={"status": status}, headers=MERGE)
    assert response.status_code == 200, response.text
    assert crds.get(path)["status"] == status


def test_podgroup_status_is_written_through_the_subresource_only(crds: Kube) -> None:
    crds.apply_all(documents("every-field.yaml"))
    path = "/apis/scheduling.run.ai/v2alpha2/namespaces/default/podgroups/pg-train-0f3c"
    status = {
        "phase": "Pending",
        "pending": 4,
        "running": 0,
        "succeeded": 0,
        "failed": 0,
        "conditions": [{"type": "Scheduled", "status": "False", "transitionID": "3", "reason": "Waiting"}],
        "resourcesStatus": {
            "allocated": {},
            "allocatedNonPreemptible": {"gpu": 0},
            "requested": {"gpu": "4", "cpu": "8000", "memory": "64000", "nvidia.com/gpu": 4},
        },
        "schedulingConditions": [
            {
                "type": "UnschedulableOnNodePool",
                "nodePool": "default",
                "status": "True",
                "transitionID": "7",
                "lastTransitionTime": "2026-01-02T03:04:05Z",
                "reason": "Unschedulable",
                "message": "queue research-vision would exceed its gpu limit",
                "reasons": [
                    {
                        "reason": "OverLimit",
                        "message": "queue research-vision would exceed its gpu limit (4)",
                        "details": {
                            "queueDetails": {
                                "name": "research-vision",
                                "queueRequestedResources": {"gpu": "6"},
                                "queueDeservedResources": {"gpu": "1"},
                                "queueAllocatedResources": {"gpu": "2"},
                                "queueAllocatedNonPreemptibleResources": {"gpu": "0"},
                                "queueResourceLimits": {"gpu": "4", "cpu": "-1"},
                                "podGroupRequestedResources": {"gpu": "4", "memory": "64000"},
                                "podGroupRequestedNonPreemptibleResources": {},
                            }
                        },
                    },
                    {"reason": "NonPreemptibleOverQuota", "message": "over quota"},
                ],
            }
        ],
    }
    # A status sent with the object itself is dropped: only the status subresource writes it.
    response = crds.request(
        "PATCH",
        path,
        json={"metadata": {"labels": {"kai.scheduler/queue": "research-vision"}}, "status": status},
        headers=MERGE,
    )
    assert response.status_code == 200, response.text
    assert "status" not in crds.get(path) or not crds.get(path)["status"]

    response = crds.request("PATCH", f"{path}/status", json={"status": status}, headers=MERGE)
    assert response.status_code == 200, response.text
    assert crds.get(path)["status"] == status


@pytest.mark.parametrize(
    ("kind", "patch", "field"),
    [
        ("PodGroup", {"spec": {"preemptibility": "sometimes"}}, "spec.preemptibility"),
        ("PodGroup", {"spec": {"minMember": 0}}, "spec.minMember"),
        ("PodGroup", {"spec": {"minMember": "four"}}, "spec.minMember"),
        ("PodGroup", {"spec": {"subGroups": [{"minMember": 1}]}}, "spec.subGroups[0].name"),
        ("PodGroup", {"spec": {"subGroups": [{"name": "a", "minMember": -1}]}}, "spec.subGroups[0].minMember"),
        ("Queue", {"spec": {"resources": {"gpu": {"quota": "lots"}}}}, "spec.resources.gpu.quota"),
        ("Queue", {"spec": {"priority": 1.5}}, "spec.priority"),
    ],
)
def test_manifests_kais_crds_reject_are_rejected_naming_the_field(
    crds: Kube, kind: str, patch: dict[str, Any], field: str
) -> None:
    if kind == "Queue":
        obj = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "bad"}, **patch}
    else:
        obj = {
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": {"name": "bad", "namespace": "default"},
            **patch,
        }
    collection = crds.path(obj["apiVersion"], obj["kind"], namespace=obj["metadata"].get("namespace"))
    response = crds.request("POST", collection, json=obj)  # as `kubectl create` / client-side apply send it
    assert response.status_code == 422, response.text
    assert field in response.json()["message"]
