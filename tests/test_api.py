"""API parsing: quantities exactly, and bad input reported with file, document, object and field."""

from __future__ import annotations

import pathlib

import pytest
from click.testing import CliRunner

from kai.api.quantity import amount, cpu_millis
from kai.cli.main import main

QUANTITIES = [
    ("cpu", "500m", 500.0),
    ("cpu", "0.1", 100.0),
    ("cpu", 2, 2000.0),
    ("cpu", "1e3", 1_000_000.0),
    ("memory", "2Gi", 2 * 2**30),
    ("memory", "1G", 1e9),
    ("memory", "128974848", 128974848.0),
    ("memory", "129e6", 129e6),
    ("memory", "123Mi", 123 * 2**20),
    ("nvidia.com/gpu", "0.5", 0.5),
    ("nvidia.com/gpu", "1", 1.0),
]


@pytest.mark.parametrize(("resource", "text", "expected"), QUANTITIES, ids=[f"{r}={t}" for r, t, _ in QUANTITIES])
def test_quantities(resource: str, text: object, expected: float) -> None:
    value = cpu_millis(text) if resource == "cpu" else amount(text)
    assert value == expected


QUEUE = """apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {{name: team-a}}
spec:
  resources:
    gpu: {{quota: {quota}, limit: -1, overQuotaWeight: 1}}
"""
POD = """apiVersion: v1
kind: Pod
metadata:
  name: p1
  annotations: {annotations}
spec:
  schedulerName: kai-scheduler
  containers:
  - name: main
    image: busybox
    resources: {{limits: {limits}}}
"""

BAD = [
    (
        "queue-quota-not-a-number",
        QUEUE.format(quota='"lots"'),
        'document 1: Queue team-a: spec.resources.gpu.quota: must be a number, got "lots"',
    ),
    (
        "queue-quota-quoted",
        QUEUE.format(quota='"4"'),
        'Queue team-a: spec.resources.gpu.quota: must be a number, got "4" (a string: write it without quotes)',
    ),
    (
        "queue-without-resources",
        "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: team-a}\nspec: {priority: 100}\n",
        "Queue team-a: spec.resources: is missing; KAI's admission refuses a Queue without resources",
    ),
    (
        "podgroup-min-member-zero",
        "apiVersion: scheduling.run.ai/v2alpha2\nkind: PodGroup\nmetadata: {name: g}\nspec: {minMember: 0, queue: q}\n",
        "PodGroup g: spec.minMember: must be at least 1, got 0",
    ),
    (
        "pod-bad-quantity",
        POD.format(annotations="{}", limits='{"nvidia.com/gpu": "two"}'),
        "Pod p1: spec.containers[0].resources.limits.nvidia.com/gpu: must be a quantity",
    ),
    (
        "fraction-out-of-range",
        POD.format(annotations='{gpu-fraction: "1.5"}', limits="{}"),
        'Pod p1: metadata.annotations.gpu-fraction: must be greater than 0 and less than 1, got "1.5"',
    ),
    (
        "fraction-not-a-number",
        POD.format(annotations='{gpu-fraction: "half"}', limits="{}"),
        'Pod p1: metadata.annotations.gpu-fraction: must be a number between 0 and 1, got "half"',
    ),
    (
        "fraction-with-whole-gpus",
        POD.format(annotations='{gpu-fraction: "0.5"}', limits='{"nvidia.com/gpu": "1"}'),
        "Pod p1: metadata.annotations.gpu-fraction: cannot be combined with a nvidia.com/gpu request",
    ),
    (
        "fraction-with-memory",
        POD.format(annotations='{gpu-fraction: "0.5", gpu-memory: "2000"}', limits="{}"),
        "Pod p1: metadata.annotations.gpu-memory: cannot be combined with gpu-fraction",
    ),
    ("missing-name", "apiVersion: v1\nkind: Pod\nmetadata: {}\nspec: {}\n", "Pod: metadata.name: is missing"),
    ("not-yaml", "kind: [unclosed\n", "is not valid YAML: line 2, column 1"),
]


@pytest.mark.parametrize(("text", "message"), [(t, m) for _, t, m in BAD], ids=[n for n, _, _ in BAD])
def test_bad_input_exits_2_naming_the_field(text: str, message: str, tmp_path: pathlib.Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    result = CliRunner().invoke(main, ["sim", "-f", str(path), "-o", "json"])
    assert result.exit_code == 2
    assert str(path) in result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_every_bad_object_is_listed(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "two-bad.yaml"
    path.write_text(QUEUE.format(quota='"lots"') + "---\n" + QUEUE.replace("team-a", "team-b").format(quota="[2]"))
    result = CliRunner().invoke(main, ["sim", "-f", str(path)])
    assert result.exit_code == 2
    assert "document 1: Queue team-a" in result.stderr
    assert "document 2: Queue team-b" in result.stderr


def test_unknown_kind_is_reported_and_skipped(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "svc.yaml"
    path.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {}\n")
    result = CliRunner().invoke(main, ["sim", "-f", str(path), "-o", "json"])
    assert result.exit_code == 0
    assert "skipped 1 object(s) of kinds kai does not read (Service); -v lists them" in result.stderr
    result = CliRunner().invoke(main, ["sim", "-f", str(path), "-o", "json", "-v"])
    assert result.exit_code == 0
    assert "document 1: v1 Service web: kai does not read this kind" in result.stderr


def test_unknown_config_key(tmp_path: pathlib.Path) -> None:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("placementStrategy: {gpu: spread}\nbinpackEverything: true\n")
    manifest = tmp_path / "empty.yaml"
    manifest.write_text(QUEUE.format(quota=1))
    result = CliRunner().invoke(main, ["sim", "-f", str(manifest), "--config", str(cfg)])
    assert result.exit_code == 2
    assert "binpackEverything: unknown key" in result.stderr


def test_unknown_plugin_in_config(tmp_path: pathlib.Path) -> None:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("plugins: {gpupacker: {}}\n")
    manifest = tmp_path / "q.yaml"
    manifest.write_text(QUEUE.format(quota=1))
    result = CliRunner().invoke(main, ["sim", "-f", str(manifest), "--config", str(cfg)])
    assert result.exit_code == 2
    assert "plugins.gpupacker: unknown plugin; known plugins: proportion" in result.stderr
    cfg.write_text("plugins: {minruntime: {reclaimResolveMethod: nearest}}\n")
    result = CliRunner().invoke(main, ["sim", "-f", str(manifest), "--config", str(cfg)])
    assert result.exit_code == 2
    assert "plugins.minruntime.reclaimResolveMethod: must be one of lca, queue" in result.stderr
