"""deploy/kai.yaml on a real API server: it installs, and its ServiceAccount may do exactly what
`kai run` does (checked with SelfSubjectAccessReviews and with real requests made as that account)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kai.deploy import crds
from tests.deploy.kube import REPO, Kube, load_documents

pytestmark = pytest.mark.e2e

SA = "system:serviceaccount:kai-scheduler:kai-scheduler"
NS = "kai-scheduler"
MERGE = {"Content-Type": "application/merge-patch+json"}

# (verb, group, resource, subresource, namespace, name): what kai run needs, from the run contract.
NEEDED = [
    *[(verb, "", res, "", None, "") for res in ("nodes", "namespaces") for verb in ("get", "list", "watch")],
    *[(verb, "", "pods", "", "team-a", "") for verb in ("get", "list", "watch", "patch", "delete")],
    ("create", "", "pods", "binding", "team-a", ""),
    ("create", "", "pods", "eviction", "team-a", ""),
    ("patch", "", "pods", "status", "team-a", ""),
    # GPU sharing: reservation pods in their namespace, a shared pod's device ConfigMap anywhere
    ("create", "", "pods", "", "kai-resource-reservation", ""),
    ("delete", "", "pods", "", "kai-resource-reservation", ""),
    ("create", "", "configmaps", "", "team-a", ""),
    ("patch", "", "configmaps", "", "team-a", ""),
    # the webhooks' own certificate and its CA in the release's webhook configurations
    ("create", "", "secrets", "", NS, ""),
    ("get", "", "secrets", "", NS, "kai-scheduler-webhook-tls"),
    ("update", "", "secrets", "", NS, "kai-scheduler-webhook-tls"),
    ("get", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", None, "kai-scheduler"),
    ("update", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", None, "kai-scheduler"),
    ("get", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", None, "kai-scheduler"),
    ("update", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", None, "kai-scheduler"),
    *[(verb, "scheduling.k8s.io", "priorityclasses", "", None, "") for verb in ("get", "list", "watch")],
    *[(verb, "scheduling.run.ai", "queues", "", None, "") for verb in ("get", "list", "watch")],
    ("patch", "scheduling.run.ai", "queues", "status", None, ""),
    *[
        (verb, "scheduling.run.ai", "podgroups", "", "team-a", "")
        for verb in ("get", "list", "watch", "create", "patch", "update")
    ],
    ("patch", "scheduling.run.ai", "podgroups", "status", "team-a", ""),
    ("create", "events.k8s.io", "events", "", "team-a", ""),
    ("patch", "events.k8s.io", "events", "", "team-a", ""),
    ("get", "apiextensions.k8s.io", "customresourcedefinitions", "", None, "queues.scheduling.run.ai"),
    ("create", "coordination.k8s.io", "leases", "", NS, ""),
    ("get", "coordination.k8s.io", "leases", "", NS, "kai-scheduler"),
    ("update", "coordination.k8s.io", "leases", "", NS, "kai-scheduler"),
    *[
        (verb, group, res, "", "team-a", "")
        for group, res in [
            ("apps", "deployments"),
            ("apps", "replicasets"),
            ("apps", "statefulsets"),
            ("batch", "jobs"),
            ("batch", "cronjobs"),
            ("ray.io", "rayclusters"),
            ("ray.io", "rayjobs"),
            ("ray.io", "rayservices"),
            ("kubeflow.org", "pytorchjobs"),
            ("kubeflow.org", "tfjobs"),
            ("kubeflow.org", "xgboostjobs"),
            ("kubeflow.org", "jaxjobs"),
            ("kubeflow.org", "mpijobs"),
            ("kubeflow.org", "notebooks"),
            ("jobset.x-k8s.io", "jobsets"),
            ("leaderworkerset.x-k8s.io", "leaderworkersets"),
        ]
        for verb in ("get", "list", "watch")
    ],
]

# A few of the many things it must not do.
DENIED = [
    ("delete", "", "nodes", "", None, ""),
    ("patch", "", "nodes", "", None, ""),
    ("get", "", "secrets", "", "team-a", ""),
    ("list", "", "secrets", "", None, ""),
    ("list", "", "configmaps", "", "team-a", ""),
    ("create", "", "pods", "", "team-a", ""),
    ("update", "", "pods", "", "team-a", ""),
    ("create", "", "pods", "exec", "team-a", ""),
    ("update", "scheduling.run.ai", "queues", "", None, ""),
    ("delete", "scheduling.run.ai", "queues", "", None, ""),
    ("delete", "scheduling.run.ai", "podgroups", "", "team-a", ""),
    ("create", "apiextensions.k8s.io", "customresourcedefinitions", "", None, ""),
    ("list", "apiextensions.k8s.io", "customresourcedefinitions", "", None, ""),
    ("get", "coordination.k8s.io", "leases", "", NS, "someone-elses-lease"),
    ("update", "coordination.k8s.io", "leases", "", "team-a", "kai-scheduler"),
    ("delete", "coordination.k8s.io", "leases", "", NS, "kai-scheduler"),
    ("create", "apps", "deployments", "", "team-a", ""),
    ("delete", "batch", "jobs", "", "team-a", ""),
    ("create", "rbac.authorization.k8s.io", "clusterroles", "", None, ""),
    ("create", "", "serviceaccounts", "token", NS, "kai-scheduler"),
    ("get", "", "configmaps", "", "team-a", ""),
    ("delete", "", "configmaps", "", "team-a", ""),
    ("get", "", "secrets", "", NS, "another-secret"),
    ("list", "", "secrets", "", NS, ""),
    ("update", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", None, "another-webhook"),
    ("create", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", None, ""),
    ("delete", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", None, "kai-scheduler"),
]

# The reservation pods' account: it reads and annotates its own pods, and nothing else.
RESERVATION_SA = "system:serviceaccount:kai-resource-reservation:kai-resource-reservation"
RESERVATION_NEEDED = [(verb, "", "pods", "", "kai-resource-reservation", "") for verb in ("get", "patch")]
RESERVATION_DENIED = [
    ("create", "", "pods", "", "kai-resource-reservation", ""),
    ("delete", "", "pods", "", "kai-resource-reservation", ""),
    ("patch", "", "pods", "", "team-a", ""),
    ("list", "", "pods", "", None, ""),
    ("get", "", "secrets", "", "kai-resource-reservation", ""),
]


# Fields kai's CRDs have beyond the KAI Scheduler CRDs of a released chart (see src/kai/deploy/crds/).
NEWER_FIELDS = {
    "queues.scheduling.run.ai": [("status", "fairShare")],
    "podgroups.scheduling.run.ai": [
        ("spec", "minSubGroup"),
        ("spec", "preemptionDelay"),
        ("spec", "stalenessGracePeriod"),
        ("spec", "safeToConsolidate"),
    ],
}


def kai_scheduler_shaped(crd: dict[str, Any]) -> dict[str, Any]:
    """A CRD as a KAI Scheduler release installs it: kai's, without the fields kai adds."""
    crd = copy.deepcopy(crd)
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    for part, field in NEWER_FIELDS[crd["metadata"]["name"]]:
        del schema[part]["properties"][field]
    return crd


@pytest.fixture(scope="module")
def kai_scheduler_objects(kube: Kube) -> dict[str, Any]:
    """A cluster where KAI Scheduler ran: its CRDs, a queue and a PodGroup; and what its Queue
    schema does to a fairShare status (returned)."""
    kube.apply_all(kai_scheduler_shaped(crd) for crd in crds.crd_manifests())
    kube.apply_all(
        [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
            {
                "apiVersion": "scheduling.run.ai/v2",
                "kind": "Queue",
                "metadata": {"name": "team-a"},
                "spec": {"resources": {"gpu": {"quota": 2, "limit": -1, "overQuotaWeight": 1}}},
            },
            {
                "apiVersion": "scheduling.run.ai/v2alpha2",
                "kind": "PodGroup",
                "metadata": {"name": "pg-from-kai", "namespace": "team-a"},
                "spec": {"minMember": 2, "queue": "team-a", "priorityClassName": "train"},
            },
        ]
    )
    status = {"status": {"fairShare": {"gpu": "2"}, "allocated": {"gpu": "1"}}}
    path = "/apis/scheduling.run.ai/v2/queues/team-a/status"
    response = kube.request("PATCH", path, json=status, headers=MERGE)
    assert response.status_code == 200, response.text
    return dict(kube.get(path)["status"])


@pytest.fixture(scope="module")
def installed(kube: Kube, kai_scheduler_objects: dict[str, Any]) -> Kube:
    """That cluster after `kubectl apply -f deploy/kai.yaml`, plus a node to work on."""
    kube.apply_all(load_documents((REPO / "deploy" / "kai.yaml").read_text()))
    kube.apply_all(
        [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": "gpu-node-0", "labels": {"nvidia.com/gpu.memory": "81920"}},
            },
        ]
    )
    return kube


def review(
    kube: Kube, verb: str, group: str, resource: str, sub: str, ns: str | None, name: str, *, user: str = SA
) -> bool:
    attributes: dict[str, Any] = {"verb": verb, "group": group, "resource": resource}
    attributes.update({k: v for k, v in (("subresource", sub), ("namespace", ns), ("name", name)) if v})
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }
    response = kube.as_user(user).request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json=body)
    assert response.status_code == 201, response.text
    return bool(response.json()["status"]["allowed"])


def test_kai_yaml_installs_every_object(installed: Kube) -> None:
    for obj in load_documents((REPO / "deploy" / "kai.yaml").read_text()):
        assert installed.get(installed.object_path(obj))["metadata"]["name"] == obj["metadata"]["name"]
    queues = installed.get("/apis/scheduling.run.ai/v2/queues")["items"]
    assert {q["metadata"]["name"]: q["spec"].get("parentQueue") for q in queues} == {
        "default-parent-queue": None,
        "default-queue": "default-parent-queue",
        "team-a": None,
    }


def test_kai_yaml_takes_over_kai_schedulers_crds_and_keeps_their_objects(
    installed: Kube, kai_scheduler_objects: dict[str, Any]
) -> None:
    # Under KAI Scheduler's Queue schema the API server drops kai's fairShare ...
    assert kai_scheduler_objects == {"allocated": {"gpu": "1"}}
    # ... the objects created under it survive the switch to kai's CRDs ...
    podgroup = installed.get("/apis/scheduling.run.ai/v2alpha2/namespaces/team-a/podgroups/pg-from-kai")
    assert podgroup["spec"] == {"minMember": 2, "queue": "team-a", "priorityClassName": "train"}
    # ... and kai's fields are kept from then on.
    path = "/apis/scheduling.run.ai/v2/queues/team-a/status"
    status = {"status": {"fairShare": {"gpu": "2"}}}
    assert installed.request("PATCH", path, json=status, headers=MERGE).status_code == 200
    assert installed.get(path)["status"] == {"allocated": {"gpu": "1"}, "fairShare": {"gpu": "2"}}
    spec = {"spec": {"minSubGroup": 1, "preemptionDelay": "30s", "safeToConsolidate": False}}
    response = installed.request(
        "PATCH", "/apis/scheduling.run.ai/v2alpha2/namespaces/team-a/podgroups/pg-from-kai", json=spec, headers=MERGE
    )
    assert response.status_code == 200, response.text
    assert response.json()["spec"]["preemptionDelay"] == "30s"


@pytest.mark.parametrize("attrs", NEEDED, ids=lambda a: "-".join(x for x in a if x))
def test_service_account_may_do_what_kai_run_does(installed: Kube, attrs: tuple[Any, ...]) -> None:
    assert review(installed, *attrs), f"{SA} may not {attrs}"


@pytest.mark.parametrize("attrs", DENIED, ids=lambda a: "-".join(x for x in a if x))
def test_service_account_may_not_do_anything_else(installed: Kube, attrs: tuple[Any, ...]) -> None:
    assert not review(installed, *attrs), f"{SA} may {attrs}"


@pytest.mark.parametrize("attrs", RESERVATION_NEEDED, ids=lambda a: "-".join(x for x in a if x))
def test_reservation_pods_may_annotate_themselves(installed: Kube, attrs: tuple[Any, ...]) -> None:
    assert review(installed, *attrs, user=RESERVATION_SA), f"{RESERVATION_SA} may not {attrs}"


@pytest.mark.parametrize("attrs", RESERVATION_DENIED, ids=lambda a: "-".join(x for x in a if x))
def test_reservation_pods_may_not_do_anything_else(installed: Kube, attrs: tuple[Any, ...]) -> None:
    assert not review(installed, *attrs, user=RESERVATION_SA), f"{RESERVATION_SA} may {attrs}"


def test_real_requests_as_the_service_account(installed: Kube) -> None:
    """The scheduler's own writes, made as its ServiceAccount, succeed; others are refused (403)."""
    sa = installed.as_user(SA)
    for name in ("train-0", "train-1"):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "team-a", "labels": {"kai.scheduler/queue": "default-queue"}},
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "main", "image": "busybox"}]},
        }
        assert installed.apply(pod).status_code in (200, 201)
    pods = "/api/v1/namespaces/team-a/pods"

    # The pod grouper: create the PodGroup, annotate the pod, write the PodGroup's status.
    podgroup = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "pg-train-0", "namespace": "team-a"},
        "spec": {"minMember": 1, "queue": "default-queue", "priorityClassName": "train"},
    }
    podgroups = "/apis/scheduling.run.ai/v2alpha2/namespaces/team-a/podgroups"
    assert sa.request("POST", podgroups, json=podgroup).status_code == 201
    annotate = {"metadata": {"annotations": {"pod-group-name": "pg-train-0"}}}
    assert sa.request("PATCH", f"{pods}/train-0", json=annotate, headers=MERGE).status_code == 200
    status = {"status": {"schedulingConditions": [{"type": "UnschedulableOnNodePool", "nodePool": "default"}]}}
    assert sa.request("PATCH", f"{podgroups}/pg-train-0/status", json=status, headers=MERGE).status_code == 200
    queue_status = {"status": {"fairShare": {"gpu": "0"}, "requested": {"gpu": "1"}}}
    response = sa.request(
        "PATCH", "/apis/scheduling.run.ai/v2/queues/default-queue/status", json=queue_status, headers=MERGE
    )
    assert response.status_code == 200, response.text

    # The PodScheduled condition of a waiting pod, then the binding.
    condition = {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}
    assert sa.request("PATCH", f"{pods}/train-0/status", json=condition, headers=MERGE).status_code == 200
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "train-0"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-node-0"},
    }
    assert sa.request("POST", f"{pods}/train-0/binding", json=binding).status_code == 201
    assert installed.get(f"{pods}/train-0")["spec"]["nodeName"] == "gpu-node-0"

    # Eviction both ways: the Eviction API, and a plain delete.
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "train-1", "namespace": "team-a"}}
    assert sa.request("POST", f"{pods}/train-1/eviction", json=eviction).status_code == 201
    assert sa.request("DELETE", f"{pods}/train-0").status_code == 200

    # An event on the pod, as the events.k8s.io API wants it.
    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "train-0.evicted", "namespace": "team-a"},
        "eventTime": "2026-01-02T03:04:05.000000Z",
        "reportingController": "kai-scheduler",
        "reportingInstance": "kai-scheduler-0",
        "action": "Evict",
        "reason": "Evicted",
        "note": "evicted by preempt",
        "type": "Normal",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "team-a", "name": "train-0"},
    }
    response = sa.request("POST", "/apis/events.k8s.io/v1/namespaces/team-a/events", json=event)
    assert response.status_code == 201, response.text

    # The Lease: create, read, renew.
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "kai-scheduler", "namespace": NS},
        "spec": {"holderIdentity": "kai-scheduler-0", "leaseDurationSeconds": 15},
    }
    leases = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
    assert sa.request("POST", leases, json=lease).status_code == 201
    current = sa.request("GET", f"{leases}/kai-scheduler").json()
    current["spec"]["holderIdentity"] = "kai-scheduler-1"
    assert sa.request("PUT", f"{leases}/kai-scheduler", json=current).status_code == 200

    # The startup check reads the CRDs.
    crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/podgroups.scheduling.run.ai"
    assert sa.request("GET", crd).status_code == 200

    # Refused.
    assert sa.request("GET", "/api/v1/namespaces/kai-scheduler/secrets").status_code == 403
    assert sa.request("DELETE", "/api/v1/nodes/gpu-node-0").status_code == 403
    assert sa.request("POST", pods, json={"metadata": {"name": "x"}}).status_code == 403
    assert sa.request("DELETE", "/apis/scheduling.run.ai/v2/queues/default-queue").status_code == 403
