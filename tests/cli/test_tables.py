"""Every table of `kai sim` at 80 and 120 columns, against golden files, and the rules they keep."""

from __future__ import annotations

import pathlib

import pytest

from tests.cli.golden import check, kai, scene, scene_flags

# (golden name, scene file, extra arguments): each view on the scene that exercises it most
CASES = [
    ("pods", "07-gpu-sharing.yaml", ["--show", "pods"]),
    ("pods-wide", "07-gpu-sharing.yaml", ["--show", "pods", "-o", "wide"]),
    ("podgroups", "06-ray.yaml", ["--show", "podgroups"]),
    ("podgroups-wide", "06-ray.yaml", ["--show", "podgroups", "-o", "wide"]),
    ("queues", "07-gpu-sharing.yaml", ["--show", "queues"]),
    ("queues-wide", "03-fair-share.yaml", ["--show", "queues", "-o", "wide"]),
    ("nodes", "07-gpu-sharing.yaml", ["--show", "nodes"]),
    ("nodes-wide", "07-gpu-sharing.yaml", ["--show", "nodes", "-o", "wide"]),
    ("evictions", "05-inference-reclaims.yaml", ["--show", "evictions"]),
    ("default-views", "06-ray.yaml", []),
]


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize(("name", "file", "extra"), CASES, ids=[c[0] for c in CASES])
def test_table_matches_golden(name: str, file: str, extra: list[str], columns: int) -> None:
    check(f"{name}-{columns}", kai(["sim", "-f", scene(file), *scene_flags(file), *extra], columns=columns))


def test_nothing_is_cut_at_80_columns() -> None:
    """kubectl never truncates: every pod name, status and node is printed whole, with no ellipsis."""
    out = kai(["sim", "-f", scene("07-gpu-sharing.yaml"), "--until-idle", "-o", "wide", "--show", "pods"], columns=80)
    assert "…" not in out
    for name in (
        "raycluster-half-gpu-shared-gpu-worker-4xzjl",
        "raycluster-half-gpu-shared-gpu-worker-hxbpv",
        "vllm-test-07-58964699c5-bhnjb",
    ):
        row = next(line for line in out.splitlines() if line.startswith(name))
        assert "Running" in row and "node-0" in row


def test_shared_gpu_group_is_whole_only_in_wide() -> None:
    narrow = kai(["sim", "-f", scene("07-gpu-sharing.yaml"), "--until-idle", "--show", "pods"])
    wide = kai(["sim", "-f", scene("07-gpu-sharing.yaml"), "--until-idle", "--show", "pods", "-o", "wide"])
    worker = "raycluster-half-gpu-shared-gpu-worker-4xzjl"
    group = next(line for line in wide.splitlines() if line.startswith(worker)).split()[7]
    assert len(group) == 36  # a whole uuid
    assert group[:8] in next(line for line in narrow.splitlines() if line.startswith(worker))
    assert group not in narrow


def resource_rows(out: str) -> dict[tuple[str, str], list[str]]:
    """(queue, resource) -> [quota, limit, fair share, allocated, requested] from the resources table."""
    rows: dict[tuple[str, str], list[str]] = {}
    queue = ""
    for line in out.split("Queue resources")[1].splitlines()[2:]:
        words = line.split()
        if len(words) == 1:
            queue = words[0]
        elif len(words) == 6:
            rows[(queue, words[0])] = words[1:]
    return rows


def test_queues_show_cpu_and_memory_with_units() -> None:
    """A CPU-only workload is not all zeros: cpu in cores, memory as a quantity, - for unlimited."""
    rows = resource_rows(kai(["sim", "-f", scene("07-gpu-sharing.yaml"), "--until-idle", "--show", "queues"]))
    assert rows[("test", "gpu")] == ["-", "-", "0.9", "0.9", "0.9"]
    assert rows[("test", "cpu")] == ["-", "-", "12", "12", "12"]
    assert rows[("test", "memory")] == ["-", "-", "12G", "12G", "12G"]


def test_unused_default_queues_are_left_out_used_ones_shown() -> None:
    unused = kai(["sim", "-f", scene("01-gang.yaml"), "--until-idle", "--show", "queues"])
    used = kai(["sim", "-f", scene("06-ray.yaml"), "--until-idle", "--show", "queues"])
    assert "default-queue" not in unused
    assert "default-queue" in used and "default-parent-queue" in used


def test_unknown_view_is_a_usage_error() -> None:
    from click.testing import CliRunner

    from kai.cli.main import main

    result = CliRunner().invoke(main, ["sim", "-f", scene("01-gang.yaml"), "--show", "pods,gpus"])
    assert result.exit_code == 2
    assert 'unknown view "gpus"' in result.output


def test_queue_columns_print_the_spec_as_written(tmp_path: pathlib.Path) -> None:
    """PRIORITY and DISPLAYNAME as the spec gives them (empty when left out), as kubectl get queues."""
    manifest = tmp_path / "queues.yaml"
    manifest.write_text(
        """\
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: research}
spec:
  displayName: Research department
  priority: 200
  resources: {gpu: {quota: -1, limit: -1, overQuotaWeight: 1}}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: team-a}
spec:
  parentQueue: research
  resources: {gpu: {quota: 2, limit: -1, overQuotaWeight: 1}}
"""
    )
    out = kai(["sim", "-f", str(manifest), "--show", "queues"])
    table = out.split("\nQueues\n")[1].split("\n\n")[0].splitlines()
    assert table[0].split() == ["NAME", "PRIORITY", "PARENT", "CHILDREN", "DISPLAYNAME"]
    assert table[1].split() == ["research", "200", '["team-a"]', "Research", "department"]
    assert table[2].split() == ["team-a", "research"]
