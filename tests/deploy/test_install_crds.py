"""`kai install crds` and the CRD helpers `kai run` uses for its startup check (no cluster needed)."""

from __future__ import annotations

import yaml
from click.testing import CliRunner

from kai.cli.main import main
from kai.deploy import crds


def test_install_crds_prints_both_crds_as_one_yaml_stream() -> None:
    result = CliRunner().invoke(main, ["install", "crds"])
    assert result.exit_code == 0, result.output
    docs = [d for d in yaml.safe_load_all(result.output) if d]
    assert [(d["apiVersion"], d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "podgroups.scheduling.run.ai"),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "queues.scheduling.run.ai"),
    ]
    assert result.output == crds.crd_yaml()
    assert docs == list(crds.crd_manifests())  # read with libyaml: the same objects as PyYAML's own parser


def test_required_crds_describe_the_shipped_files() -> None:
    for required, manifest in zip(crds.REQUIRED_CRDS, crds.crd_manifests(), strict=True):
        spec = manifest["spec"]
        assert manifest["metadata"]["name"] == required.name == f"{required.plural}.{required.group}"
        assert (spec["group"], spec["names"]["plural"], spec["names"]["kind"]) == (
            required.group,
            required.plural,
            required.kind,
        )
        assert spec["scope"] == ("Namespaced" if required.namespaced else "Cluster")
        assert [v["name"] for v in spec["versions"] if v["served"] and v["storage"]] == [required.version]


def test_missing_crds_names_each_absent_crd_and_how_to_install_it() -> None:
    installed = ["queues.scheduling.run.ai", "rayclusters.ray.io"]
    assert crds.missing_crds(installed) == ("podgroups.scheduling.run.ai",)
    assert crds.missing_crds([*installed, "podgroups.scheduling.run.ai"]) == ()
    message = crds.missing_crds_message(crds.missing_crds([]))
    assert "podgroups.scheduling.run.ai, queues.scheduling.run.ai" in message
    assert "kai install crds | kubectl apply -f -" in message
    assert "deploy/helm/kai" in message
