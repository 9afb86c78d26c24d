"""Unknown fields are refused as `kubectl apply` (server-side strict field validation) refuses them, for
every kind kai reads whose schema it knows; keys under our label and annotation prefixes are checked too."""

from __future__ import annotations

import copy
import json
import pathlib
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from kai.cli.main import main

UNLIMITED = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
QUEUE: dict[str, Any] = {
    "apiVersion": "scheduling.run.ai/v2",
    "kind": "Queue",
    "metadata": {"name": "team-a"},
    "spec": {"resources": {"gpu": dict(UNLIMITED), "cpu": dict(UNLIMITED), "memory": dict(UNLIMITED)}},
}
POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p1", "labels": {"kai.scheduler/queue": "default-queue"}},
    "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "main", "image": "busybox"}]},
}
PODGROUP: dict[str, Any] = {
    "apiVersion": "scheduling.run.ai/v2alpha2",
    "kind": "PodGroup",
    "metadata": {"name": "pg", "namespace": "default"},
    "spec": {"minMember": 1, "queue": "default-queue"},
}
DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": copy.deepcopy(POD["spec"])},
    },
}
RAYCLUSTER: dict[str, Any] = {
    "apiVersion": "ray.io/v1",
    "kind": "RayCluster",
    "metadata": {"name": "rc", "labels": {"kai.scheduler/queue": "default-queue"}},
    "spec": {
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": copy.deepcopy(POD["spec"])}},
        "workerGroupSpecs": [],
    },
}


def run(tmp_path: pathlib.Path, *docs: dict[str, Any], config: str | None = None) -> Result:
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(list(docs)))
    args = ["sim", "-f", str(path), "-o", "json", "--actions", "allocate"]
    if config is not None:
        (tmp_path / "config.yaml").write_text(config)
        args += ["--config", str(tmp_path / "config.yaml")]
    result = CliRunner().invoke(main, args)
    assert "Traceback" not in result.output
    return result


def edited(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of `doc` with `value` set at the dotted `path` (a list index as a number)."""
    out = copy.deepcopy(doc)
    cursor: Any = out
    parts = path.split(".")
    for part in parts[:-1]:
        cursor = cursor[int(part)] if isinstance(cursor, list) else cursor.setdefault(part, {})
    cursor[parts[-1]] = value
    return out


UNKNOWN = [
    (
        QUEUE,
        "spec.resources.gpu.quotaa",
        4,
        "Queue team-a: spec.resources.gpu.quotaa: unknown field; did you mean quota?",
    ),
    (
        QUEUE,
        "spec.resources.cpu.overQuotaWieght",
        2,
        "Queue team-a: spec.resources.cpu.overQuotaWieght: unknown field; did you mean overQuotaWeight?",
    ),
    (QUEUE, "spec.parentQeueu", "x", "Queue team-a: spec.parentQeueu: unknown field; did you mean parentQueue?"),
    (QUEUE, "status.fairshare", {}, "Queue team-a: status.fairshare: unknown field; did you mean fairShare?"),
    (PODGROUP, "spec.minMembr", 2, "PodGroup pg: spec.minMembr: unknown field; did you mean minMember?"),
    (POD, "spec.schedulerNmae", "x", "Pod p1: spec.schedulerNmae: unknown field; did you mean schedulerName?"),
    (
        POD,
        "spec.containers.0.resoures",
        {},
        "Pod p1: spec.containers[0].resoures: unknown field; did you mean resources?",
    ),
    (POD, "metadata.lables", {}, "Pod p1: metadata.lables: unknown field; did you mean labels?"),
    (
        DEPLOYMENT,
        "spec.template.spec.containers.0.imagee",
        "x",
        "Deployment web: spec.template.spec.containers[0].imagee: unknown field; did you mean image?",
    ),
    (
        RAYCLUSTER,
        "metadata.annotaions",
        {},
        "RayCluster rc: metadata.annotaions: unknown field; did you mean annotations?",
    ),
]


@pytest.mark.parametrize(("doc", "path", "value", "message"), UNKNOWN, ids=[u[1] for u in UNKNOWN])
def test_an_unknown_field_is_refused(
    doc: dict[str, Any], path: str, value: Any, message: str, tmp_path: pathlib.Path
) -> None:
    result = run(tmp_path, edited(doc, path, value))
    assert result.exit_code == 2
    assert f"{tmp_path / 'in.yaml'}: document 1: {message}" in result.stderr


def test_every_unknown_field_is_listed(tmp_path: pathlib.Path) -> None:
    doc = edited(edited(QUEUE, "spec.resources.gpu.quotaa", 4), "spec.displayNme", "A")
    result = run(tmp_path, doc)
    assert result.exit_code == 2
    assert "spec.resources.gpu.quotaa: unknown field" in result.stderr
    assert "spec.displayNme: unknown field; did you mean displayName?" in result.stderr


@pytest.mark.parametrize(
    ("doc", "path", "value", "message"),
    [
        (QUEUE, "spec.priority", "high", 'Queue team-a: spec.priority: must be an integer, got "high"'),
        (PODGROUP, "spec.minMember", 1.5, "PodGroup pg: spec.minMember: must be an integer, got 1.5"),
        (PODGROUP, "spec.subGroups", {"a": 1}, "PodGroup pg: spec.subGroups: must be a list"),
    ],
)
def test_our_crds_check_json_types(
    doc: dict[str, Any], path: str, value: Any, message: str, tmp_path: pathlib.Path
) -> None:
    result = run(tmp_path, edited(doc, path, value))
    assert result.exit_code == 2
    assert message in result.stderr


@pytest.mark.parametrize(
    ("where", "key", "message"),
    [
        ("labels", "kai.scheduler/queu", "unknown key under kai.scheduler/; did you mean kai.scheduler/queue?"),
        (
            "annotations",
            "sim.kai.scheduler/durration",
            "unknown key under sim.kai.scheduler/; did you mean sim.kai.scheduler/duration?",
        ),
        (
            "annotations",
            "kai.scheduler/preemption-dealy",
            "unknown key under kai.scheduler/; did you mean kai.scheduler/preemption-delay?",
        ),
    ],
)
def test_an_unknown_key_under_our_prefix_is_refused(where: str, key: str, message: str, tmp_path: pathlib.Path) -> None:
    result = run(tmp_path, edited(POD, f"metadata.{where}", {key: "1"}))
    assert result.exit_code == 2
    assert f"Pod p1: metadata.{where}.{key}: {message}" in result.stderr


def test_a_typo_in_a_template_of_an_operator_kind_is_refused(tmp_path: pathlib.Path) -> None:
    doc = edited(RAYCLUSTER, "spec.headGroupSpec.template.metadata", {"labels": {"kai.scheduler/queeu": "q"}})
    result = run(tmp_path, doc)
    assert result.exit_code == 2
    assert (
        "RayCluster rc: spec.headGroupSpec.template.metadata.labels.kai.scheduler/queeu: unknown key under "
        "kai.scheduler/; did you mean kai.scheduler/queue?"
    ) in result.stderr


def test_near_misses_of_unprefixed_keys_and_keys_kai_ignores_warn(tmp_path: pathlib.Path) -> None:
    doc = edited(POD, "metadata.annotations", {"gpu-fracton": "0.5", "kai.scheduler/skip-podgrouper": "true"})
    result = run(tmp_path, doc)
    assert result.exit_code == 0, result.output
    assert (
        "Pod p1: metadata.annotations.gpu-fracton: is not a key kai reads; did you mean gpu-fraction?" in result.stderr
    )
    assert (
        "metadata.annotations.kai.scheduler/skip-podgrouper: KAI's pod-grouper opt-out: kai accepts it" in result.stderr
    )
    reasons = {e["reason"] for e in json.loads(result.stdout)["events"] if e["object"] == "Pod/p1"}
    assert {"UnknownKey", "NotSupported"} <= reasons


def test_the_configured_queue_label_key_is_known(tmp_path: pathlib.Path) -> None:
    doc = edited(POD, "metadata.labels", {"kai.scheduler/team": "default-queue"})
    assert run(tmp_path, doc).exit_code == 2
    result = run(tmp_path, doc, config="queueLabelKey: kai.scheduler/team\n")
    assert result.exit_code == 0, result.output


def test_valid_objects_of_every_checked_kind_pass(tmp_path: pathlib.Path) -> None:
    result = run(tmp_path, QUEUE, POD, PODGROUP, DEPLOYMENT, RAYCLUSTER)
    assert result.exit_code == 0, result.output


def test_the_shipped_model_fields_are_lightkube_models_own() -> None:
    """The fields kai checks built-in kinds against (`kai.api.model_fields.json`, read instead of importing
    lightkube at start) are those of the pinned lightkube-models, in their order (which decides between
    equally near did-you-mean guesses). If this fails after upgrading lightkube-models, rewrite the copy:
    `python -m kai.api.model_fields`."""
    from kai.api import model_fields, strict

    shipped = model_fields.shipped()
    assert json.dumps(shipped) == json.dumps(model_fields.from_lightkube(strict.MODEL_ROOTS))
    assert {"core_v1.PodSpec", "core_v1.Container", "meta_v1.ObjectMeta"} <= set(shipped)
