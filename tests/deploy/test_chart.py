"""The Helm chart and deploy/kai.yaml, read as files: in step with the CRDs and with kai itself
(flags, configuration, priority classes, default queues, the kinds the pod grouper reads), and
RBAC without wildcards. The API server's view of them is in test_chart_on_cluster.py."""

from __future__ import annotations

import importlib.util
import os
import shlex
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from kai.api.priority import default_priority_class, parse_priority_class
from kai.api.queue import parse_queue
from kai.cluster.config import parse_config
from kai.deploy import crds
from kai.podgrouper.registry import registered_kinds
from kai.sim.defaults import default_priority_classes, default_queues
from tests.deploy.kube import REPO, load_documents

CHART = REPO / "deploy" / "helm" / "kai"
MANIFEST = REPO / "deploy" / "kai.yaml"

# `kai run`'s command line, from the run contract.
RUN_FLAGS = {
    "--kubeconfig",
    "--context",
    "--config",
    "--scheduler-name",
    "--leader-elect",
    "--no-leader-elect",
    "--leader-election-namespace",
    "--leader-election-id",
    "--metrics-bind-address",
    "--health-probe-bind-address",
    "--kube-api-qps",
    "--kube-api-burst",
    "--resource-reservation-namespace",
    "--resource-reservation-service-account",
    "--resource-reservation-image",
    "--resource-reservation-timeout",
    "--resource-reservation-runtime-class",
    "--gpu-cdi",
    "--no-gpu-cdi",
    "--gpu-sharing",
    "--no-gpu-sharing",
    "--webhook",
    "--webhook-bind-address",
    "--webhook-host",
    "--webhook-secret",
    "--webhook-configuration",
    "--gpu-pod-runtime-class",
    "--log-format",
    "-v",
}


def load_render_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kai_render", REPO / "deploy" / "render.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def manifest() -> list[dict[str, Any]]:
    return load_documents(MANIFEST.read_text())


def one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    [found] = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    return found


def rules(objects: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for obj in objects:
        if obj["kind"] in ("ClusterRole", "Role"):
            yield from obj["rules"]


def test_chart_crds_are_the_crds_kai_ships() -> None:
    for name, text in crds.crd_file_texts():
        assert (CHART / "crds" / name).read_text() == text, f"run python deploy/render.py: {name} drifted"
    assert sorted(p.name for p in (CHART / "crds").iterdir()) == sorted(name for name, _ in crds.crd_file_texts())


def test_kai_yaml_is_the_chart_rendered_with_default_values() -> None:
    render = load_render_script()
    helm = render.find_helm()
    if helm is None:
        pytest.skip("no helm binary ($HELM, PATH, or `python deploy/render.py --fetch-helm`)")
    assert render.stale(helm) == [], "run python deploy/render.py"


def test_kai_yaml_installs_namespace_crds_and_every_chart_object(manifest: list[dict[str, Any]]) -> None:
    kinds = [(o["kind"], o["metadata"]["name"]) for o in manifest]
    assert kinds[0] == ("Namespace", "kai-scheduler")
    assert kinds[1:3] == [("CustomResourceDefinition", name) for name in crds.REQUIRED_CRD_NAMES]
    assert [o for o in manifest if o["kind"] == "CustomResourceDefinition"] == list(crds.crd_manifests())
    for kind in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap"):
        assert any(k == kind for k, _ in kinds), kind
    assert ("Deployment", "kai-scheduler") in kinds
    assert ("Service", "kai-scheduler-metrics") in kinds
    assert not any(kind == "ServiceMonitor" for kind, _ in kinds)  # behind metrics.serviceMonitor.enabled
    namespaced = [o for o in manifest if o["kind"] in ("ServiceAccount", "Role", "ConfigMap", "Deployment")]
    # kai's own objects in its namespace; the GPU reservation pods' account and rights in theirs
    assert {o["metadata"]["namespace"] for o in namespaced} == {"kai-scheduler", "kai-resource-reservation"}
    assert ("Namespace", "kai-resource-reservation") in kinds
    assert {o["kind"] for o in namespaced if o["metadata"]["namespace"] == "kai-resource-reservation"} == {
        "ServiceAccount",
        "Role",
    }


def test_no_rbac_rule_uses_a_wildcard(manifest: list[dict[str, Any]]) -> None:
    found = list(rules(manifest))
    assert found
    for rule in found:
        for key in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
            assert not any("*" in value for value in rule.get(key, [])), rule
    for template in (CHART / "templates").glob("*role*.yaml"):
        assert "*" not in template.read_text(), template


def test_every_kind_the_pod_grouper_knows_is_readable(manifest: list[dict[str, Any]]) -> None:
    role = one(manifest, "ClusterRole", "kai-scheduler-run")
    readable = {
        (group, resource)
        for rule in role["rules"]
        if {"get", "list", "watch"} <= set(rule["verbs"])
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    for key in registered_kinds():
        group, kind = key.split("/")
        assert (group, kind.lower() + "s") in readable, f"the ClusterRole cannot read {key} top owners"


def test_deployment_runs_two_leader_elected_replicas_with_the_contracts_flags(manifest: list[dict[str, Any]]) -> None:
    deployment = one(manifest, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    args = container["args"]
    flags = [arg.split("=", 1)[0] for arg in args if arg.startswith("-")]
    assert set(flags) <= RUN_FLAGS, set(flags) - RUN_FLAGS
    assert "--leader-elect" in args and "--no-leader-elect" not in args
    assert "--scheduler-name=kai-scheduler" in args
    assert "--leader-election-namespace=kai-scheduler" in args
    assert "--leader-election-id=kai-scheduler" in args
    assert args[args.index("-v") + 1].isdigit()
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert f"--metrics-bind-address=0.0.0.0:{ports['metrics']}" in args
    assert f"--health-probe-bind-address=0.0.0.0:{ports['health']}" in args
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert container["resources"]["requests"]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["serviceAccountName"] == one(manifest, "ServiceAccount", "kai-scheduler")["metadata"]["name"]
    service = one(manifest, "Service", "kai-scheduler-metrics")
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"


def test_the_mounted_configuration_is_one_kai_accepts(manifest: list[dict[str, Any]]) -> None:
    deployment = one(manifest, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    config_arg = next(a for a in container["args"] if a.startswith("--config="))
    config_path = Path(config_arg.split("=", 1)[1])
    [mount] = [m for m in container["volumeMounts"] if config_path.parent == Path(m["mountPath"])]
    [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    configmap = one(manifest, "ConfigMap", volume["configMap"]["name"])
    text = configmap["data"][config_path.name]
    parse_config(yaml.safe_load(text), file=config_path.name)


def test_the_lease_role_names_the_lease_kai_run_holds(manifest: list[dict[str, Any]]) -> None:
    role = one(manifest, "Role", "kai-scheduler-leader-election")
    binding = one(manifest, "RoleBinding", "kai-scheduler-leader-election")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "kai-scheduler", "namespace": "kai-scheduler"}]
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert named == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["kai-scheduler"],
            "verbs": ["get", "update"],
        }
    ]


def test_priority_classes_and_default_queues_are_the_ones_kai_sim_assumes(manifest: list[dict[str, Any]]) -> None:
    shipped = [parse_priority_class(o, source=None) for o in manifest if o["kind"] == "PriorityClass"]
    assumed = default_priority_classes()
    assert [(p.name, p.value, p.preemption_policy) for p in shipped] == [
        (p.name, p.value, p.preemption_policy) for p in assumed
    ]
    assert default_priority_class("train", 50).preemption_policy == "PreemptLowerPriority"
    queues = [parse_queue(o, source=None) for o in manifest if o["kind"] == "Queue"]
    assert [(q.meta.name, q.parent, q.resources) for q in queues] == [
        (q.meta.name, q.parent, q.resources) for q in default_queues(created=0.0)
    ]


def test_readme_install_commands_use_the_chart_the_manifest_and_kai_install_crds() -> None:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Install on a cluster", 1)[1].split("\n## ", 1)[0]
    commands = [line.strip() for line in section.splitlines() if line.strip().startswith(("helm ", "kubectl "))]
    helm_installs = [shlex.split(c) for c in commands if c.startswith("helm install")]
    assert len(helm_installs) == 2
    for args in helm_installs:
        assert args[2:6] == ["kai", "deploy/helm/kai", "-n", "kai-scheduler"]
        settings = [args[i + 1].split("=")[0] for i, a in enumerate(args) if a == "--set"]
        values = yaml.safe_load((CHART / "values.yaml").read_text())
        for setting in settings:  # every --set names a value the chart has
            node = values
            for part in setting.split("."):
                assert isinstance(node, dict) and part in node, setting
                node = node[part]
    assert commands.count("kubectl apply -f deploy/kai.yaml") == 2
    assert "kai install crds | kubectl apply -f -" in section


def test_dockerfile_runs_kai_run_as_the_user_the_chart_expects(manifest: list[dict[str, Any]]) -> None:
    lines = [line.strip() for line in (REPO / "Dockerfile").read_text().splitlines()]
    assert lines[[i for i, line in enumerate(lines) if line.startswith("FROM ")][-1]] == "FROM python:3.11-slim"
    assert lines[-1] == 'ENTRYPOINT ["kai", "run"]'
    [user] = [line.split()[1] for line in lines if line.startswith("USER ")]
    pod = one(manifest, "Deployment")["spec"]["template"]["spec"]
    assert user == f"{pod['securityContext']['runAsUser']}:{pod['securityContext']['runAsGroup']}"


def test_reservation_pods_get_the_namespace_account_and_image_the_chart_installs(
    manifest: list[dict[str, Any]],
) -> None:
    [container] = one(manifest, "Deployment")["spec"]["template"]["spec"]["containers"]
    flags = dict(arg.split("=", 1) for arg in container["args"] if arg.startswith("--") and "=" in arg)
    namespace = flags["--resource-reservation-namespace"]
    account = flags["--resource-reservation-service-account"]
    assert one(manifest, "Namespace", namespace)
    assert one(manifest, "ServiceAccount", account)["metadata"]["namespace"] == namespace
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert flags["--resource-reservation-image"] == f"kai-resource-reservation:{chart['appVersion']}"
    assert float(flags["--resource-reservation-timeout"]) == 40
    creators = [
        b["subjects"]
        for b in manifest
        if b["kind"] == "RoleBinding"
        and b["metadata"]["namespace"] == namespace
        and any(r.get("verbs") == ["create"] for r in one(manifest, "Role", b["roleRef"]["name"])["rules"])
    ]
    assert creators == [[{"kind": "ServiceAccount", "name": "kai-scheduler", "namespace": "kai-scheduler"}]]


def test_webhooks_reach_kai_run_through_the_service_with_its_own_certificate(manifest: list[dict[str, Any]]) -> None:
    [container] = one(manifest, "Deployment")["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    flags = dict(arg.split("=", 1) for arg in args if arg.startswith("--") and "=" in arg)
    assert "--webhook" in args and "--no-gpu-sharing" in args  # KAI's default: global.gpuSharing=false
    service = one(manifest, "Service", "kai-scheduler-webhook")
    assert flags["--webhook-host"] == "kai-scheduler-webhook.kai-scheduler.svc"
    port = {p["name"]: p["containerPort"] for p in container["ports"]}["webhook"]
    assert flags["--webhook-bind-address"] == f"0.0.0.0:{port}"
    assert service["spec"]["ports"][0]["targetPort"] == "webhook"
    paths = set()
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        configuration = one(manifest, kind, flags["--webhook-configuration"])
        for webhook in configuration["webhooks"]:
            ref = webhook["clientConfig"]["service"]
            assert (ref["name"], ref["namespace"], ref["port"]) == ("kai-scheduler-webhook", "kai-scheduler", 443)
            assert webhook["failurePolicy"] == "Ignore" and webhook["sideEffects"] == "None"
            paths.add(ref["path"])
    assert paths == {"/validate-queue", "/validate-podgroup", "/validate-pod", "/mutate-pod"}
    namespace, secret = flags["--webhook-secret"].split("/")
    named = [r for r in one(manifest, "Role", "kai-scheduler-webhook")["rules"] if r.get("resourceNames")]
    assert named == [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [secret], "verbs": ["get", "update"]}
    ]
    assert one(manifest, "Role", "kai-scheduler-webhook")["metadata"]["namespace"] == namespace
    [rule] = one(manifest, "ClusterRole", "kai-scheduler-run-webhook")["rules"]
    assert rule["resourceNames"] == [flags["--webhook-configuration"]]


def helm_template(*values: str) -> list[dict[str, Any]]:
    """The chart rendered by a real `helm template` with `--set` values (skips without helm)."""
    helm = load_render_script().find_helm()
    if helm is None:
        pytest.skip("no helm binary ($HELM, PATH, or `python deploy/render.py --fetch-helm`)")
    args = [str(helm), "template", "kai", str(CHART), "--namespace", "kai-scheduler"]
    for value in values:
        args += ["--set", value]
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "HELM_CACHE_HOME": tmp, "HELM_CONFIG_HOME": tmp, "HELM_DATA_HOME": tmp}
        rendered = subprocess.run(args, check=True, capture_output=True, text=True, env=env).stdout
    return load_documents(rendered)


def test_webhook_values_set_the_failure_policy_the_excluded_namespaces_sharing_and_the_runtime_class() -> None:
    objects = helm_template(
        "webhook.failurePolicy=Fail",
        "webhook.excludedNamespaces={team-x,team-y}",
        "global.gpuSharing=true",
        "webhook.gpuPodRuntimeClassName=nvidia",
    )
    webhooks = [
        webhook
        for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
        for webhook in one(objects, kind, "kai-scheduler")["webhooks"]
    ]
    assert len(webhooks) == 4 and all(w["failurePolicy"] == "Fail" for w in webhooks)
    for webhook in webhooks:
        if webhook["name"] == "queues.kai.scheduler":  # Queues have no namespace
            assert "namespaceSelector" not in webhook
            continue
        assert webhook["namespaceSelector"] == {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": ["team-x", "team-y", "kai-resource-reservation"],
                }
            ]
        }, webhook["name"]
    [container] = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert "--gpu-sharing" in container["args"] and "--no-gpu-sharing" not in container["args"]
    assert "--gpu-pod-runtime-class=nvidia" in container["args"]


def test_webhooks_off_leave_no_webhook_configuration_and_kai_run_serves_none() -> None:
    objects = helm_template("webhook.enabled=false")
    kinds = {o["kind"] for o in objects}
    assert not kinds & {"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"}
    [container] = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert not [a for a in container["args"] if a.startswith("--webhook")]
